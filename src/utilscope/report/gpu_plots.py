"""The GPU comparison figure: a dot plot per compared batch size, one row per compared series (model, and backend /
precision / resolution where the store has several), FLOP utilization on a shared log axis, one colour per GPU.

Rows are sorted by utilization on the reference GPU (highest at the top; series not measured on the reference at the
bottom). A grey line joins a series' GPUs; a cross at the left edge, in a GPU's colour, marks a series that GPU did
not measure or whose row failed there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope.report import plots
from utilscope.report.figures import Figure, Kind
from utilscope.report.gpus import compared_devices, comparison_rows, device_peaks, gpu_comparison, unknown_peak
from utilscope.units import si

TITLE = "FLOP utilization per model on each GPU (each GPU against its own peak)"
_ROW_INCHES = 0.13


def peak_label(peaks: list[tuple[str, float, str]]) -> str:
    """``"peak 989 TFLOP/s"``; per precision when there are several; ``"peak unknown: measured ceiling 250 TFLOP/s"``
    when the GPU has no datasheet peak."""
    parts = []
    for precision, peak, source in peaks:
        value = (f"{precision} " if len(peaks) > 1 else "") + si(peak * 1e12, "FLOP/s")
        parts.append(f"unknown: measured ceiling {value}" if unknown_peak(source) else value)
    return "peak " + ", ".join(parts) if parts else "peak –"


def _series_labels(keys: pd.DataFrame) -> list[str]:
    """The model's short name, plus backend, precision and resolution where the rows have several."""
    labels = keys["model"].map(plots._short)
    for column, fmt in (("backend", "{}"), ("precision", "{}"), ("resolution", "{}px")):
        if keys[column].nunique() > 1:
            labels = labels + " · " + keys[column].map(lambda v, fmt=fmt: fmt.format(v))
    return list(labels)


def _panel(comparison: pd.DataFrame, batch: int, devices: list[str]) -> pd.DataFrame:
    """The series of one batch with at least one successful GPU, lowest reference utilization first (missing first)."""
    rows = comparison.xs(batch, level="batch", drop_level=False)
    utilization = rows.xs("utilization", axis=1, level=1)[devices]
    rows, utilization = rows[utilization.notna().any(axis=1)], utilization[utilization.notna().any(axis=1)]
    keys = rows.index.to_frame(index=False).assign(reference=utilization[devices[0]].to_numpy())
    order = keys.sort_values(["reference", "model"], ascending=[True, False], na_position="first").index
    return utilization.iloc[order].set_axis(np.array(_series_labels(keys))[order], axis=0)


def _draw_panel(axes, panel: pd.DataFrame, colors: dict[str, str], batch: int, limits: tuple[float, float]) -> None:
    heights = np.arange(len(panel))
    values = panel.to_numpy(float)
    low, high = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
    axes.hlines(heights, low, high, color="#bbbbbb", lw=0.8, zorder=1)
    edge = axes.get_yaxis_transform()  # x in axes fractions, y in data: crosses at the left edge
    for device, color in colors.items():
        found = panel[device].notna().to_numpy()
        axes.scatter(panel[device][found], heights[found], s=16, color=color, zorder=3, label=device)
        axes.scatter(
            np.full((~found).sum(), 0.012),
            heights[~found],
            s=14,
            marker="x",
            color=color,
            lw=0.9,
            transform=edge,
            zorder=3,
            label=f"{device}: missing",
        )
    axes.set_xscale("log")
    axes.set_xlim(*limits)
    axes.xaxis.set_major_formatter(lambda value, _: f"{100 * value:g}%")
    axes.set_yticks(heights, list(panel.index), fontsize=6)
    axes.set_ylim(-0.7, len(panel) - 0.3)
    axes.set_xlabel("FLOP utilization (log) = achieved / that GPU's peak FLOP/s")
    axes.set_title(f"batch {batch}: {len(panel)} series")
    axes.grid(True, axis="x", which="major", alpha=0.3)
    axes.grid(True, axis="y", alpha=0.12)


def _legend(axes, frame: pd.DataFrame, panels: list[pd.DataFrame], colors: dict[str, str]):
    rows, _ = comparison_rows(frame)
    peaks = device_peaks(rows)
    total = sum(len(panel) for panel in panels)
    handles = []
    for i, (device, color) in enumerate(colors.items()):
        shown = sum(int(panel[device].notna().sum()) for panel in panels)
        role = "reference, " if i == 0 else ""
        label = f"{device} ({role}{peak_label(peaks.get(device, []))}; {shown} of {total} series)"
        handles.append(axes.scatter([], [], s=16, color=color, label=label))
    missing = "at the left edge: not measured or failed"
    handles.append(axes.scatter([], [], s=14, marker="x", color="#666666", label=missing))
    return axes.legend(
        handles=handles,
        title="GPU",
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=7,
        title_fontsize=8,
        frameon=False,
    )


def plot_gpu_comparison(frame: pd.DataFrame):
    """FLOP utilization per series on each GPU, one panel per compared batch size (``gpus.gpu_comparison``)."""
    if plots.ok_rows(frame).empty:
        return "no successful measurements"
    devices = compared_devices(frame)
    if len(devices) < 2:
        return f"one GPU only ({devices[0]}): nothing to compare"
    comparison = gpu_comparison(frame)
    if comparison.empty:
        return "no batch size has successful rows on two GPUs"
    batches = sorted(int(b) for b in comparison.index.get_level_values("batch").unique())
    panels = [_panel(comparison, batch, devices) for batch in batches]
    values = np.concatenate([panel.to_numpy(float).ravel() for panel in panels])
    values = values[values > 0]  # a log axis: NaN (not measured) and zero left out
    limits = (values.min() / 1.6, values.max() * 1.6)
    height = max(4.0, _ROW_INCHES * max(len(panel) for panel in panels) + 1.8)
    figure, axes = plots._figure(7.0 * len(panels) + 1.5, height, columns=len(panels), sharey=False)
    colors = {device: f"C{i}" for i, device in enumerate(devices)}
    for ax, batch, panel in zip(axes, batches, panels, strict=True):
        _draw_panel(ax, panel, colors, batch, limits)
    _legend(axes[-1], frame, panels, colors)
    figure.suptitle(TITLE)
    return plots._captioned(figure, plots.excluded_caption(frame))


FIGURES = (  # of the measurements
    Figure(
        "gpu_comparison",
        "GPU comparison",
        "One row per series; dots: FLOP utilization of each GPU against its own peak, rows sorted by utilization on "
        "the reference GPU (the first in the legend). A cross at the left edge: that GPU did not measure the series, "
        "or its row failed.",
        plot_gpu_comparison,
        Kind.STATIC,
    ),
)
