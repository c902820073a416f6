"""The survey report: one self-contained folder, ``index.html`` (inline CSS, the explorer's plotly figures, model
search and model view (``explorer``), one small inline script for the model table's filter box and sortable headers;
no network), the PNGs of its static figures and ``measurements.csv`` beside it.

The summary numbers are computed by plain functions returning DataFrames / dicts (``batch_summary``,
``nvml_summary``, ``ranked_models``, ``failures``, ``gpus.gpu_comparison``, ``model_table.model_table``) so tests can
check them; ``build_report`` only lays them out. Each section's figures are a table of ``figures.Figure``
declarations (the survey's ``SURVEY_FIGURES`` and ``OP_CLASS_FIGURES`` here, ``nas_plots.FIGURES``,
``gpu_plots.FIGURES``, ``atlas_html.FIGURES``), drawn by ``figures.render``: nothing here draws. A store with
successful rows of several GPUs gets a GPU comparison section (figure and table). The page is filled with
``string.Template``: no template-engine dependency.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from string import Template

import numpy as np
import pandas as pd

from utilscope.errors import UsageError
from utilscope.files import REPORT_FOLDER, check_output_folder, make_folder
from utilscope.report import (
    atlas,
    atlas_html,
    explorer,
    families,
    gpu_plots,
    gpus,
    interactive,
    model_table,
    model_view,
    nas_plots,
    plots,
)
from utilscope.report.figures import Figure, Kind, render
from utilscope.units import percent, si, significant

MEASUREMENT_COLUMNS = plots.SERIES + [
    "batch",
    "family",
    "status",
    "flops_per_sample",
    "latency_ms",
    "samples_per_s",
    "achieved_tflops",
    "utilization",
    "peak_tflops",
    "peak_source",
    "nvml_util",
]
OP_CLASS_COLUMNS = plots.SERIES + ["batch", "op_class", "flop_share", "time_share"]
RANKED = 10  # rows in the top and bottom tables
SCROLLED_FAILURES = 30  # a longer failure table scrolls in a box
_NUMBER = r"[-+–]?[\d.,]*[%×]?"  # cells that align right: 12, 1,234, 3.5%, 0.25×, –

SURVEY_FIGURES = (  # each a function of the measurements, in page order
    Figure(
        "utilization_vs_batch",
        "Utilization vs batch size",
        "One line per model through its batch sizes, one panel per backend; colour is the family. Hover a point to "
        "name it; drag to zoom, double-click to reset.",
        interactive.utilization_vs_batch,
        Kind.INTERACTIVE,
    ),
    Figure(
        "utilization_vs_gflops",
        "Utilization vs GFLOPs per sample",
        "Each model at its largest successful batch; GFLOPs on a log axis, marker shape is the backend.",
        interactive.utilization_vs_gflops,
        Kind.INTERACTIVE,
    ),
    Figure(
        "throughput_vs_gflops",
        "Throughput vs GFLOPs, with iso-utilization lines",
        "Each model at its largest successful batch. Grey dotted lines: samples/s = u × peak / FLOPs per sample for "
        "u = 1, 3, 10, 30, 100 %.",
        interactive.throughput_vs_gflops,
        Kind.INTERACTIVE,
    ),
    Figure(
        "utilization_by_family",
        "Utilization by family",
        "Boxes over the models of a family at their largest successful batch, one box per backend.",
        plots.plot_utilization_by_family,
        Kind.STATIC,
    ),
    Figure(
        "flop_vs_nvml",
        "FLOP utilization vs nvml_util",
        "nvml_util counts the time any kernel runs; FLOP utilization counts the work done. Points far below the "
        "dashed line are busy GPUs doing little arithmetic.",
        interactive.flop_vs_nvml,
        Kind.INTERACTIVE,
    ),
)
OP_CLASS_FIGURES = (  # of plots.attributed_rows
    Figure(
        "op_class_shares",
        "Op-class shares of time and FLOPs",
        "For representative attributed models (evenly spread from lowest to highest utilization): the upper bar of "
        "each pair is the share of measured time per op class, the lower bar the share of FLOPs.",
        plots.plot_op_class_shares,
        Kind.STATIC,
    ),
)
MODEL_TABLE_ID = "models"


# ---------------------------------------------------------------------------------------------- numbers


def check_columns(frame: pd.DataFrame, required: list[str], name: str) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise UsageError(f"{name} lacks columns {', '.join(missing)} (needs {', '.join(required)})")


def batch_summary(measurements: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: rows ok / failed, median and best utilization (and who reached it), median per backend."""
    ok = plots.ok_rows(measurements)
    rows = []
    for batch, group in measurements.groupby("batch"):
        good = ok[ok["batch"] == batch]
        best = good.loc[good["utilization"].idxmax()] if not good.empty else None
        row = dict(
            batch=int(batch),
            ok=len(good),
            failed=len(group) - len(good),
            median_utilization=good["utilization"].median(),
            best_utilization=np.nan if best is None else best["utilization"],
            best_model="" if best is None else f"{best['model']} ({best['backend']})",
        )
        for backend in sorted(measurements["backend"].astype(str).unique()):
            row[f"median {backend}"] = good[good["backend"].astype(str) == backend]["utilization"].median()
        rows.append(row)
    return pd.DataFrame(rows)


def pooled_condition(rows: pd.DataFrame) -> str:
    """What a median over ``rows`` pools: their precisions, backends and batch sizes ("fp16; graph and inference;
    batch 1–256")."""

    def listed(column: str) -> str:
        values = sorted(rows[column].astype(str).unique())
        return " and ".join(values) if len(values) <= 2 else ", ".join(values[:-1]) + " and " + values[-1]

    low, high = int(rows["batch"].min()), int(rows["batch"].max())
    return f"{listed('precision')}; {listed('backend')}; batch {low}" + (f"–{high}" if high > low else "")


def nvml_summary(measurements: pd.DataFrame) -> dict:
    """How nvml_util (percent busy) compares to FLOP utilization on the successful rows that have both."""
    ok = plots.ok_rows(measurements)
    both = ok[ok["nvml_util"].notna() & ok["utilization"].notna()]
    if both.empty:
        return dict(rows=0)
    flop_percent = 100 * both["utilization"]
    ratio = (both["nvml_util"] / flop_percent.where(flop_percent > 0)).median()
    # Spearman = Pearson correlation of the ranks (pandas' method="spearman" would need scipy)
    ranks = both[["nvml_util", "utilization"]].rank()
    spearman = ranks["nvml_util"].corr(ranks["utilization"]) if len(both) > 2 else np.nan
    return dict(
        rows=len(both),
        pooled=pooled_condition(both),
        median_nvml=both["nvml_util"].median() / 100,
        median_flop=both["utilization"].median(),
        median_ratio=ratio,
        spearman=spearman,
        nvml_above=float((both["nvml_util"] > flop_percent).mean()),
    )


def ranked_models(measurements: pd.DataFrame, count: int = RANKED, best: bool = True) -> pd.DataFrame:
    """The ``count`` best (or worst) models by utilization, each at its largest successful batch and best backend."""
    ok = plots.ok_rows(measurements)
    if ok.empty:
        return ok
    at_largest = plots.largest_batch(ok).sort_values("utilization", ascending=False)
    per_model = at_largest.drop_duplicates("model", keep="first")
    return per_model.head(count) if best else per_model.tail(count).iloc[::-1]


def failures(measurements: pd.DataFrame) -> pd.DataFrame:
    """Every row whose status is not ``"ok"``, sorted by model, backend and batch."""
    failed = measurements[measurements["status"] != "ok"]
    return failed.sort_values(["model", "backend", "batch"])


# ---------------------------------------------------------------------------------------------- files


def write_csv(measurements: pd.DataFrame, path: Path) -> Path:
    """All rows, failures included; list and dict cells (notes, environment) become JSON text."""
    frame = measurements.copy()
    for column in [c for c in frame.columns if pd.api.types.is_object_dtype(frame[c])]:
        if frame[column].map(lambda v: isinstance(v, list | dict | tuple)).any():
            frame[column] = frame[column].map(lambda v: json.dumps(v, default=str, sort_keys=True))
    frame.to_csv(path, index=False)
    return path


# ---------------------------------------------------------------------------------------------- page

_PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>$title</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1300px;
       padding: 0 1.5em; color: #222; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
.lead { color: #555; margin-top: 0; }
.numbers { display: flex; flex-wrap: wrap; gap: 1em; margin: 1em 0; }
.number { background: #f4f6f8; border-radius: 6px; padding: 0.6em 1em; min-width: 9em; }
.number b { display: block; font-size: 1.5em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.5em 0 1em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #e4e4e4; }
th { background: #f4f6f8; }
.n { text-align: right; font-variant-numeric: tabular-nums; }
.t { text-align: left; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
.filter { margin: 0.3em 0; }
.filter input { font: inherit; padding: 0.2em 0.5em; width: 22em; }
.filter span { color: #555; margin-left: 1em; }
.scroll { max-height: 40em; overflow: auto; border: 1px solid #e4e4e4; display: inline-block; max-width: 100%; }
.scroll table { margin: 0; }
.scroll thead th { position: sticky; top: 0; }
.scroll thead tr:nth-child(2) th { top: 1.7em; }
table.sortable thead tr:last-child th { cursor: pointer; user-select: none; }
th[data-sort="asc"]::after { content: " \\25B2"; }
th[data-sort="desc"]::after { content: " \\25BC"; }
$explorer_css
</style>
</head>
<body>
<h1>$title</h1>
<p class="lead">$lead</p>
<div class="numbers">$numbers</div>
$search
<h2>Utilization at each batch size</h2>
$batch_table
<h2>nvml_util vs FLOP utilization</h2>
<p>$nvml_text</p>
<h2>Figures</h2>
$figures
${gpu_comparison}${atlas}$model_view<h2>Top $ranked models by utilization</h2>
<p>Each model at its largest successful batch, on its best backend.</p>
$top_table
<h2>Bottom $ranked models by utilization</h2>
<p>Each model at its largest successful batch, on its best backend.</p>
$bottom_table
<h2>Every model</h2>
$model_section
<h2>Failures</h2>
$failure_table
<p class="lead">Every row, failures included, is in <code>measurements.csv</code> beside this page.
Utilization = achieved FLOP/s / peak FLOP/s of the row's peak (see peak_source); FLOPs count 2 per multiply-add.</p>
<script>$script</script>
$explorer_scripts
</body>
</html>
""")


def _table(frame: pd.DataFrame, empty: str = "none", words: tuple[str, ...] = (), attributes: str = "") -> str:
    """An HTML table of ``frame`` (cells escaped); numeric-looking columns align right, text columns left (cells
    equal to one of ``words``, such as "not measured", do not make a column text). Two-level columns get a header
    row of groups (consecutive equal first levels share one cell) above the column names. ``attributes`` go into
    the ``<table>`` tag as they are (``'id="models" class="sortable"'``)."""
    if frame.empty:
        return f"<p>{html.escape(empty)}</p>"
    cells = frame.astype(object).where(frame.notna(), "–").astype(str)
    kinds = ["n" if (cells[c].str.fullmatch(_NUMBER) | cells[c].isin(words)).all() else "t" for c in cells.columns]

    def row(values, tag: str) -> str:
        cells = (f'<{tag} class="{k}">{html.escape(str(v))}</{tag}>' for v, k in zip(values, kinds, strict=True))
        return "<tr>" + "".join(cells) + "</tr>"

    header = row(cells.columns, "th")
    if isinstance(cells.columns, pd.MultiIndex):
        groups = itertools.groupby(cells.columns.get_level_values(0))
        spans = "".join(f'<th colspan="{len(list(g))}">{html.escape(str(name))}</th>' for name, g in groups)
        header = f"<tr>{spans}</tr>" + row(cells.columns.get_level_values(1), "th")
    body = "".join(row(values, "td") for values in cells.itertuples(index=False))
    return f"<table{' ' + attributes if attributes else ''}><thead>{header}</thead><tbody>{body}</tbody></table>"


def _percent(value: float) -> str:
    return "–" if pd.isna(value) else percent(value)


def _number(value: float, spec: str) -> str:
    return "–" if pd.isna(value) else format(value, spec)


def _batch_table(measurements: pd.DataFrame) -> str:
    """``batch_summary`` as a table; its columns over every row of a batch size say what they pool when the rows are
    of several precisions or backends ("median utilization (pooled: graph and inference)")."""
    summary = batch_summary(measurements)
    for column in [c for c in summary.columns if "utilization" in c or c.startswith("median ")]:
        summary[column] = summary[column].map(_percent)
    names = {column: column.replace("_", " ") for column in summary.columns}
    pooled = pooled_conditions(measurements)
    if pooled:
        for column in ("median_utilization", "best_utilization"):
            names[column] = f"{names[column]} (pooled: {pooled})"
    return _table(summary.rename(columns=names))


def pooled_conditions(rows: pd.DataFrame) -> str:
    """The precisions and backends ``rows`` hold where there are several ("fp16 and bf16; graph and inference");
    "" when they are of one precision and one backend."""
    parts = []
    for column in ("precision", "backend"):
        values = sorted(rows[column].astype(str).unique())
        if len(values) > 1:
            parts.append(" and ".join(values) if len(values) == 2 else ", ".join(values[:-1]) + " and " + values[-1])
    return "; ".join(parts)


def _ranked_table(measurements: pd.DataFrame, best: bool) -> str:
    rows = ranked_models(measurements, RANKED, best)
    if rows.empty:
        return _table(rows, "no successful measurements")
    shown = pd.DataFrame(
        {
            "model": rows["model"],
            "family": rows["family"],
            "GFLOPs/sample": (rows["flops_per_sample"] / 1e9).map(lambda v: f"{v:.3g}"),
            "batch": rows["batch"].astype(int),
            "backend": rows["backend"],
            "precision": rows["precision"],
            "utilization": rows["utilization"].map(_percent),
            "samples/s": rows["samples_per_s"].map(lambda v: f"{v:,.0f}"),
            "achieved TFLOP/s": rows["achieved_tflops"].map(lambda v: f"{v:.1f}"),
            "nvml_util": rows["nvml_util"].map(lambda v: "–" if pd.isna(v) else f"{v:.0f}%"),
        }
    )
    return _table(shown)


def _failure_table(measurements: pd.DataFrame) -> str:
    """Every failed row; more than ``SCROLLED_FAILURES`` scroll in a box of their own."""
    rows = failures(measurements)
    columns = ["model", "backend", "precision", "batch", "status"]
    table = _table(rows[columns], "none: every row measured successfully")
    return f'<div class="scroll">{table}</div>' if len(rows) > SCROLLED_FAILURES else table


def _model_cells(table: pd.DataFrame, batches: list[int]) -> pd.DataFrame:
    """The model table as text cells under two-level headers; configuration columns only where the store has
    several values (``model`` always); a failed or missing cell at a batch reads its status."""
    shown = {("", "model"): table["model"], ("", "family"): table["family"]}
    for column in ["backend", "precision", "resolution", "device", "software"]:
        if table[column].nunique(dropna=False) > 1:
            shown[("", column)] = table[column]
    shown[("", "GFLOPs/sample")] = table["gflops_per_sample"].map(_significant)
    shown[("", "params (M)")] = table["params_millions"].map(_significant)
    for batch in batches:
        status = table[f"status_at_{batch}"].to_numpy()
        utilization = table[f"utilization_at_{batch}"].map(_percent).to_numpy()
        shown[(f"batch {batch}", "utilization")] = np.where(status == "ok", utilization, status)
        shown[(f"batch {batch}", "samples/s")] = table[f"samples_per_s_at_{batch}"].map(_significant)
    shown[("", "status")] = table["status"]
    frame = pd.DataFrame({key: np.asarray(values) for key, values in shown.items()})
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


def _model_section(measurements: pd.DataFrame) -> str:
    """The filter box, its row count and the sortable table of every series (``model_table.model_table``)."""
    table, batches = model_table.model_table(measurements), model_table.table_batches(measurements)
    text = (
        f"One row per model and configuration ({len(table)} rows, {table['model'].nunique()} models), at batch "
        f"{' and '.join(str(b) for b in batches)}: utilization against the row's peak, samples/s; a failed cell "
        f"reads oom / error, {model_table.NOT_MEASURED}: no row at that batch. Type words to filter the rows (each "
        "must appear); click a header to sort."
    )
    words = (model_table.NOT_MEASURED, "oom", "error")
    rows = _table(_model_cells(table, batches), words=words, attributes=f'id="{MODEL_TABLE_ID}" class="sortable"')
    count = f"{MODEL_TABLE_ID}-count"
    box = (
        f'<div class="filter"><input type="search" placeholder="filter: resnet, oom, EfficientNet graph ..." '
        f'data-filter="{MODEL_TABLE_ID}" data-count="{count}" aria-label="filter the model table">'
        f'<span id="{count}">{len(table)} of {len(table)} rows</span></div>'
    )
    return f'<p>{html.escape(text)}</p>\n{box}\n<div class="scroll">{rows}</div>'


def _nvml_text(measurements: pd.DataFrame) -> str:
    found = nvml_summary(measurements)
    if not found["rows"]:
        return "No successful row has an nvml_util sample."
    ratio, spearman = _number(found["median_ratio"], ".1f"), _number(found["spearman"], ".2f")
    return (
        f"On the {found['rows']} successful rows with an nvml_util sample ({found['pooled']}, pooled), the median "
        "nvml_util is "
        f"<b>{_percent(found['median_nvml'])}</b> while the median FLOP utilization is "
        f"<b>{_percent(found['median_flop'])}</b>: nvml_util reads a median <b>{ratio}×</b> higher (row by row), "
        f"and is above FLOP utilization on {_percent(found['nvml_above'])} of the rows. "
        f"Rank correlation (Spearman) between the two: {spearman}. nvml_util is the share of time "
        "a kernel was running, not how much of the arithmetic units that kernel used."
    )


def _numbers(measurements: pd.DataFrame) -> str:
    ok = plots.ok_rows(measurements)
    kinds = measurements["status"].map(plots.status_kind).value_counts()
    cards = [
        ("models", f"{measurements['model'].nunique()}"),
        ("families", f"{plots.family_labels(measurements).nunique()}"),
        ("rows", f"{len(measurements)}"),
        ("ok / oom / error", f"{kinds.get('ok', 0)} / {kinds.get('oom', 0)} / {kinds.get('error', 0)}"),
        *utilization_cards(ok),
    ]
    return "".join(f'<div class="number"><b>{html.escape(v)}</b>{html.escape(k)}</div>' for k, v in cards)


HEADLINE_CONDITIONS = 4  # conditions with headline utilization cards; the rest are in the tables below


def utilization_cards(ok: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) cards of the successful rows' median utilization at each series' largest batch and the best
    one, per condition (precision, backend, and layout where the rows have several), each named: rows of two
    conditions are not the same work. The ``HEADLINE_CONDITIONS`` with the most rows, and a card counting the rest."""
    if ok.empty:
        return [("median utilization, largest batch", "–"), ("best utilization", "–")]
    layouts = "memory_format" in ok and ok["memory_format"].nunique() > 1
    keys = ["precision", "backend"] + (["memory_format"] if layouts else [])
    groups = sorted(ok.groupby(keys, sort=True), key=lambda group: -len(group[1]))  # stable: by name on a tie
    cards = []
    for condition, rows in groups[:HEADLINE_CONDITIONS]:
        named = " · ".join(map(str, condition))
        median = plots.largest_batch(rows)["utilization"].median()
        cards += [
            (f"median utilization, largest batch ({named})", _percent(median)),
            (f"best utilization ({named})", _percent(rows["utilization"].max())),
        ]
    if len(groups) > HEADLINE_CONDITIONS:
        cards.append(("more conditions, in the tables below", str(len(groups) - HEADLINE_CONDITIONS)))
    return cards


def _lead(measurements: pd.DataFrame) -> str:
    def listed(column: str) -> str:
        return ", ".join(sorted(measurements[column].dropna().astype(str).unique())) or "–"

    batches = sorted(measurements["batch"].unique())
    peaks = measurements[["peak_tflops", "peak_source"]].dropna().drop_duplicates()
    peak_text = "; ".join(f"{si(p * 1e12, 'FLOP/s')} ({s})" for p, s in peaks.itertuples(index=False)) or "–"
    text = (
        f"Device: {listed('device')}. Software: {listed('software')}. Precision: {listed('precision')}. "
        f"Backends: {listed('backend')}. Batch sizes: {', '.join(str(b) for b in batches)}. "
        f"Peak: {peak_text}."
    )
    return html.escape(text)


def _family_note(measurements: pd.DataFrame) -> str:
    """With more families than ``families.ALL_COLOURED``: which of them the figures colour, else ""."""
    counts = families.family_counts(measurements)
    coloured = families.coloured_families(counts)
    if len(coloured) == len(counts):
        return ""
    text = (
        f"{len(counts)} families: the figures colour the {len(coloured)} with the most models "
        f"({', '.join(coloured)}) and draw the other {len(counts) - len(coloured)} in light grey; the table of every "
        "model below has each model's family."
    )
    return f"<p>{html.escape(text)}</p>\n"


# ---------------------------------------------------------------------------------------------- GPU comparison


def _peak_text(device: str, peaks: list[tuple[str, float, str]]) -> str:
    shown = ", ".join(
        f"{precision} {si(peak * 1e12, 'FLOP/s')} ({source or 'source not recorded'})"
        for precision, peak, source in peaks
    )
    return f"{device} {shown or '–'}"


def _gpu_intro(measurements: pd.DataFrame, devices: list[str], batches: list[int]) -> str:
    rows, left_out = gpus.comparison_rows(measurements)
    ok = plots.ok_rows(rows)["device"].value_counts()
    peaks = gpus.device_peaks(rows)
    others = ", ".join(f"{device} ({ok[device]})" for device in devices[1:])
    text = (
        f"Successful rows of {len(devices)} GPUs: {devices[0]} ({ok[devices[0]]} rows; the reference, as the GPU "
        f"with the most successful rows), {others}. Utilization is against each GPU's own peak (each row's "
        f"peak_tflops): {'; '.join(_peak_text(d, peaks.get(d, [])) for d in devices)}. "
    )
    for device in [d for d in devices if any(gpus.unknown_peak(source) for *_, source in peaks.get(d, []))]:
        text += (
            f"The peak of {device} is unknown (no datasheet entry): its utilization is against its measured GEMM "
            "ceiling, which reads higher than a datasheet peak would; compare its samples/s instead. "
        )
    if batches:
        text += f"Compared at batch {' and '.join(str(b) for b in batches)}: the smallest and the largest batch "
        text += "size with successful rows on two GPUs or more. "
    else:
        text += "No batch size has successful rows on two GPUs: nothing to compare. "
    if left_out:
        counts = ", ".join(f"{device} {count}" for device, count in left_out.items())
        text += (
            "Each GPU's rows come from its configuration (software, memory format) with the most successful rows; "
            f"rows of other configurations are not compared: {counts}."
        )
    return text


def _ratio_text(comparison: pd.DataFrame, reference: str) -> str:
    found = gpus.median_ratios(comparison)
    parts = []
    for device, rows in found.groupby("device", sort=False):
        at = ", ".join(f"{_number(r.median, '.3g')}× at batch {r.batch} ({r.cells} cells)" for r in rows.itertuples())
        parts.append(f"{device} {at}")
    return f"Median samples/s ÷ {reference}'s, over the cells successful on both: {'; '.join(parts)}."


def _gpu_table(comparison: pd.DataFrame, devices: list[str]) -> str:
    keys = comparison.index.to_frame(index=False)
    shown = {("", column): keys[column] for column in ["model", "precision", "backend"]}
    if keys["resolution"].nunique() > 1:
        shown[("", "resolution")] = keys["resolution"]
    shown[("", "batch")] = keys["batch"].astype(int)
    for device in devices:
        status = comparison[(device, "status")].to_numpy()
        utilization = comparison[(device, "utilization")].map(_percent).to_numpy()
        shown[(device, "utilization")] = np.where(status == "ok", utilization, status)
        shown[(device, "samples/s")] = comparison[(device, "samples_per_s")].map(_significant).to_numpy()
        if (device, gpus.RATIO) in comparison.columns:
            shown[(device, "samples/s ÷ ref.")] = comparison[(device, gpus.RATIO)].map(_ratio).to_numpy()
    frame = pd.DataFrame({key: np.asarray(values) for key, values in shown.items()})
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return _table(frame, words=(gpus.NOT_MEASURED, "oom", "error"))


def _significant(value: float) -> str:
    return "–" if pd.isna(value) else significant(value)


def _ratio(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.3g}×"


def _gpu_section(measurements: pd.DataFrame, out_dir: Path) -> str:
    """The GPU comparison (intro, figure, median ratios, table) when two GPUs or more have successful rows, else ""."""
    devices = gpus.compared_devices(measurements)
    if len(devices) < 2:
        return ""
    comparison = gpus.gpu_comparison(measurements)
    batches = sorted(int(b) for b in comparison.index.get_level_values("batch").unique())
    intro = html.escape(_gpu_intro(measurements, devices, batches))
    if comparison.empty:
        return f"<h2>GPU comparison</h2>\n<p>{intro}</p>\n"
    figure = render(gpu_plots.FIGURES, measurements, out_dir)
    table_text = (
        "Per model, precision and backend at each compared batch: each GPU's utilization (against its own peak) and "
        f"samples/s and, for the others, samples/s ÷ {devices[0]}'s. not measured: no row of that GPU for the cell; "
        "oom / error: its row failed (see Failures)."
    )
    return (
        f"<h2>GPU comparison</h2>\n<p>{intro}</p>\n{figure}\n<p>{html.escape(_ratio_text(comparison, devices[0]))}</p>"
        f"\n<p>{html.escape(table_text)}</p>\n{_gpu_table(comparison, devices)}\n"
    )


def _figures(measurements: pd.DataFrame, op_classes: pd.DataFrame, records: dict[str, dict], out_dir: Path) -> str:
    """The survey's figures, the op-class shares and, for a store of sampled architectures, the NAS figures."""
    survey = render(SURVEY_FIGURES, measurements, out_dir)
    shares = render(OP_CLASS_FIGURES, plots.attributed_rows(op_classes, measurements), out_dir)
    return "\n".join(part for part in (survey, shares, nas_plots.nas_figures(measurements, records, out_dir)) if part)


def build_report(
    measurements: pd.DataFrame,
    op_classes: pd.DataFrame,
    out_dir: str | Path,
    records: dict[str, dict] | None = None,
    published: pd.DataFrame | None = None,
    predicted: pd.DataFrame | None = None,
    prediction_failures: Sequence[str] = (),
    atlas_frame: pd.DataFrame | None = None,
) -> Path:
    """Write ``index.html``, one PNG per static figure and ``measurements.csv`` into ``out_dir``; returns the HTML
    path.

    ``measurements`` is ``Store.frame()`` (one row per measurement, failures included), ``op_classes`` is
    ``Store.op_class_frame()`` (may be empty), ``records`` ``Store.model_records()`` (the NAS architectures'),
    ``published`` ``Store.published_frame()`` (others' rows: with them, the page has a GPU atlas), ``predicted``
    ``model_view.predicted_rows``'s rows and ``prediction_failures`` its failures (None: the model view says
    predictions were left out); ``atlas_frame`` the atlas rows when the caller has them (``report.workflow``),
    else computed here.
    Raises ``UsageError``, writing nothing, when there is no measurement, a column is missing (naming it) or
    ``out_dir`` cannot be a folder (an existing file, under a file).
    """
    if measurements.empty:
        raise UsageError("no measurements to report (an empty store: run `utilscope survey` into it first)")
    check_columns(measurements, MEASUREMENT_COLUMNS, "measurements")
    measurements = families.with_current_families(measurements)
    if not op_classes.empty:  # an empty frame (no attributed model) may come without columns
        check_columns(op_classes, OP_CLASS_COLUMNS, "op_classes")
    out_dir = check_output_folder(out_dir, REPORT_FOLDER)
    make_folder(out_dir, REPORT_FOLDER)
    write_csv(measurements, out_dir / "measurements.csv")
    frame = atlas_frame if atlas_frame is not None else atlas.atlas_rows(measurements, published)
    page = _PAGE.substitute(
        title="utilscope: GPU utilization of CNN inference",
        lead=_lead(measurements),
        numbers=_numbers(measurements),
        explorer_css=explorer.CSS,
        search=explorer.search_box(),
        batch_table=_batch_table(measurements),
        nvml_text=_nvml_text(measurements),
        figures=_family_note(measurements) + _figures(measurements, op_classes, records or {}, out_dir),
        gpu_comparison=_gpu_section(measurements, out_dir),
        atlas=atlas_html.atlas_section(frame, out_dir),
        model_view=explorer.section(model_view.model_rows(frame, predicted), predicted, list(prediction_failures)),
        ranked=RANKED,
        top_table=_ranked_table(measurements, best=True),
        bottom_table=_ranked_table(measurements, best=False),
        model_section=_model_section(measurements),
        failure_table=_failure_table(measurements),
        script=model_table.SCRIPT,
        explorer_scripts=explorer.scripts(),
    )
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
