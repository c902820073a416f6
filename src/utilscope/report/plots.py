"""The survey's static figures (matplotlib): utilization per family and the op-class shares, each a function of the
section's rows returning a matplotlib figure, or a ``str`` saying why there is nothing to draw (``figures.render``
writes the figure as a PNG beside the page); and the helpers every figure of a store shares (``ok_rows``,
``largest_batch``, ``excluded_caption``, the iso-utilization lines). The survey's point clouds are interactive
(``interactive``).

Rows whose ``status`` is not ``"ok"`` are left out of every plot and counted in the figure's caption
(``excluded_caption``). Matplotlib is used through an Agg canvas made inside each function: no pyplot, no backend
switch at import.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope.present.roofline_plot import _CLASS_COLORS
from utilscope.report import families
from utilscope.report.families import family_labels

# every column of a measurement's identity except the batch size: one line / one point per series
SERIES = ["model", "resolution", "precision", "backend", "device", "software"]
ISO_UTILIZATIONS = (0.01, 0.03, 0.10, 0.30, 1.00)
_DPI = 110
_FAMILY_ROW_INCHES = {False: 0.42, True: 0.24}  # height per family of the box plot: few families, many families


# ---------------------------------------------------------------------------------------------- shared helpers


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that measured successfully (``status == "ok"``)."""
    return frame[frame["status"] == "ok"]


def status_kind(status: str) -> str:
    """``"ok"``, ``"oom"`` or ``"error"`` (``"error: CUDA launch failed"`` is an error)."""
    return str(status).split(":", 1)[0].strip() or "error"


def excluded_caption(frame: pd.DataFrame, what: str = "rows") -> str:
    """``"598 of 600 rows shown; 2 excluded (1 oom, 1 error)"``: the caption of every figure."""
    kinds = frame["status"].map(status_kind)
    failed = kinds[kinds != "ok"].value_counts().sort_index()
    text = f"{len(frame) - int(failed.sum())} of {len(frame)} {what} shown"
    if failed.sum():
        text += f"; {int(failed.sum())} excluded (" + ", ".join(f"{n} {k}" for k, n in failed.items()) + ")"
    return text


def largest_batch(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per series: the row at its largest batch size (callers pass successful rows)."""
    return frame.sort_values("batch").groupby(SERIES, dropna=False, sort=False).tail(1)


def _figure(width: float = 12.0, height: float = 6.5, columns: int = 1, sharey: bool = True):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # the Agg backend, chosen here, not at import
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, columns, sharey=sharey, squeeze=False)[0]
    if not sharey:
        figure.subplots_adjust(wspace=0.6)
    return figure, list(axes)


def _short(model: str) -> str:
    """``"torchvision:resnet50"`` -> ``"resnet50"`` for labels on plots (tables keep the full name)."""
    return str(model).split(":", 1)[-1]


def _percent_axis(axis) -> None:
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def iso_utilization_lines(peak_tflops: float, gflops: np.ndarray) -> dict[float, np.ndarray]:
    """samples/s at each iso-utilization u: u x peak FLOP/s / FLOPs per sample (u in ``ISO_UTILIZATIONS``)."""
    return {u: u * peak_tflops * 1e12 / (gflops * 1e9) for u in ISO_UTILIZATIONS}


def _captioned(figure, caption: str):
    """``figure`` with ``caption`` written under it (the PNG carries it), to return from a builder."""
    figure.text(0.01, 0.005, caption, fontsize=8, color="#555555", va="bottom")
    return figure


# ---------------------------------------------------------------------------------------------- figures


def plot_utilization_by_family(frame: pd.DataFrame):
    """Box plot of FLOP utilization per family (each series at its largest successful batch), one box per backend."""
    title = "FLOP utilization by family (each model at its largest successful batch)"
    ok = ok_rows(frame)
    if ok.empty:
        return "no successful measurements"
    shown = largest_batch(ok).assign(family=lambda f: family_labels(f))
    order = shown.groupby("family")["utilization"].median().sort_values().index.tolist()
    backends = sorted(shown["backend"].astype(str).unique())
    many = len(order) > families.ALL_COLOURED
    figure, (axes,) = _figure(12, max(4.0, (_FAMILY_ROW_INCHES[many]) * len(order) + 1.5))
    width = 0.8 / len(backends)
    dots = families.marker_style(len(shown), 9, 0.9)
    handles = []
    row = {family: i for i, family in enumerate(order)}
    for j, backend in enumerate(backends):
        color = f"C{j}"
        offset = (j - (len(backends) - 1) / 2) * width
        mine = shown[shown["backend"].astype(str) == backend]
        groups = {row[family]: values.to_numpy() for family, values in mine.groupby("family")["utilization"]}
        _family_boxes(axes, groups, offset, width, color, dots)
        handles.append(axes.scatter([], [], marker="s", color=color, label=backend))
    models = shown.groupby("family")["model"].nunique()
    axes.set_yticks(range(len(order)), [f"{f} ({models[f]})" for f in order], fontsize=7 if many else None)
    axes.set_ylim(-0.7, len(order) - 0.3)
    axes.set_xlabel("FLOP utilization = achieved / peak FLOP/s")
    _percent_axis(axes.xaxis)
    axes.set_xlim(left=0)
    axes.grid(True, axis="x", alpha=0.3)
    axes.set_title(title)
    axes.legend(handles=handles, title="backend", loc="lower right", fontsize=8)
    return _captioned(figure, excluded_caption(frame))


def _family_boxes(axes, groups: dict[int, np.ndarray], offset: float, width: float, color: str, dots: dict) -> None:
    """One backend's boxes, one per family row (``groups``: row -> values), and every model as a dot on its row:
    one boxplot and one scatter call for all the rows (one call per family took a second for 60 families)."""
    rows = sorted(groups)
    box = axes.boxplot(
        [groups[r] for r in rows],
        positions=[r + offset for r in rows],
        widths=width * 0.85,
        orientation="horizontal",
        patch_artist=True,
        showfliers=False,
        manage_ticks=False,
    )
    for patch in box["boxes"]:
        patch.set(facecolor=color, alpha=0.35, edgecolor=color)
    for part in ("medians", "whiskers", "caps"):
        for line in box[part]:
            line.set(color=color)
    x = np.concatenate([groups[r] for r in rows])
    y = np.concatenate([np.full(len(groups[r]), r + offset) for r in rows])
    axes.scatter(x, y, color=color, zorder=3, **dots)


# ---------------------------------------------------------------------------------------------- op classes


def attributed_rows(op_classes: pd.DataFrame, measurements: pd.DataFrame) -> pd.DataFrame:
    """The op-class rows (``Store.op_class_frame()``), each with the utilization of its series at its batch (NaN
    where no successful measurement has it): the op-class figure's rows."""
    if op_classes.empty:  # an empty frame (no attributed model) may come without columns
        return op_classes
    keys = SERIES + ["batch"]
    found = ok_rows(measurements)[keys + ["utilization"]].drop_duplicates(keys, keep="last")
    return op_classes.merge(found, on=keys, how="left")


def representative_series(op_classes: pd.DataFrame, limit: int = 12) -> pd.DataFrame:
    """The attributed series to show: each at its largest batch, ranked by utilization where ``op_classes`` has it
    (``attributed_rows``), else by model.

    With more than ``limit`` series, take ``limit`` evenly spaced in that ranking (both extremes and the middle).
    Returns one row per series: the SERIES columns, batch and (when known) utilization, lowest utilization first.
    """
    keys = SERIES + ["batch"]
    series = op_classes[keys + [c for c in ("utilization",) if c in op_classes]].drop_duplicates(keys)
    series = series.sort_values("batch").groupby(SERIES, dropna=False, sort=False).tail(1)
    ranked = "utilization" in series and series["utilization"].notna().any()
    series = series.sort_values(["utilization", "model"] if ranked else ["model", "backend"])
    if len(series) > limit:
        series = series.iloc[np.unique(np.linspace(0, len(series) - 1, limit).round().astype(int))]
    return series.reset_index(drop=True)


def plot_op_class_shares(op_classes: pd.DataFrame, limit: int = 12):
    """Share of measured time and of FLOPs per op class for representative models (``op_classes``:
    ``attributed_rows``): two stacked bars per model."""
    from matplotlib.patches import Patch

    title = "where the time goes and where the FLOPs are, by op class (representative models)"
    if op_classes.empty:
        return "no op-class attribution"
    chosen = representative_series(op_classes, limit).assign(slot=lambda f: range(len(f)))
    rows = chosen[SERIES + ["batch", "slot"]].merge(op_classes, on=SERIES + ["batch"])
    shares = rows.pivot_table(index="slot", columns="op_class", values=["time_share", "flop_share"], aggfunc="sum")
    shares = shares.reindex(range(len(chosen))).fillna(0.0)
    present = set(rows["op_class"])
    classes = [c for c in _CLASS_COLORS if c in present] + sorted(present - set(_CLASS_COLORS))
    figure, (axes,) = _figure(12, 0.62 * len(chosen) + 2.0)
    slots = np.arange(len(chosen))
    for offset, column in ((-0.19, "time_share"), (0.19, "flop_share")):
        left = np.zeros(len(chosen))
        for op_class in classes:
            values = shares[(column, op_class)].to_numpy()
            axes.barh(slots + offset, values, 0.36, left=left, color=_CLASS_COLORS.get(op_class, "#000000"))
            left += values
    axes.set_yticks(slots, [_series_label(item) for item in chosen.itertuples(index=False)], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlim(0, 1)
    _percent_axis(axes.xaxis)
    axes.set_xlabel("share (upper bar of each pair: measured time; lower bar: FLOPs)")
    axes.set_title(title)
    handles = [Patch(color=_CLASS_COLORS.get(c, "#000000"), label=c) for c in classes]
    axes.legend(handles=handles, title="op class", loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    total = op_classes[SERIES].drop_duplicates().shape[0]
    return _captioned(figure, f"{len(chosen)} of {total} attributed series shown")


def _series_label(item) -> str:
    utilization = getattr(item, "utilization", float("nan"))
    known = "" if pd.isna(utilization) else f", {utilization:.1%} util."
    return f"{_short(item.model)} · {item.backend} · b{item.batch}{known}\ntime | FLOPs"
