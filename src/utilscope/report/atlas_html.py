"""The GPU atlas section of the report: its figures (``atlas_plots``) and a table in which a reader picks the GPUs
(check boxes) and the models (a filter box) to compare. Empty when the store has one GPU and no published rows."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from utilscope.report import atlas, atlas_plots, interactive

TABLE_ID = "atlas-table"
FIGURES = (
    (
        "atlas_classes.png",
        "Utilization per GPU and conv class",
        atlas_plots.plot_class_distribution,
        "One point per model and resolution in timm's condition (amp, NCHW, eager), one table per GPU: dense, grouped "
        "and depthwise CNNs and attention hybrids, by counted FLOP shares.",
    ),
    (
        "atlas_slope.png",
        "One model across GPUs",
        atlas_plots.plot_slope,
        "The same network's FLOP utilization on each GPU, GPUs ordered by their fp16 tensor peak; each GPU's row "
        "at its table's batch (the table below gives a batch other than 1024).",
    ),
    (
        "atlas_rank.png",
        "Throughput rank correlation between GPUs",
        atlas_plots.plot_rank_correlation,
        "Spearman's rank correlation of samples/s over the model@resolution rows each pair of GPUs shares, each at "
        "its table's batch (2048 on the PRO 6000, smaller where a GPU ran out of memory).",
    ),
    (
        "atlas_intensity.png",
        "Utilization against arithmetic intensity",
        atlas_plots.plot_intensity,
        "Counted FLOPs per counted (unfused) byte; the dashed line is the GPU's ridge point, its fp16 tensor peak over "
        "its memory bandwidth.",
    ),
)
DYNAMO_FIGURE = (
    "atlas_dynamo.png",
    "torch.compile over eager per GPU",
    "Samples/s of a table's -dynamo twin over its eager table, for the same model, resolution and batch.",
)
SCRIPT = """
document.querySelectorAll("input[data-gpu]").forEach(function (box) {
  box.addEventListener("change", function () {
    document.querySelectorAll("." + box.dataset.gpu).forEach(function (cell) { cell.hidden = !box.checked; });
  });
});
"""


def _cell(row: pd.Series | None) -> tuple[str, str]:
    """A GPU's two cells for one model@resolution: utilization (with the batch when not 1024) and samples/s."""
    if row is None:
        return "–", "–"
    batch = "" if row["batch"] == 1024 else f" (b{int(row['batch'])})"
    return f"{row['utilization']:.1%}{batch}", f"{row['samples_per_s']:,.0f}"


def picker_table(rows: pd.DataFrame) -> str:
    """Rows: model@resolution; per GPU a utilization and a samples/s column, classed by GPU (the check boxes show
    and hide them); sortable, filtered by the box above it."""
    gpus = atlas.gpu_order(rows)
    by_key = {key: group.set_index("gpu") for key, group in rows.groupby(["model", "resolution"], sort=True)}
    head = "".join(f'<th colspan="2" class="g-{gpu}">{html.escape(gpu)}</th>' for gpu in gpus)
    sub = "".join(f'<th class="n g-{gpu}">utilization</th><th class="n g-{gpu}">samples/s</th>' for gpu in gpus)
    body = []
    for (model, resolution), group in by_key.items():
        cells = [
            f"<td>{html.escape(model)}</td>",
            f'<td class="n">{resolution}</td>',
            f"<td>{html.escape(str(group['conv_class'].iloc[0]))}</td>",
        ]
        for gpu in gpus:
            utilization, samples = _cell(group.loc[gpu] if gpu in group.index else None)
            cells.append(f'<td class="n g-{gpu}">{utilization}</td><td class="n g-{gpu}">{samples}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    header = (
        f'<tr><th colspan="3"></th>{head}</tr><tr><th>model</th><th class="n">res</th><th>conv class</th>{sub}</tr>'
    )
    return f'<table id="{TABLE_ID}" class="sortable"><thead>{header}</thead><tbody>{"".join(body)}</tbody></table>'


def _controls(rows: pd.DataFrame, count: int) -> str:
    """The GPU picker (one row of labelled check boxes, each box beside its name) and the table's filter box."""
    boxes = "".join(
        f'<label><input type="checkbox" checked data-gpu="g-{gpu}">{html.escape(gpu)}</label>'
        for gpu in atlas.gpu_order(rows)
    )
    return (
        f'<div class="gpu-picker"><span>GPUs:</span>{boxes}</div><div class="filter"><input type="search" '
        f'placeholder="filter: resnet50 224, depthwise ..." data-filter="{TABLE_ID}" data-count="{TABLE_ID}-count" '
        f'aria-label="filter the atlas table"><span id="{TABLE_ID}-count">{count} of {count} rows</span></div>'
    )


def write_figures(frame: pd.DataFrame, rows: pd.DataFrame, out_dir: Path) -> list[tuple[str, Path, str]]:
    """Draw the atlas's figures into ``out_dir``: (title, PNG path, caption) each, as ``html`` embeds them."""
    figures = [(title, plot(rows, out_dir / name), text) for name, title, plot, text in FIGURES]
    name, title, text = DYNAMO_FIGURE
    return figures + [(title, atlas_plots.plot_dynamo_gain(atlas.dynamo_gain(frame), out_dir / name), text)]


def interactive_figures(rows: pd.DataFrame) -> list[tuple[str, str, object, str]]:
    """The atlas's interactive figures of the compared rows: ``(element id, title, figure or why none, caption)``."""
    labels = {gpu: atlas_plots.table_label(rows, gpu).replace("\n", ": ") for gpu in atlas.gpu_order(rows)}
    return [
        (
            "plot-atlas-gpus",
            "Utilization per GPU",
            interactive.atlas_gpu_points(rows, labels),
            "One point per model@resolution and GPU, each model at the same offset in every GPU's column; GPUs by "
            "their fp16 tensor peak. Hover a point to name it; the search at the top highlights a model on every GPU.",
        ),
        (
            "plot-atlas-intensity",
            FIGURES[3][1],
            interactive.atlas_intensity(rows, labels),
            FIGURES[3][3],
        ),
    ]


def atlas_section(
    frame: pd.DataFrame, out_dir: Path
) -> tuple[str, list[tuple[str, Path, str]], str, list[tuple[str, str, object, str]]] | None:
    """The section's intro text, its static figures (written into ``out_dir``), the picker's HTML (controls, table
    and script) and its interactive figures, for ``html`` to lay out; None without rows of two GPUs. ``frame``:
    ``atlas.atlas_rows``."""
    rows = atlas.main_rows(frame)
    if rows["gpu"].nunique() < 2:
        return None
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
    return intro, write_figures(frame, rows, out_dir), picker, interactive_figures(rows)
