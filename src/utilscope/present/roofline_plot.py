"""The classic log-log roofline: arithmetic intensity vs achieved FLOP/s, one point per layer (or fused region).

x and y count all work (``flops + other_flops``) so elementwise and normalization layers appear too; they come from
``attribute.roofline.roofline`` so the plot and the table never disagree. Two roofs per set: the tensor roof
``min(tensor peak, bandwidth x I)`` and the vector roof ``min(vector peak, bandwidth x I)``; the datasheet set is
drawn solid, the measured ceilings dashed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from utilscope.attribute.records import Point, Roofs
from utilscope.attribute.roofline import RooflineRow, check_roofs, roofline
from utilscope.counting.classify import OpClass
from utilscope.errors import UsageError
from utilscope.files import ROOFLINE_PLOT, make_folder
from utilscope.units import si

_CLASS_COLORS = dict(
    zip(
        [c.value for c in OpClass],
        ["#1f77b4", "#17becf", "#9467bd", "#e377c2", "#2ca02c", "#ff7f0e", "#d62728", "#8c564b", "#bcbd22"]
        + ["#393b79", "#7f7f7f"],
        strict=True,
    )
)
_ROOF_COLORS = {"tensor": "#222222", "vector": "#8a8a8a"}
_MIN_AREA, _AREA_PER_SHARE = 12.0, 900.0  # marker area in pt²: minimum + share of measured time x this


def plot_roofline(
    points: Sequence[Point],
    roofs: Roofs,
    ceiling_roofs: Roofs | None = None,
    path: str | Path = "roofline.png",
    title: str = "",
) -> Path:
    """Draw the roofline of ``points`` against ``roofs`` (solid) and ``ceiling_roofs`` (dashed) into ``path``.

    Points with no work or no bytes have no place on log axes: they are skipped and counted in a footnote.
    Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # the Agg backend, chosen here, not at import
    from matplotlib.figure import Figure

    roof_sets = [(check_roofs(roofs), "-")] + ([(check_roofs(ceiling_roofs), "--")] if ceiling_roofs else [])
    rows = roofline(points, roofs)
    shown = [row for row in rows if row.intensity > 0 and row.achieved_tflops > 0]

    figure = Figure(figsize=(11, 6.5), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.12, 0.12, 0.55, 0.8))
    axes.set_xscale("log")
    axes.set_yscale("log")
    intensity = _intensity_grid(shown, [r for r, _ in roof_sets])
    roof_handles = [h for r, style in roof_sets for h in _draw_roofs(axes, r, style, intensity)]
    class_handles = _draw_points(axes, shown)
    _label_axes(axes, shown, [r for r, _ in roof_sets], intensity, title)
    roofs_legend = _draw_legends(axes, roof_handles, class_handles)
    note = figure.text(0.12, 0.02, _footnote(len(shown), len(rows)), fontsize=8, color="#555555")
    path = Path(path)
    make_folder(path.parent, ROOFLINE_PLOT)
    # "tight" grows the canvas to hold the legends outside the axes
    figure.savefig(path, bbox_inches="tight", bbox_extra_artists=[roofs_legend, note], pad_inches=0.15)
    return path


def plot_attribution(attribution, path: str | Path) -> Path:
    """The roofline of an ``Attribution`` (``utilscope layers --roofline``) into ``path``: its points against its
    datasheet roofs, with the measured-ceiling roofs dashed where they differ. UsageError without roofs."""
    if attribution.roofs is None:
        raise UsageError("no roofs for this device: pass --peak, or measure ceilings first")
    title = f"{attribution.model} · batch {attribution.batch} · {attribution.precision} · {attribution.backend}"
    ceiling = attribution.ceiling_roofs if attribution.ceiling_roofs != attribution.roofs else None
    return plot_roofline(attribution.points, attribution.roofs, ceiling, path, title)


def _label_axes(axes, shown: list[RooflineRow], roof_sets: list[Roofs], intensity: np.ndarray, title: str) -> None:
    """Limits that hold every point and roof, FLOP/s ticks, axis labels, grid and title."""
    from matplotlib.ticker import EngFormatter

    lowest = min(
        [row.achieved_tflops * 1e12 for row in shown] + [r.bandwidth_gbs * 1e9 * intensity[0] for r in roof_sets]
    )
    highest = max(r.tensor_tflops * 1e12 for r in roof_sets)
    axes.set_xlim(intensity[0], intensity[-1])
    axes.set_ylim(lowest / 3, highest * 3)
    axes.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    axes.set_xlabel("arithmetic intensity (FLOP/byte) = (flops + other_flops) / bytes")
    axes.set_ylabel("achieved FLOP/s = (flops + other_flops) / measured time")
    axes.grid(True, which="major", alpha=0.3)
    axes.grid(True, which="minor", alpha=0.08)
    axes.set_title(title or "roofline")


def _draw_legends(axes, roof_handles: list, class_handles: list):
    """The roofs' legend and, below it, the op classes' (both outside the axes, on the right); returns the first."""
    roofs_legend = axes.legend(
        handles=roof_handles, title="roofs", loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title_fontsize=9
    )
    axes.add_artist(roofs_legend)
    if class_handles:
        axes.legend(
            handles=class_handles,
            title="op class (marker area ∝ share of time)",
            loc="upper left",
            bbox_to_anchor=(1.02, 0.62),
            fontsize=8,
            title_fontsize=9,
        )
    return roofs_legend


def _footnote(shown: int, total: int) -> str:
    footnote = f"{shown} of {total} points shown"
    if total > shown:
        footnote += f"; {total - shown} skipped (no work or no bytes: no place on log axes)"
    return footnote


def _intensity_grid(shown: list[RooflineRow], roof_sets: list[Roofs]) -> np.ndarray:
    """Log-spaced intensities covering every point and both ridges of every roof set, with a margin."""
    ridges = [r.vector_tflops * 1e3 / r.bandwidth_gbs for r in roof_sets] + [r.ridge_intensity for r in roof_sets]
    values = [row.intensity for row in shown] + ridges
    return np.logspace(np.log10(min(values) / 4), np.log10(max(values) * 4), 256)


def _draw_roofs(axes, roofs: Roofs, style: str, intensity: np.ndarray) -> list:
    bandwidth = roofs.bandwidth_gbs * 1e9
    handles = []
    for unit, peak_tflops in (("tensor", roofs.tensor_tflops), ("vector", roofs.vector_tflops)):
        peak = peak_tflops * 1e12
        label = f"{unit} {si(peak, 'FLOP/s')}, memory {si(bandwidth, 'B/s')} ({roofs.label})"
        (line,) = axes.plot(
            intensity, np.minimum(peak, bandwidth * intensity), style, color=_ROOF_COLORS[unit], lw=1.4, label=label
        )
        handles.append(line)
        if style == "-":  # name the flat part of the datasheet roofs on the plot itself
            axes.annotate(
                f"{unit} {si(peak, 'FLOP/s')}",
                (intensity[-1], peak),
                xytext=(-4, 3),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=8,
                color=_ROOF_COLORS[unit],
            )
    return handles


def _draw_points(axes, shown: list[RooflineRow]) -> list:
    handles = []
    classes = [c.value for c in OpClass]
    present = sorted({row.op_class for row in shown}, key=lambda c: (classes.index(c) if c in classes else 99, c))
    for op_class in present:
        rows = [row for row in shown if row.op_class == op_class]
        color = _CLASS_COLORS.get(op_class, "#000000")
        axes.scatter(
            [row.intensity for row in rows],
            [row.achieved_tflops * 1e12 for row in rows],
            s=[_MIN_AREA + _AREA_PER_SHARE * row.time_share for row in rows],
            color=color,
            alpha=0.7,
            edgecolors="white",
            linewidths=0.5,
            zorder=3,
        )
        share = sum(row.time_share for row in rows)
        handles.append(axes.scatter([], [], s=40, color=color, label=f"{op_class} ({len(rows)}, {share:.0%} of time)"))
    return handles
