"""The report's interactive figures: plotly figures of the rows the static PNGs draw, for the HTML page.

Each function takes the rows a static figure takes and returns a plotly ``Figure``, or a ``str`` saying why there
is nothing to draw (the page shows that line instead of an empty frame). Every point carries its row's identity in
``customdata`` (``HOVER``: model, family, GPU, resolution, batch, precision, backend, GFLOPs, samples/s,
utilization), which the hover box shows and the page's model search reads; one trace per family, so that a click
on a family in the legend hides it and a double click isolates it. Axes are logarithmic where the static figure's
are. The figures are drawn by plotly.js, embedded once per page (``plotly_script``); nothing here draws by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.report import atlas_plots, families, plots

# the fields of a point's customdata, in order; the page's search reads the model at index 0
HOVER = [
    "model",
    "family",
    "gpu",
    "resolution",
    "batch",
    "precision",
    "backend",
    "gflops",
    "samples_per_s",
    "utilization",
]
HOVER_TEMPLATE = (
    "<b>%{customdata[0]}</b><br>family: %{customdata[1]}<br>GPU: %{customdata[2]}<br>"
    "resolution %{customdata[3]}, batch %{customdata[4]}, %{customdata[5]}, %{customdata[6]}<br>"
    "%{customdata[7]:.3g} GFLOPs/sample, %{customdata[8]:,.0f} samples/s<br>"
    "FLOP utilization %{customdata[9]:.2%}<extra></extra>"
)
HOVER_DIGITS = 4  # significant digits of the numbers a point carries (the hover shows at most 3 or 4)
SELECTION = dict(selected=dict(marker=dict(size=11, opacity=1.0)), unselected=dict(marker=dict(opacity=0.12)))
SEARCHED_GREY = "#222222"  # a searched point of an uncoloured family: dark, not the light grey it is drawn in
_HEIGHT = 560
_ISO_COLOUR = "#9a9a9a"


def plotly_script() -> str:
    """plotly.js, minified, to inline once per page (no network: the page works from the file system)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def figure_json(figure) -> str:
    """The figure as JSON safe inside a ``<script>`` element."""
    return figure.to_json(validate=False).replace("</", "<\\/")


def hover_rows(rows: pd.DataFrame, gpu: pd.Series | None = None) -> np.ndarray:
    """The customdata of ``rows`` (``HOVER``'s fields); ``gpu``: each row's GPU (default its ``device``)."""
    shown = pd.DataFrame(
        {
            "model": rows["model"].astype(str),
            "family": families.family_labels(rows),
            "gpu": (rows["device"] if gpu is None else gpu).astype(str).map(hardware.gpu_display_name),
            "resolution": rows["resolution"].astype("Int64").astype(str),
            "batch": rows["batch"].astype("Int64").astype(str),
            "precision": rows["precision"].astype(str),
            "backend": rows["backend"].astype(str),
            "gflops": _rounded(rows["flops_per_sample"].astype(float) / 1e9),
            "samples_per_s": _rounded(rows["samples_per_s"].astype(float)),
            "utilization": _rounded(rows["utilization"].astype(float)),
        }
    )
    return shown[HOVER].to_numpy(object)


def _rounded(values: pd.Series, digits: int = HOVER_DIGITS) -> pd.Series:
    """``values`` to ``digits`` significant digits: what the hover box shows, in fewer bytes of JSON."""
    return values.map(lambda v: float(f"{v:.{digits}g}") if pd.notna(v) else v)


def _hex(colour) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour)


def _family_traces(rows: pd.DataFrame, x: str, y: str, colors: dict, mode: str = "markers", **marker) -> list[dict]:
    """One scatter trace per family of ``rows`` (coloured families first, in ``colors``' order, then by name),
    named with its number of models; ``marker``: extra marker settings (a column name as ``symbol`` is read per
    row)."""
    import plotly.graph_objects as go

    labels = families.family_labels(rows)
    rank = {family: i for i, family in enumerate(colors)}
    traces = []
    for family in sorted(labels.unique(), key=lambda f: (rank.get(f, len(rank)), f)):
        part = rows[labels == family]
        style = {k: (part[v].tolist() if isinstance(v, str) and v in part.columns else v) for k, v in marker.items()}
        colour = _hex(colors.get(family, families.OTHER_COLOUR))
        traces.append(
            go.Scatter(
                x=part[x].to_numpy(float),
                y=part[y].to_numpy(float),
                mode=mode,
                name=f"{family} ({part['model'].nunique()})",
                legendgroup=family,
                customdata=hover_rows(part, part.get("gpu_label")),
                hovertemplate=HOVER_TEMPLATE,
                marker=dict(color=colour, size=7, opacity=0.8) | style,
                line=dict(color=colour, width=1),
                connectgaps=False,
                **_selection(colour),
            )
        )
    return traces


def _selection(colour: str) -> dict:
    """How a trace of ``colour`` shows the points a search selects: larger and opaque, in their family's colour, or
    dark where the family is drawn in the light grey of the uncoloured ones."""
    if colour != _hex(families.OTHER_COLOUR):
        return SELECTION
    return SELECTION | {"selected": dict(marker=dict(size=11, opacity=1.0, color=SEARCHED_GREY))}


def _layout(title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False, percent_y=True):
    return dict(
        title=dict(text=title, font=dict(size=15)),
        height=_HEIGHT,
        margin=dict(l=70, r=20, t=60, b=60),
        xaxis=dict(title=x_title, type="log" if log_x else "linear"),
        yaxis=dict(title=y_title, type="log" if log_y else "linear", tickformat=".0%" if percent_y else None),
        legend=dict(title=dict(text="family (models): click hides, double-click isolates"), itemsizing="constant"),
        hovermode="closest",
        dragmode="zoom",
        template="plotly_white",
    )


def _colors(frame: pd.DataFrame) -> dict:
    return families.family_colors(families.family_counts(frame))


def _symbols(rows: pd.DataFrame) -> pd.Series:
    """A marker symbol per row's backend (circle, square, triangle, ...), as the static figures mark backends."""
    names = ["circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "x"]
    backends = sorted(rows["backend"].astype(str).unique())
    return rows["backend"].astype(str).map({b: names[i % len(names)] for i, b in enumerate(backends)})


def _at_largest_batch(frame: pd.DataFrame) -> pd.DataFrame | None:
    """Each series' successful row at its largest batch, with its GFLOPs per sample and backend marker; None when
    nothing succeeded."""
    ok = plots.ok_rows(frame)
    if ok.empty:
        return None
    shown = plots.largest_batch(ok)
    return shown.assign(gflops=shown["flops_per_sample"].astype(float) / 1e9, symbol=_symbols(shown))


def utilization_vs_gflops(frame: pd.DataFrame):
    """Each series at its largest successful batch: utilization against GFLOPs per sample (log x)."""
    import plotly.graph_objects as go

    shown = _at_largest_batch(frame)
    if shown is None:
        return "no successful measurements"
    figure = go.Figure(_family_traces(shown, "gflops", "utilization", _colors(frame), symbol="symbol"))
    title = "FLOP utilization vs GFLOPs per sample (largest successful batch; marker: backend)"
    return figure.update_layout(_layout(title, "GFLOPs per sample (log)", "FLOP utilization", log_x=True))


def throughput_vs_gflops(frame: pd.DataFrame):
    """Samples/s against GFLOPs per sample (log-log) at each series' largest batch, with iso-utilization lines."""
    import plotly.graph_objects as go

    shown = _at_largest_batch(frame)
    if shown is None:
        return "no successful measurements"
    traces = _family_traces(shown, "gflops", "samples_per_s", _colors(frame), symbol="symbol")
    gflops = np.geomspace(shown["gflops"].min() / 1.5, shown["gflops"].max() * 1.5, 20)
    for peak in sorted(shown["peak_tflops"].dropna().unique()):
        for u, samples in plots.iso_utilization_lines(float(peak), gflops).items():
            traces.insert(
                0,
                go.Scatter(
                    x=gflops,
                    y=samples,
                    mode="lines",
                    name=f"{u:.0%} of {peak:g} TFLOP/s",
                    legendgroup="iso",
                    legendgrouptitle=dict(text="iso-utilization"),
                    line=dict(color=_ISO_COLOUR, width=1, dash="dot"),
                    hoverinfo="skip",
                ),
            )
    figure = go.Figure(traces)
    title = "Throughput vs GFLOPs per sample, with iso-utilization lines (largest successful batch)"
    layout = _layout(title, "GFLOPs per sample (log)", "samples/s (log)", log_x=True, log_y=True, percent_y=False)
    figure.update_layout(layout)
    return figure.update_yaxes(range=np.log10([shown["samples_per_s"].min() / 2, shown["samples_per_s"].max() * 2]))


def utilization_vs_batch(frame: pd.DataFrame):
    """One line per series through its batch sizes (log x), a trace per family: gaps (NaN) between series."""
    import plotly.graph_objects as go

    ok = plots.ok_rows(frame)
    if ok.empty:
        return "no successful measurements"
    keys = ok[plots.SERIES].astype(str).agg("|".join, axis=1)
    ordered = ok.assign(series=keys).sort_values(["series", "batch"])
    parts = []
    for _, series in ordered.groupby("series", sort=False):
        parts += [series, series.iloc[:1].assign(batch=np.nan, utilization=np.nan)]  # a gap after each line
    lines = pd.concat(parts, ignore_index=True)
    figure = go.Figure(_family_traces(lines, "batch", "utilization", _colors(frame), mode="lines+markers", size=5))
    title = "FLOP utilization vs batch size (one line per model and backend)"
    return figure.update_layout(_layout(title, "batch size (log)", "FLOP utilization", log_x=True))


def flop_vs_nvml(frame: pd.DataFrame):
    """FLOP utilization against nvml_util, every successful row with an nvml_util sample."""
    import plotly.graph_objects as go

    shown = plots.ok_rows(frame)
    shown = shown[shown["nvml_util"].notna()]
    if shown.empty:
        return "no successful row has an nvml_util sample"
    shown = shown.assign(nvml=shown["nvml_util"].astype(float) / 100)
    diagonal = go.Scatter(
        x=[0, 1],
        y=[0, 1],
        mode="lines",
        name="FLOP utilization = nvml_util",
        line=dict(color=_ISO_COLOUR, dash="dash"),
        hoverinfo="skip",
    )
    figure = go.Figure([diagonal, *_family_traces(shown, "nvml", "utilization", _colors(frame))])
    figure.update_layout(_layout("FLOP utilization vs nvml_util", "nvml_util (share of time a kernel ran)", ""))
    return figure.update_layout(xaxis=dict(tickformat=".0%"), yaxis=dict(title="FLOP utilization"))


SURVEY = (  # (element id, builder, caption) in page order
    (
        "plot-utilization-vs-gflops",
        utilization_vs_gflops,
        "Hover a point to name it; drag to zoom, double-click to reset.",
    ),
    ("plot-throughput-vs-gflops", throughput_vs_gflops, "Grey dotted lines: samples/s = u × peak / FLOPs per sample."),
    ("plot-utilization-vs-batch", utilization_vs_batch, "One line per model and backend through its batch sizes."),
    ("plot-flop-vs-nvml", flop_vs_nvml, "Points far below the dashed line: busy GPUs doing little arithmetic."),
)


def atlas_gpu_points(rows: pd.DataFrame, gpu_labels: dict[str, str]):
    """The atlas's compared rows (``atlas.main_rows``): utilization per GPU, one point per model@resolution (x: the
    GPU, spread by a fixed offset per model so that points do not hide each other), a trace per family."""
    import plotly.graph_objects as go

    if rows.empty or rows["gpu"].nunique() < 2:
        return "fewer than two GPUs have rows in timm's condition"
    order = list(gpu_labels)
    # a fixed offset per model (its hash), the same on every GPU, so one model sits at one height of each column
    jitter = rows["model"].map(lambda m: (hash_fraction(m) - 0.5) * 0.6)
    shown = rows.assign(
        x=rows["gpu"].map({gpu: i for i, gpu in enumerate(order)}) + jitter,
        gpu_label=rows["gpu"].map(atlas_plots.gpu_label),
        family=_families(rows["model"]),
        device=rows["gpu"],
    )
    figure = go.Figure(_family_traces(shown, "x", "utilization", _colors(shown), size=5))
    title = "FLOP utilization per GPU (amp, NCHW, eager; one point per model@resolution)"
    figure.update_layout(_layout(title, "", "FLOP utilization"))  # linear, as the static figure's
    return figure.update_layout(xaxis=dict(tickvals=list(range(len(order))), ticktext=[gpu_labels[g] for g in order]))


def atlas_intensity(rows: pd.DataFrame, gpu_labels: dict[str, str]):
    """Utilization against counted FLOPs per byte (log x), one panel per GPU, legend groups per family across the
    panels."""
    from plotly.subplots import make_subplots

    rows = rows.dropna(subset=["intensity", "utilization"])
    if rows.empty:
        return "no counted rows in timm's condition"
    order = [gpu for gpu in gpu_labels if gpu in set(rows["gpu"])]
    columns = min(3, len(order))
    figure = make_subplots(
        rows=-(-len(order) // columns),
        cols=columns,
        shared_yaxes=True,
        subplot_titles=[gpu_labels[g] for g in order],
        vertical_spacing=0.12,
    )
    shown = rows.assign(family=_families(rows["model"]), gpu_label=rows["gpu"].map(atlas_plots.gpu_label))
    colors = _colors(shown)
    for k, gpu in enumerate(order):
        for trace in _family_traces(shown[shown["gpu"] == gpu], "intensity", "utilization", colors, size=5):
            trace.showlegend = k == 0
            figure.add_trace(trace, row=k // columns + 1, col=k % columns + 1)
    figure.update_xaxes(type="log", title_text="FLOPs per byte (log)")
    figure.update_yaxes(tickformat=".0%")
    title = "FLOP utilization against arithmetic intensity (counted FLOPs / counted bytes), per GPU"
    layout = _layout(title, "", "")
    for key in ("xaxis", "yaxis"):
        layout.pop(key)
    return figure.update_layout(layout, height=320 * -(-len(order) // columns) + 120)


def _families(models: pd.Series) -> pd.Series:
    """Each model's family (``models.sets.family_of``), looked up once per model."""
    from utilscope.models.sets import family_of

    return models.map({model: family_of(model) for model in models.unique()})


def hash_fraction(text: str) -> float:
    """A number in [0, 1) fixed by ``text`` (not Python's salted ``hash``): the same on every run."""
    import zlib

    return zlib.crc32(text.encode()) / 2**32


def figures_json(figures: list[tuple[str, object]]) -> str:
    """``{element id: figure JSON}`` of the drawn figures, as one JSON object for the page's script."""
    return "{" + ",".join(f"{json.dumps(key)}:{figure_json(figure)}" for key, figure in figures) + "}"
