"""The report's interactive figures: its point clouds as plotly figures, embedded in the HTML page
(``figures.Kind.INTERACTIVE``).

Each function takes its section's rows (the survey's measurements, the atlas rows, the NAS rows) and returns a plotly
``Figure``, or a ``str`` saying why there is nothing to draw (the page shows that line instead of an empty frame);
the survey's figures count the rows they leave out under their title (``plots.excluded_caption``). Every point
carries its row's identity in ``customdata`` (``HOVER``: model, family, GPU, resolution, batch, precision, backend,
GFLOPs, samples/s, utilization), which the hover box shows and the page's model search reads; one trace per family,
so that a click on a family in the legend hides it and a double click isolates it. The figures are drawn by
plotly.js, embedded once per page (``plotly_script``); nothing here draws by hand. A figure's toolbar (the camera)
downloads a PNG of it as shown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.report import atlas, atlas_plots, families, plots

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
NON_CNN = " · non-CNN"  # after the family of an atlas row that is not a CNN: a legend entry of its own, hidden
_HEIGHT = 560
_PANEL_COLUMNS = 3  # panels to a row in a figure of several
_ISO_COLOUR = "#9a9a9a"


def plotly_script() -> str:
    """plotly.js, minified, to inline once per page (no network: the page works from the file system)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def hover_rows(rows: pd.DataFrame, gpu: pd.Series | None = None) -> np.ndarray:
    """The customdata of ``rows`` (``HOVER``'s fields); ``gpu``: each row's GPU (default its ``device``)."""
    gpus = (rows["device"] if gpu is None else gpu).astype(str)
    shown = pd.DataFrame(
        {
            "model": rows["model"].astype(str),
            "family": families.family_labels(rows),
            "gpu": gpus.map({name: hardware.gpu_display_name(name) for name in gpus.unique()}),
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
    row). Each trace is a dict, which the figure it is added to validates (once: a ``go.Scatter`` is validated
    when made and again when added, plotly's largest cost in the atlas's figures)."""
    labels = families.family_labels(rows)
    rank = {family: i for i, family in enumerate(colors)}
    hover = hover_rows(rows, rows.get("gpu_label"))  # once for every row: a row's fields are its own
    traces = []
    for family in sorted(labels.unique(), key=lambda f: (rank.get(f, len(rank)), f)):
        mine = (labels == family).to_numpy()
        part = rows[mine]
        style = {k: (part[v].tolist() if isinstance(v, str) and v in part.columns else v) for k, v in marker.items()}
        colour = _hex(colors.get(family, families.OTHER_COLOUR))
        traces.append(
            dict(
                type="scatter",
                x=part[x].to_numpy(float),
                y=part[y].to_numpy(float),
                mode=mode,
                name=f"{family} ({part['model'].nunique()})",
                legendgroup=family,
                customdata=hover[mine],
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


def _layout(
    title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False, percent_y=True, note: str = ""
):
    """The figures' layout; ``note``: a line under the title (the rows left out)."""
    text = f"{title}<br><sup>{note}</sup>" if note else title
    return dict(
        title=dict(text=text, font=dict(size=15)),
        height=_HEIGHT,
        margin=dict(l=70, r=20, t=80 if note else 60, b=60),
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
    note = plots.excluded_caption(frame)
    return figure.update_layout(_layout(title, "GFLOPs per sample (log)", "FLOP utilization", log_x=True, note=note))


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
    note = plots.excluded_caption(frame)
    figure.update_layout(_layout(title, "GFLOPs per sample (log)", "samples/s (log)", True, True, False, note))
    return figure.update_yaxes(range=np.log10([shown["samples_per_s"].min() / 2, shown["samples_per_s"].max() * 2]))


def utilization_vs_batch(frame: pd.DataFrame):
    """One line per series through its batch sizes (log x), one panel per backend, a trace per family: gaps (NaN)
    between series."""
    ok = plots.ok_rows(frame)
    if ok.empty:
        return "no successful measurements"
    keys = ok[plots.SERIES].astype(str).agg("|".join, axis=1)
    ordered = ok.assign(series=keys).sort_values(["series", "batch"])
    parts = []
    for _, series in ordered.groupby("series", sort=False):
        parts += [series, series.iloc[:1].assign(batch=np.nan, utilization=np.nan)]  # a gap after each line
    lines = pd.concat(parts, ignore_index=True)
    backends = lines["backend"].astype(str)
    panels = [(f"backend: {backend}", lines[backends == backend]) for backend in sorted(backends.unique())]
    figure = _panels(panels, "batch", "utilization", _colors(frame), True, mode="lines+markers")
    figure.update_xaxes(type="log", title_text="batch size (log)")
    figure.update_yaxes(tickformat=".0%").update_yaxes(title_text="FLOP utilization", col=1)
    title = "FLOP utilization vs batch size (one line per model and backend)"
    return figure.update_layout(_panel_layout(title, len(panels), plots.excluded_caption(frame)))


def flop_vs_nvml(frame: pd.DataFrame):
    """FLOP utilization against nvml_util, every successful row with an nvml_util sample."""
    import plotly.graph_objects as go

    ok = plots.ok_rows(frame)
    shown = ok[ok["nvml_util"].notna()]
    if shown.empty:
        return "no successful measurements" if ok.empty else "no successful row has an nvml_util sample"
    note = plots.excluded_caption(frame)
    if len(shown) < len(ok):
        note += f"; {len(ok) - len(shown)} without an nvml_util sample"
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
    x_title = "nvml_util (share of time a kernel ran)"
    figure.update_layout(_layout("FLOP utilization vs nvml_util", x_title, "", note=note))
    return figure.update_layout(xaxis=dict(tickformat=".0%"), yaxis=dict(title="FLOP utilization"))


def atlas_gpu_points(frame: pd.DataFrame):
    """The atlas's compared rows (``atlas.main_rows`` of the atlas rows ``frame``): utilization per GPU, one point
    per model@resolution (x: the GPU, spread by a fixed offset per model so that points do not hide each other), a
    trace per family."""
    import plotly.graph_objects as go

    rows = atlas.main_rows(frame)
    if rows.empty or rows["gpu"].nunique() < 2:
        return "fewer than two GPUs have rows in timm's condition"
    labels = atlas_plots.table_labels(rows)
    order = list(labels)
    # a fixed offset per model (its hash), the same on every GPU, so one model sits at one height of each column
    jitter = rows["model"].map(lambda m: (hash_fraction(m) - 0.5) * 0.6)
    shown = rows.assign(
        x=rows["gpu"].map({gpu: i for i, gpu in enumerate(order)}) + jitter,
        gpu_label=rows["gpu"].map(atlas_plots.gpu_label),
        family=_atlas_families(rows),
        device=rows["gpu"],
    )
    figure = go.Figure(_family_traces(shown, "x", "utilization", _colors(shown), size=5))
    title = "FLOP utilization per GPU (amp, NCHW, eager; one point per model@resolution)"
    figure.update_layout(_layout(title, "", "FLOP utilization"))
    figure.update_layout(xaxis=dict(tickvals=list(range(len(order))), ticktext=[labels[g] for g in order]))
    return _non_cnn_hidden(figure)


def _atlas_families(rows: pd.DataFrame) -> pd.Series:
    """Each row's family, with ``NON_CNN`` after it for a row that is not a CNN (``atlas.is_cnn``): its own legend
    entry, hidden until clicked (``_non_cnn_hidden``)."""
    family = _families(rows["model"])
    return family.where(atlas.is_cnn(rows), family + NON_CNN)


def _non_cnn_hidden(figure):
    """The figure with its non-CNN traces in the legend only: the atlas's figures show CNNs, a click shows more."""
    return figure.for_each_trace(lambda trace: trace.update(visible="legendonly"), selector=_is_non_cnn)


def _is_non_cnn(trace) -> bool:
    return NON_CNN in (trace.name or "")


def atlas_intensity(frame: pd.DataFrame):
    """Utilization against counted FLOPs per byte (log x) of the atlas's compared rows, one panel per GPU with its
    ridge point (``atlas_plots.ridge_point``) as a dashed line, legend groups per family across the panels."""
    import plotly.graph_objects as go

    rows = atlas.main_rows(frame).dropna(subset=["intensity", "utilization"])
    if rows.empty:
        return "no counted rows in timm's condition"
    labels = atlas_plots.table_labels(rows)
    shown = rows.assign(family=_atlas_families(rows), gpu_label=rows["gpu"].map(atlas_plots.gpu_label))
    panels = [(labels[gpu], shown[shown["gpu"] == gpu]) for gpu in labels]
    figure = _panels(panels, "intensity", "utilization", _colors(shown), shared_y=True)
    top = float(shown["utilization"].max())
    for k, gpu in enumerate(labels):
        ridge = atlas_plots.ridge_point(gpu, panels[k][1]["peak_tflops"].max())
        if ridge:
            line = go.Scatter(
                x=[ridge, ridge],
                y=[0, top],
                mode="lines",
                name="ridge point: fp16 tensor peak / bandwidth",
                legendgroup="ridge",
                showlegend=k == 0,
                line=dict(color="#444444", width=1, dash="dash"),
                hovertemplate=f"ridge point {ridge:.0f} FLOPs/byte<extra></extra>",
            )
            figure.add_trace(line, row=k // _PANEL_COLUMNS + 1, col=k % _PANEL_COLUMNS + 1)
    figure.update_xaxes(type="log", title_text="FLOPs per byte (log)")
    figure.update_yaxes(tickformat=".0%")
    title = "FLOP utilization against arithmetic intensity (counted FLOPs / counted bytes, unfused), per GPU"
    return _non_cnn_hidden(figure.update_layout(_panel_layout(title, len(panels))))


def nas_throughput_vs_gflops(frame: pd.DataFrame):
    """Measured samples/s against GFLOPs per sample of the sampled architectures (``nas.analysis.nas_frame``'s
    rows), one panel per (search space, batch size) with the Spearman correlation of the two in its title."""
    from utilscope.nas.analysis import spearman

    shown = frame.assign(gflops=frame["flops_per_sample"].astype(float) / 1e9)
    panels = []
    for (space, batch), group in shown.groupby(["space", "batch"]):
        rho = spearman(group["flops_per_sample"], group["samples_per_s"])
        panels.append((f"{space}, batch {batch}: Spearman {rho:+.2f}", group))
    figure = _panels(panels, "gflops", "samples_per_s", _colors(shown), shared_y=False)
    figure.update_xaxes(title_text="GFLOPs per sample")
    figure.update_yaxes(title_text="measured samples/s")
    title = f"NAS: throughput vs FLOPs ({shown['model'].nunique()} architectures; one point per architecture)"
    return figure.update_layout(_panel_layout(title, len(panels)))


def _panels(panels: list[tuple[str, pd.DataFrame]], x: str, y: str, colors: dict, shared_y: bool, **style):
    """A figure of one panel per ``(title, rows)``, ``_PANEL_COLUMNS`` to a row, each a trace per family (one
    legend entry per family, its first trace's: a click on it hides the family in every panel); ``style``:
    ``_family_traces``' mode and marker settings (default: markers of size 5)."""
    from plotly.subplots import make_subplots

    columns = min(_PANEL_COLUMNS, len(panels))
    figure = make_subplots(
        rows=-(-len(panels) // columns),
        cols=columns,
        shared_yaxes=shared_y,
        subplot_titles=[title for title, _ in panels],
        vertical_spacing=0.12,
    )
    listed = set()
    for k, (_, rows) in enumerate(panels):
        for trace in _family_traces(rows, x, y, colors, **({"size": 5} | style)):
            trace["showlegend"] = trace["legendgroup"] not in listed
            listed.add(trace["legendgroup"])
            figure.add_trace(trace, row=k // columns + 1, col=k % columns + 1)
    return figure


def _panel_layout(title: str, panels: int, note: str = "") -> dict:
    """``_layout`` for a figure of ``panels`` panels (its axes set per panel): taller for each row of panels past
    the first."""
    layout = _layout(title, "", "", note=note)
    for key in ("xaxis", "yaxis"):
        layout.pop(key)
    return layout | dict(height=max(_HEIGHT, 320 * -(-panels // _PANEL_COLUMNS) + 120))


def _families(models: pd.Series) -> pd.Series:
    """Each model's family as a report shows it (``models.sets.display_family``), looked up once per model."""
    from utilscope.models.sets import display_family

    return models.map({model: display_family(model) for model in models.unique()})


def hash_fraction(text: str) -> float:
    """A number in [0, 1) fixed by ``text`` (not Python's salted ``hash``): the same on every run."""
    import zlib

    return zlib.crc32(text.encode()) / 2**32
