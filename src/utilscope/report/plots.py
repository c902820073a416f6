"""Figures of a survey store: one function per figure, each taking the store's DataFrame and a path, returning the path.

Rows whose ``status`` is not ``"ok"`` are left out of every plot and counted in the figure's caption
(``excluded_caption``). With ~60 models a legend per model is unreadable, so points and lines are coloured by family
and only the extremes carry a model name. A frame with no successful row still yields a figure that says so.
Matplotlib is used through an Agg canvas made inside each function: no pyplot, no backend switch at import.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.present.roofline_plot import _CLASS_COLORS
from utilscope.report import families
from utilscope.report.families import family_labels
from utilscope.units import si

# every column of a measurement's identity except the batch size: one line / one point per series
SERIES = ["model", "resolution", "precision", "backend", "device", "software"]
ISO_UTILIZATIONS = (0.01, 0.03, 0.10, 0.30, 1.00)
_BACKEND_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
_ISO_STYLES = ["-", "--", ":", "-."]
_LABELLED = 3  # label this many models at each extreme
_DPI = 110
_EMPTY = "empty: "  # how an empty figure's PNG description starts
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


def smallest_batch(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("batch").groupby(SERIES, dropna=False, sort=False).head(1)


def _colors_of(frame: pd.DataFrame, colors: dict) -> list:
    return [colors.get(family, families.OTHER_COLOUR) for family in family_labels(frame)]


def _figure(width: float = 12.0, height: float = 6.5, columns: int = 1, sharey: bool = True):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # the Agg backend, chosen here, not at import
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, columns, sharey=sharey, squeeze=False)[0]
    if not sharey:
        figure.subplots_adjust(wspace=0.6)
    return figure, list(axes)


def _save(figure, path: str | Path, caption: str, legend=None, empty: str | None = None) -> Path:
    """Save the figure with its caption; ``empty``: why it has nothing to show, kept in the PNG (``empty_reason``)."""
    note = figure.text(0.01, 0.005, caption, fontsize=8, color="#555555", va="bottom")
    extra = [note] + ([legend] if legend is not None else [])
    path = Path(path)
    # no "Software" metadata: the PNG carries no URL and is byte-stable across runs
    metadata = {"Software": None} | ({"Description": _EMPTY + empty} if empty is not None else {})
    figure.savefig(path, bbox_inches="tight", bbox_extra_artists=extra, pad_inches=0.15, metadata=metadata)
    return path


def empty_reason(path: str | Path) -> str | None:
    """Why the PNG at ``path`` (drawn by ``_empty``) has nothing to show, or None for a figure with data."""
    from PIL import Image

    with Image.open(path) as image:
        text = image.text.get("Description", "") if hasattr(image, "text") else ""
    return text.removeprefix(_EMPTY) if text.startswith(_EMPTY) else None


def _empty(path: str | Path, title: str, caption: str, message: str = "no successful measurements") -> Path:
    figure, (axes,) = _figure(8, 3)
    axes.set_axis_off()
    axes.set_title(title)
    axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=14, color="#777777", transform=axes.transAxes)
    return _save(figure, path, caption, empty=message)


def _family_legend(figure, axes, frame: pd.DataFrame, colors: dict):
    """Family legend beside the axes: each coloured family with its number of models, then the grey rest in one entry
    (``families.legend_entries``)."""
    entries = families.legend_entries(frame, colors)
    handles = [axes.scatter([], [], s=30, color=colour, label=label) for label, colour in entries]
    return axes.legend(
        handles=handles,
        title="family (models)",
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=7,
        title_fontsize=8,
        ncols=1 if len(handles) <= 22 else 2,
        frameon=False,
    )


def outliers(frame: pd.DataFrame, rank_by: str, count: int = _LABELLED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``count`` models ranked lowest and the ``count`` ranked highest by ``rank_by`` (each model once, at its
    highest row), lowest first in both; a model in the lowest is not repeated in the highest."""
    ranked = frame.sort_values(rank_by).drop_duplicates("model", keep="last").sort_values(rank_by)
    low, high = ranked.head(count), ranked.tail(count)
    return low, high[~high["model"].isin(low["model"])]


def _label_extremes(axes, frame: pd.DataFrame, x: str, y: str, rank_by: str | None = None) -> None:
    """Name the ``outliers``: the ``_LABELLED`` models ranked highest and lowest by ``rank_by`` (default ``y``), at
    their (x, y) points.

    Labels of neighbouring points are spread apart vertically (low ones upward, high ones downward) so they do not
    overlap, and a point in the right fifth of the axes has its label on its left, inside the axes; call this after
    the axes' scales and limits are final, as the spreading works in pixels.
    """
    low, high = outliers(frame, rank_by or y)
    if low.empty:
        return
    axes.set_xlim(axes.get_xlim())  # freeze the limits the pixel offsets below are computed against
    axes.set_ylim(axes.get_ylim())
    gap = 10.0 * axes.figure.dpi / 72  # pixels between label baselines: 10 pt
    box = axes.get_window_extent()
    right_edge = box.x0 + 0.8 * box.width  # labels of points beyond it go on the left
    for picks, direction in ((low, 1.0), (high, -1.0)):
        pixels = axes.transData.transform(picks[[x, y]].to_numpy(float))
        targets = _spread(pixels[:, 1], gap, direction)
        for model, point, pixel, target in zip(
            picks["model"], picks[[x, y]].to_numpy(float), pixels, targets, strict=True
        ):
            moved, left = abs(target - pixel[1]) > 1, pixel[0] > right_edge
            axes.annotate(
                _short(model),
                tuple(point),
                xytext=(-6 if left else 6, (target - pixel[1]) * 72 / axes.figure.dpi),
                textcoords="offset points",
                ha="right" if left else "left",
                va="center",
                fontsize=7,
                color="#333333",
                arrowprops=dict(arrowstyle="-", lw=0.4, color="#999999") if moved else None,
            )


def _spread(heights: np.ndarray, gap: float, direction: float) -> np.ndarray:
    """Move label heights at least ``gap`` apart: upward from the lowest (direction 1), else down from the highest."""
    order = np.argsort(direction * heights)
    placed = heights.astype(float).copy()
    for previous, current in zip(order[:-1], order[1:], strict=True):
        if direction * (placed[current] - placed[previous]) < gap:
            placed[current] = placed[previous] + direction * gap
    return placed


def _short(model: str) -> str:
    """``"torchvision:resnet50"`` -> ``"resnet50"`` for labels on plots (tables keep the full name)."""
    return str(model).split(":", 1)[-1]


def _percent_axis(axis) -> None:
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))


def _backend_markers(frame: pd.DataFrame) -> dict[str, str]:
    backends = sorted(frame["backend"].astype(str).unique())
    return {b: _BACKEND_MARKERS[i % len(_BACKEND_MARKERS)] for i, b in enumerate(backends)}


def _backend_legend(axes, markers: dict[str, str], extra: list | None = None):
    handles = [axes.scatter([], [], marker=m, color="#666666", s=30, label=b) for b, m in markers.items()]
    legend = axes.legend(handles=handles + (extra or []), title="backend", loc="lower right", fontsize=7)
    axes.add_artist(legend)
    return legend


# ---------------------------------------------------------------------------------------------- figures


def _series_lines(axes, rows: pd.DataFrame, colors: dict, crowding: tuple[int, int]) -> None:
    """One line (with a dot per batch) per series of ``rows``, the grey families first, in one LineCollection;
    ``crowding``: the (lines, points) of the fullest panel, which set the line and marker styles of every panel."""
    from matplotlib.collections import LineCollection

    rows = families.coloured_last(rows, colors)
    series = rows.groupby(SERIES, dropna=False, sort=False).ngroup().to_numpy()  # numbered in drawing order
    rows = rows.iloc[np.lexsort((rows["batch"].to_numpy(), series))]  # each series' rows together, by batch
    starts = np.flatnonzero(np.diff(np.sort(series), prepend=-1))
    segments = np.split(rows[["batch", "utilization"]].to_numpy(float), starts[1:])
    every = _colors_of(rows, colors)
    lines, points = crowding
    style = families.line_style(lines, 1.0, 0.65)
    axes.add_collection(LineCollection(segments, colors=[every[start] for start in starts], **style))
    dots = families.marker_style(points, 6.0, 0.65)
    axes.scatter(rows["batch"], rows["utilization"], c=every, linewidths=0, **dots)


def plot_utilization_vs_batch(frame: pd.DataFrame, path: str | Path) -> Path:
    """FLOP utilization against batch size: one line per model, one panel per backend, coloured by family."""
    title, caption = "FLOP utilization vs batch size", excluded_caption(frame)
    ok = ok_rows(frame)
    if ok.empty:
        return _empty(path, title, caption)
    backends = sorted(ok["backend"].astype(str).unique())
    colors = families.family_colors(families.family_counts(frame))
    by_backend = ok.groupby(ok["backend"].astype(str))
    lines = by_backend[SERIES].apply(lambda keys: len(keys.drop_duplicates()))
    crowding = (int(lines.max()), int(by_backend.size().max()))  # of the fullest panel
    figure, panels = _figure(6.0 * len(backends) + 2.5, 6.5, columns=len(backends))
    batches = sorted(ok["batch"].unique())
    for axes, backend in zip(panels, backends, strict=True):
        _series_lines(axes, ok[ok["backend"].astype(str) == backend], colors, crowding)
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.set_xlim(min(batches) / 1.3, max(batches) * 2.5)  # room for the labels at the right end
        axes.set_ylim(0, 1.05 * ok["utilization"].max())
        axes.set_xlabel("batch size (samples)")
        axes.set_title(f"backend: {backend}")
        axes.grid(True, alpha=0.3)
    for axes, backend in zip(panels, backends, strict=True):
        rows = ok[ok["backend"].astype(str) == backend]
        _label_extremes(axes, rows[rows["batch"] == rows["batch"].max()], "batch", "utilization")
    panels[0].set_ylabel("FLOP utilization = achieved / peak FLOP/s")
    _percent_axis(panels[0].yaxis)
    legend = _family_legend(figure, panels[-1], ok, colors)
    figure.suptitle(title)
    return _save(figure, path, caption, legend)


def plot_utilization_vs_gflops(frame: pd.DataFrame, path: str | Path) -> Path:
    """FLOP utilization against GFLOPs per sample (log x), each series at its largest successful batch."""
    title, caption = (
        "FLOP utilization vs model size (each model at its largest successful batch)",
        excluded_caption(frame),
    )
    ok = ok_rows(frame)
    if ok.empty:
        return _empty(path, title, caption)
    shown = largest_batch(ok).assign(gflops=lambda f: f["flops_per_sample"].astype(float) / 1e9)
    colors, markers = families.family_colors(families.family_counts(frame)), _backend_markers(shown)
    style = families.marker_style(len(shown), 28, 0.8)
    figure, (axes,) = _figure()
    for backend, marker in markers.items():
        rows = families.coloured_last(shown[shown["backend"].astype(str) == backend], colors)
        axes.scatter(rows["gflops"], rows["utilization"], c=_colors_of(rows, colors), marker=marker, **style)
    axes.set_xscale("log")
    axes.set_xlabel("GFLOPs per sample (log)")
    axes.set_ylabel("FLOP utilization = achieved / peak FLOP/s")
    _percent_axis(axes.yaxis)
    axes.set_ylim(bottom=0)
    _label_extremes(axes, shown, "gflops", "utilization")
    axes.grid(True, which="both", alpha=0.25)
    axes.set_title(title)
    _backend_legend(axes, markers)
    legend = _family_legend(figure, axes, shown, colors)
    return _save(figure, path, caption, legend)


def iso_utilization_lines(peak_tflops: float, gflops: np.ndarray) -> dict[float, np.ndarray]:
    """samples/s at each iso-utilization u: u x peak FLOP/s / FLOPs per sample (u in ``ISO_UTILIZATIONS``)."""
    return {u: u * peak_tflops * 1e12 / (gflops * 1e9) for u in ISO_UTILIZATIONS}


def _draw_iso_lines(axes, peaks: list[float], gflops: np.ndarray, lowest: float) -> None:
    """Iso-utilization lines, each labelled at its right end or, if that lies below ``lowest`` samples/s, where it
    leaves the plot through the bottom edge."""
    for k, peak in enumerate(peaks):
        style = _ISO_STYLES[k % len(_ISO_STYLES)]
        for u, samples in iso_utilization_lines(peak, gflops).items():
            axes.plot(gflops, samples, style, color="#9a9a9a", lw=0.9, zorder=1)
            label = f"{u:.0%}" + (f" of {si(peak * 1e12, 'FLOP/s')}" if len(peaks) > 1 else "")
            at = min(gflops[-1], 0.85 * u * peak * 1e3 / lowest)  # GFLOPs where samples/s = lowest, a little inside
            where = (at, u * peak * 1e3 / at)
            axes.annotate(label, where, xytext=(2, 1), textcoords="offset points", fontsize=7, color="#777777")


def plot_throughput_vs_gflops(frame: pd.DataFrame, path: str | Path) -> Path:
    """Samples/s against GFLOPs per sample (log-log) with iso-utilization lines for every distinct peak.

    Filled markers: each series at its largest successful batch; hollow: at its smallest batch.
    """
    title, caption = "throughput vs model size, with iso-utilization lines", excluded_caption(frame)
    ok = ok_rows(frame)
    if ok.empty:
        return _empty(path, title, caption)
    ok = ok.assign(gflops=ok["flops_per_sample"].astype(float) / 1e9)
    colors, markers = families.family_colors(families.family_counts(frame)), _backend_markers(ok)
    figure, (axes,) = _figure(12, 7.5)
    low, high = ok["gflops"].min(), ok["gflops"].max()
    grid = np.logspace(np.log10(low / 1.5), np.log10(high * 1.5), 64)
    peaks = sorted(float(p) for p in ok["peak_tflops"].dropna().unique())
    lowest, highest = ok["samples_per_s"].min() / 3, ok["samples_per_s"].max() * 3
    _draw_iso_lines(axes, peaks, grid, lowest)
    large, small = largest_batch(ok), smallest_batch(ok)
    filled = families.marker_style(len(large) + len(small), 28, 1.0)
    hollow = families.marker_style(len(large) + len(small), 18, 1.0)
    for backend, marker in markers.items():
        big = families.coloured_last(large[large["backend"].astype(str) == backend], colors)
        few = families.coloured_last(small[small["backend"].astype(str) == backend], colors)
        axes.scatter(big["gflops"], big["samples_per_s"], c=_colors_of(big, colors), marker=marker, **filled)
        axes.scatter(
            few["gflops"],
            few["samples_per_s"],
            marker=marker,
            facecolors="none",
            edgecolors=_colors_of(few, colors),
            lw=0.8 if hollow["alpha"] == 1.0 else 0.6,
            **hollow,
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(grid[0], grid[-1] * 1.6)  # room for the iso labels
    axes.set_ylim(lowest, highest)
    _label_extremes(axes, large, "gflops", "samples_per_s", rank_by="utilization")
    axes.set_xlabel("GFLOPs per sample (log)")
    axes.set_ylabel("throughput (samples/s, log)")
    axes.grid(True, which="major", alpha=0.25)
    axes.set_title(title)
    hollow = axes.scatter([], [], marker="o", facecolors="none", edgecolors="#666666", s=18, label="smallest batch")
    _backend_legend(axes, markers, [hollow])
    legend = _family_legend(figure, axes, ok, colors)
    peak_text = ", ".join(si(p * 1e12, "FLOP/s") for p in peaks)
    return _save(
        figure, path, f"{caption}. Iso-lines: samples/s = u x peak / FLOPs per sample, peak {peak_text}", legend
    )


def plot_utilization_by_family(frame: pd.DataFrame, path: str | Path) -> Path:
    """Box plot of FLOP utilization per family (each series at its largest successful batch), one box per backend."""
    title, caption = "FLOP utilization by family (each model at its largest successful batch)", excluded_caption(frame)
    ok = ok_rows(frame)
    if ok.empty:
        return _empty(path, title, caption)
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
    legend = axes.legend(handles=handles, title="backend", loc="lower right", fontsize=8)
    return _save(figure, path, caption, legend)


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


def plot_flop_vs_nvml(frame: pd.DataFrame, path: str | Path) -> Path:
    """FLOP utilization against nvml's "GPU busy" percent, all batches: how far apart the two numbers are."""
    title = "FLOP utilization vs nvml_util (the GPU-busy percent nvidia-smi shows)"
    caption = excluded_caption(frame)
    ok = ok_rows(frame)
    if ok.empty:
        return _empty(path, title, caption)
    shown = ok[ok["nvml_util"].notna()]
    if len(shown) < len(ok):
        caption += f"; {len(ok) - len(shown)} without an nvml_util sample"
    if shown.empty:
        return _empty(path, title, caption, "no nvml_util samples")
    colors = families.family_colors(families.family_counts(frame))
    shown = families.coloured_last(shown, colors)
    figure, (axes,) = _figure(10, 7.5)
    axes.plot([0, 100], [0, 100], "--", color="#999999", lw=1, label="FLOP utilization = nvml_util")
    style = families.marker_style(len(shown), 14, 0.7)
    axes.scatter(shown["nvml_util"], 100 * shown["utilization"], c=_colors_of(shown, colors), **style)
    axes.set_xlim(0, 102)
    axes.set_ylim(0, 102)
    axes.set_aspect("equal")
    axes.set_xlabel("nvml_util (% of time a kernel was running)")
    axes.set_ylabel("FLOP utilization (% of peak FLOP/s)")
    axes.grid(True, alpha=0.3)
    axes.set_title(title)
    axes.add_artist(axes.legend(loc="upper left", fontsize=8))
    legend = _family_legend(figure, axes, shown, colors)
    return _save(figure, path, caption, legend)


# ---------------------------------------------------------------------------------------------- op classes


def representative_series(
    op_classes: pd.DataFrame, measurements: pd.DataFrame | None = None, limit: int = 12
) -> pd.DataFrame:
    """The attributed series to show: each at its largest batch, ranked by utilization when ``measurements`` has it.

    With more than ``limit`` series, take ``limit`` evenly spaced in that ranking (both extremes and the middle).
    Returns one row per series: the SERIES columns, batch and (when known) utilization, lowest utilization first.
    """
    series = op_classes[SERIES + ["batch"]].drop_duplicates()
    series = series.sort_values("batch").groupby(SERIES, dropna=False, sort=False).tail(1)
    if measurements is not None and not measurements.empty:
        found = ok_rows(measurements)[SERIES + ["batch", "utilization"]].drop_duplicates(
            SERIES + ["batch"], keep="last"
        )
        series = series.merge(found, on=SERIES + ["batch"], how="left").sort_values(["utilization", "model"])
    else:
        series = series.sort_values(["model", "backend"])
    if len(series) > limit:
        series = series.iloc[np.unique(np.linspace(0, len(series) - 1, limit).round().astype(int))]
    return series.reset_index(drop=True)


def plot_op_class_shares(
    op_classes: pd.DataFrame, path: str | Path, measurements: pd.DataFrame | None = None, limit: int = 12
) -> Path:
    """Share of measured time and of FLOPs per op class for representative models: two stacked bars per model."""
    from matplotlib.patches import Patch

    title = "where the time goes and where the FLOPs are, by op class (representative models)"
    if op_classes.empty:
        return _empty(path, title, "no attributed models in the store", "no op-class attribution")
    chosen = representative_series(op_classes, measurements, limit).assign(slot=lambda f: range(len(f)))
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
    legend = axes.legend(handles=handles, title="op class", loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    total = op_classes[SERIES].drop_duplicates().shape[0]
    return _save(figure, path, f"{len(chosen)} of {total} attributed series shown", legend)


def _series_label(item) -> str:
    utilization = getattr(item, "utilization", float("nan"))
    known = "" if pd.isna(utilization) else f", {utilization:.1%} util."
    return f"{_short(item.model)} · {item.backend} · b{item.batch}{known}\ntime | FLOPs"
