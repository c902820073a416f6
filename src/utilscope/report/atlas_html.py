"""The GPU atlas section of the report: its figures (``FIGURES``: static ones from ``atlas_plots``, the point clouds
from ``interactive``) and a table in which a reader picks the GPUs (check boxes) and the models (a filter box) to
compare. Empty when the store has one GPU and no published rows."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from utilscope.report import atlas, atlas_plots, interactive
from utilscope.report.figures import Figure, Kind, render

TABLE_ID = "atlas-table"
FIGURES = (  # each a function of the atlas rows (atlas.atlas_rows), in page order
    Figure(
        "atlas_gpus",
        "Utilization per GPU",
        "One point per model@resolution and GPU, each model at the same offset in every GPU's column; GPUs by their "
        "fp16 tensor peak. Hover a point to name it; the search at the top highlights a model on every GPU. CNNs: "
        "the published tables' transformers and hybrids are the legend's '· non-CNN' entries, hidden until clicked.",
        interactive.atlas_gpu_points,
        Kind.INTERACTIVE,
    ),
    Figure(
        "atlas_classes",
        "Utilization per GPU and conv class",
        "One point per model and resolution in timm's condition (amp, NCHW, eager), one table per GPU: dense, grouped "
        "and depthwise CNNs, by counted FLOP shares (attention hybrids, not CNNs, are in the table below).",
        atlas_plots.plot_class_distribution,
        Kind.STATIC,
    ),
    Figure(
        "atlas_slope",
        "One model across GPUs",
        "The same network's FLOP utilization on each GPU, GPUs ordered by their fp16 tensor peak; each GPU's row "
        "at its table's batch (the table below gives a batch other than 1024).",
        atlas_plots.plot_slope,
        Kind.STATIC,
    ),
    Figure(
        "atlas_rank",
        "Throughput rank correlation between GPUs",
        "Spearman's rank correlation of samples/s over the model@resolution rows each pair of GPUs shares, each at "
        "its table's batch (2048 on the PRO 6000, smaller where a GPU ran out of memory); CNNs only.",
        atlas_plots.plot_rank_correlation,
        Kind.STATIC,
    ),
    Figure(
        "atlas_intensity",
        "Utilization against arithmetic intensity",
        "Counted FLOPs per counted (unfused) byte, one panel per GPU; the dashed line is the GPU's ridge point, its "
        "fp16 tensor peak over its memory bandwidth. Colour: family; hover a point to name it. Non-CNN models: the "
        "legend's '· non-CNN' entries, hidden until clicked.",
        interactive.atlas_intensity,
        Kind.INTERACTIVE,
    ),
    Figure(
        "atlas_dynamo",
        "torch.compile over eager per GPU",
        "Samples/s of a table's -dynamo twin over its eager table, for the same model, resolution and batch.",
        atlas_plots.plot_dynamo_gain,
        Kind.STATIC,
    ),
)
SCRIPT = """
document.querySelectorAll("input[data-gpu]").forEach(function (box) {
  box.addEventListener("change", function () {
    document.querySelectorAll("." + box.dataset.gpu).forEach(function (cell) { cell.hidden = !box.checked; });
  });
});
"""


def _cells(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """Each row's two cells of its GPU: utilization (with the batch when not 1024) and samples/s."""
    return [
        (f"{utilization:.1%}{'' if batch == 1024 else f' (b{int(batch)})'}", f"{samples:,.0f}")
        for utilization, batch, samples in zip(rows["utilization"], rows["batch"], rows["samples_per_s"], strict=True)
    ]


def picker_table(rows: pd.DataFrame) -> str:
    """Rows: model@resolution, sorted; per GPU a utilization and a samples/s column, classed by GPU (the check boxes
    show and hide them; "–" where the GPU has no row of it); sortable, filtered by the box above it."""
    gpus = table_gpus(rows)
    rows = rows.dropna(subset=["model", "resolution"])  # as a groupby of the two leaves them out
    keys = list(zip(rows["model"], rows["resolution"], strict=True))
    by_key: dict[tuple, dict[str, tuple[str, str]]] = {}
    classes: dict[tuple, object] = {}
    for key, gpu, conv, cells in zip(keys, rows["gpu"], rows["conv_class"], _cells(rows), strict=True):
        by_key.setdefault(key, {})[gpu] = cells
        classes.setdefault(key, conv)  # the first row's
    head = "".join(f'<th colspan="2" class="g-{gpu}">{html.escape(gpu)}</th>' for gpu in gpus)
    sub = "".join(f'<th class="n g-{gpu}">utilization</th><th class="n g-{gpu}">samples/s</th>' for gpu in gpus)
    body = []
    for model, resolution in sorted(by_key):
        cells = [
            f"<td>{html.escape(model)}</td>",
            f'<td class="n">{resolution}</td>',
            f"<td>{html.escape(str(classes[model, resolution]))}</td>",
        ]
        for gpu in gpus:
            utilization, samples = by_key[model, resolution].get(gpu, ("–", "–"))
            cells.append(f'<td class="n g-{gpu}">{utilization}</td><td class="n g-{gpu}">{samples}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    header = (
        f'<tr><th colspan="3"></th>{head}</tr><tr><th>model</th><th class="n">res</th><th>conv class</th>{sub}</tr>'
    )
    return f'<table id="{TABLE_ID}" class="sortable"><thead>{header}</thead><tbody>{"".join(body)}</tbody></table>'


def table_gpus(rows: pd.DataFrame) -> list[str]:
    """The table's GPU columns: those with our measured rows first (in view at a 1,280 px width without scrolling
    sideways), then the published ones, each group by peak (``atlas.gpu_order``)."""
    measured = set(rows.loc[rows["source"] == atlas.MEASURED, "gpu"])
    return sorted(atlas.gpu_order(rows), key=lambda gpu: gpu not in measured)


def _controls(rows: pd.DataFrame, count: int) -> str:
    """The GPU picker (one row of labelled check boxes, each box beside its name) and the table's filter box."""
    boxes = "".join(
        f'<label><input type="checkbox" checked data-gpu="g-{gpu}">{html.escape(gpu)}</label>'
        for gpu in table_gpus(rows)
    )
    return (
        f'<div class="gpu-picker"><span>GPUs:</span>{boxes}</div><div class="filter"><input type="search" '
        f'placeholder="filter: resnet50 224, depthwise ..." data-filter="{TABLE_ID}" data-count="{TABLE_ID}-count" '
        f'aria-label="filter the atlas table"><span id="{TABLE_ID}-count">{count} of {count} rows</span></div>'
    )


def atlas_section(frame: pd.DataFrame, out_dir: Path) -> str:
    """The section's HTML: its heading and intro, its figures (``FIGURES``, the static ones written into
    ``out_dir``) and the picker (controls, table and script); "" without rows of two GPUs. ``frame``:
    ``atlas.atlas_rows``."""
    rows = atlas.main_rows(frame)
    if rows["gpu"].nunique() < 2:
        return ""
    tables = ", ".join(f"{gpu}: {table}" for gpu, table in rows.groupby("gpu")["table"].first().items())
    intro = (
        f"{rows['gpu'].nunique()} GPUs in timm's condition (amp, NCHW, eager; batch 1024 unless a cell says "
        f"otherwise), each from one table ({tables}). Published rows are timm's (data/public/timm-benchmark), "
        "measured rows utilscope's. Models timm can reparameterize are compared reparameterized, where a "
        "published row's GMACs show it was (else left out). Pick GPUs with the boxes, models with the filter; "
        "click a header to sort."
    )
    count = rows.groupby(["model", "resolution"]).ngroups
    picker = _controls(rows, count) + f'\n<div class="scroll">{picker_table(rows)}</div>\n<script>{SCRIPT}</script>\n'
    figures = render(FIGURES, frame, out_dir)
    return f"<h2>GPU atlas</h2>\n<p>{html.escape(intro)}</p>\n{figures}\n{picker}"
