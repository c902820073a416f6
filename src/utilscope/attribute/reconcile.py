"""Reconcile profiled per-layer times with the end-to-end time they are shares of.

The per-layer times come from profiled passes (eager under the layer tracer, or one profiled replay), the
end-to-end time from the timed run of the backend. Two things can make the profiled times add up to more than the
wall-clock time they stand for, and neither is hidden:

* overlap: ops of several threads at once (CPU) sum to more than the wall-clock time during which one ran; the
  times are scaled to that wall-clock time.
* the profiled passes ran slower than the timed ones (the profiler's and the tracer's overhead; on a loaded CPU some
  passes far slower): the times are scaled so that they sum to the end-to-end time, keeping their shares, and the
  idle share is then not measurable.

Each scaling is a note that says by how much, so per-layer times never exceed the end-to-end time silently.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from utilscope.attribute.records import LayerTime, Point

OVERLAP_TOLERANCE = 1e-3  # relative: a sum this close to the covered wall-clock time is rounding, not overlap


@dataclass(frozen=True)
class Reconciled:
    """Device time per inference after reconciling, the factor every per-layer time was scaled by, and why."""

    device_ms: float  # <= the end-to-end time
    scale: float  # 1.0: the profiled times stand as measured
    idle_measurable: bool  # False when the profiled time exceeded the end-to-end time
    notes: tuple[str, ...] = ()


def reconcile(summed_ms: float, busy_ms: float, end_to_end_ms: float, device_type: str) -> Reconciled:
    """``summed_ms``: the profiled times' sum per inference; ``busy_ms``: the wall-clock time per inference during
    which at least one of them ran (``summed_ms`` where the profiler cannot tell)."""
    unit = "op" if device_type == "cpu" else "kernel"
    notes, scale, device_ms = [], 1.0, summed_ms
    if summed_ms > busy_ms * (1 + OVERLAP_TOLERANCE) and busy_ms > 0:
        scale, device_ms = busy_ms / summed_ms, busy_ms
        notes.append(
            f"the profiler's {unit} times overlap (several threads at once): they sum to {summed_ms:.3f} ms per "
            f"inference while {unit}s ran during {busy_ms:.3f} ms of wall-clock time; per-layer times are scaled by "
            f"{scale:.3g} to that time"
        )
    if end_to_end_ms > 0 and device_ms > end_to_end_ms:
        fit = end_to_end_ms / device_ms
        notes.append(
            f"the profiled passes' {unit}s took {device_ms:.3f} ms per inference, {device_ms / end_to_end_ms:.2f}x "
            f"the {end_to_end_ms:.3f} ms measured end to end (they run under the profiler and the layer tracer, "
            f"and a loaded machine slows some passes more than others): per-layer times are scaled by {fit:.3g} to "
            "fit the end-to-end time, their shares as profiled; the idle share is not measurable"
        )
        return Reconciled(end_to_end_ms, scale * fit, False, tuple(notes))
    return Reconciled(device_ms, scale, True, tuple(notes))


def scaled_layers(layers: list[LayerTime], scale: float) -> list[LayerTime]:
    if scale == 1.0:
        return layers
    return [
        layer if layer.time_ms is None else dataclasses.replace(layer, time_ms=layer.time_ms * scale)
        for layer in layers
    ]


def scaled_points(points: list[Point], scale: float) -> list[Point]:
    if scale == 1.0:
        return points
    return [dataclasses.replace(point, time_ms=point.time_ms * scale) for point in points]
