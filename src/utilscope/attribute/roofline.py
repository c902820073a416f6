"""Roofline and attainable utilization: what each layer (and the whole network) could take on ideal hardware use.

The attainable time of a unit of work is ``max(flops / tensor peak + other_flops / vector peak, bytes /
bandwidth)``: tensor-core FLOPs (convolutions, matmuls) run at ``Roofs.tensor_tflops``, elementwise and
normalization work (``other_flops``) at ``Roofs.vector_tflops``, and the minimum DRAM traffic at
``Roofs.bandwidth_gbs``. A unit is *compute-bound* when the compute term is the larger one, else *memory-bound*
(ties, including no work at all, count as memory-bound).

The network-level bounds sum the per-layer attainable times: with ``bytes`` (the model as written, every op
reading and writing DRAM) and with ``bytes_fused`` (elementwise/norm ops fused into their producers, an ideal
deployment). Utilization is ``flops / time / tensor peak``, the same definition as the measured utilization, so
with datasheet roofs both bounds are upper bounds of the measured one and ``fused >= unfused``.

Everything here is a pure function of counts, times and roofs; plots live in ``utilscope.present``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from utilscope.attribute.records import Point, Roofs
from utilscope.hardware.utilization import achieved_tflops, utilization


class Bound(str, Enum):
    COMPUTE = "compute"
    MEMORY = "memory"


@dataclass(frozen=True)
class RooflineRow:
    """One point on the roofline. ``intensity`` and ``achieved_tflops`` count all work (flops + other_flops)."""

    name: str
    op_class: str
    intensity: float  # (flops + other_flops) / bytes, FLOP per byte; 0 when the point moves no bytes
    achieved_tflops: float  # (flops + other_flops) / measured time
    attainable_ms: float
    measured_ms: float
    bound: Bound
    efficiency: float | None  # attainable_ms / measured_ms; None without a measured time
    time_share: float  # share of the summed measured time of all points


@dataclass(frozen=True)
class Bounds:
    """Network-level attainable utilization (of the tensor peak) and the summed per-layer attainable times."""

    unfused_utilization: float  # the model as written: every op reads and writes DRAM
    fused_utilization: float  # elementwise/norm ops fused into their producers
    unfused_ms: float
    fused_ms: float


def check_roofs(roofs: Roofs) -> Roofs:
    values = {"tensor_tflops": roofs.tensor_tflops, "vector_tflops": roofs.vector_tflops}
    values["bandwidth_gbs"] = roofs.bandwidth_gbs
    bad = {name: value for name, value in values.items() if not (math.isfinite(value) and value > 0)}
    if bad:
        raise ValueError(f"roofs {roofs.label!r}: peaks and bandwidth must be positive and finite, got {bad}")
    return roofs


def _terms_ms(flops: int, other_flops: int, bytes: int, roofs: Roofs) -> tuple[float, float]:
    """(compute time, memory time) in ms at the roofs."""
    if min(flops, other_flops, bytes) < 0:
        raise ValueError(f"work must be non-negative, got flops={flops}, other_flops={other_flops}, bytes={bytes}")
    compute_s = flops / (roofs.tensor_tflops * 1e12) + other_flops / (roofs.vector_tflops * 1e12)
    memory_s = bytes / (roofs.bandwidth_gbs * 1e9)
    return compute_s * 1e3, memory_s * 1e3


def attainable_ms(flops: int, other_flops: int, bytes: int, roofs: Roofs) -> float:
    """``max(flops / tensor peak + other_flops / vector peak, bytes / bandwidth)`` in milliseconds."""
    return max(_terms_ms(flops, other_flops, bytes, roofs))


def classify(flops: int, other_flops: int, bytes: int, roofs: Roofs) -> Bound:
    """``COMPUTE`` when the compute time exceeds the memory time at the roofs, else ``MEMORY``."""
    compute_ms, memory_ms = _terms_ms(flops, other_flops, bytes, roofs)
    return Bound.COMPUTE if compute_ms > memory_ms else Bound.MEMORY


def roofline(points: Sequence[Point], roofs: Roofs) -> list[RooflineRow]:
    """One row per point: its intensity, achieved FLOP/s, attainable time, bound, efficiency and time share."""
    check_roofs(roofs)
    for point in points:
        if not (math.isfinite(point.time_ms) and point.time_ms >= 0):
            raise ValueError(f"point {point.name!r}: measured time must be a non-negative number, got {point.time_ms}")
    total_ms = sum(point.time_ms for point in points)
    rows = []
    for point in points:
        work = point.flops + point.other_flops
        ideal_ms = attainable_ms(point.flops, point.other_flops, point.bytes, roofs)
        rows.append(
            RooflineRow(
                name=point.name,
                op_class=point.op_class,
                intensity=work / point.bytes if point.bytes else 0.0,
                achieved_tflops=work / (point.time_ms / 1e3) / 1e12 if point.time_ms else 0.0,
                attainable_ms=ideal_ms,
                measured_ms=point.time_ms,
                bound=classify(point.flops, point.other_flops, point.bytes, roofs),
                efficiency=ideal_ms / point.time_ms if point.time_ms else None,
                time_share=point.time_ms / total_ms if total_ms else 0.0,
            )
        )
    return rows


def _utilization(flops: int, time_ms: float, roofs: Roofs) -> float:
    return utilization(achieved_tflops(flops, time_ms), roofs.tensor_tflops) if time_ms else 0.0


def attainable_bounds(layers: Iterable, roofs: Roofs) -> Bounds:
    """Upper bounds of the network's utilization from the per-layer roofline times.

    ``layers``: objects with ``flops``, ``other_flops``, ``bytes`` and ``bytes_fused`` (``LayerCount``,
    ``LayerTime``), all layers of one inference. Utilization = total flops / summed attainable time / tensor peak.
    """
    check_roofs(roofs)
    layers = list(layers)
    if not layers:
        raise ValueError("attainable_bounds needs at least one layer")
    for layer in layers:
        if layer.bytes_fused > layer.bytes:
            name = getattr(layer, "name", layer)
            raise ValueError(f"{name}: bytes_fused ({layer.bytes_fused}) exceeds bytes ({layer.bytes})")
    flops = sum(layer.flops for layer in layers)
    unfused_ms = sum(attainable_ms(layer.flops, layer.other_flops, layer.bytes, roofs) for layer in layers)
    fused_ms = sum(attainable_ms(layer.flops, layer.other_flops, layer.bytes_fused, roofs) for layer in layers)
    return Bounds(
        unfused_utilization=_utilization(flops, unfused_ms, roofs),
        fused_utilization=_utilization(flops, fused_ms, roofs),
        unfused_ms=unfused_ms,
        fused_ms=fused_ms,
    )


def gap_split(measured_utilization: float, bounds: Bounds) -> dict[str, float | bool]:
    """Split the unused share of the peak: ``measured + runtime_limited + architecture_limited == 1``.

    ``architecture_limited = 1 - fused bound``: even an ideal runtime could not use it (the layers' work is
    memory-bound or runs on the vector units). ``runtime_limited = fused bound - measured``: a better runtime could.
    ``fusion_gain = fused - unfused bound``: the part of it that fusing elementwise/norm ops alone makes reachable.
    ``bound_exceeded`` is True when the measurement beat the fused bound (data served from cache rather than
    DRAM, or roofs below the real peaks); ``runtime_limited`` is then negative, never clipped.
    """
    if not (math.isfinite(measured_utilization) and measured_utilization >= 0):
        raise ValueError(f"measured utilization must be a non-negative number, got {measured_utilization}")
    return {
        "measured_utilization": measured_utilization,
        "unfused_utilization": bounds.unfused_utilization,
        "fused_utilization": bounds.fused_utilization,
        "architecture_limited": 1.0 - bounds.fused_utilization,
        "runtime_limited": bounds.fused_utilization - measured_utilization,
        "fusion_gain": bounds.fused_utilization - bounds.unfused_utilization,
        "bound_exceeded": measured_utilization > bounds.fused_utilization,
    }


CLASS_GAP_COLUMNS = ["op_class", "points", "measured_ms", "attainable_ms", "gap_ms", "time_share", "gap_share"]


def class_gaps(points: Sequence[Point], roofs: Roofs, fused: bool = False) -> pd.DataFrame:
    """Per op class: measured and attainable time, the runtime gap (measured - attainable) and its share.

    ``fused=True`` takes each point's ``bytes_fused`` (``LayerTime`` has it; a fused region's ``bytes`` already
    are fused), so the gap is measured against an ideal deployment. Sorted by gap, largest first; ``gap_share`` is
    the class's part of the summed gap of all classes.
    """
    check_roofs(roofs)
    rows = []
    for point in points:
        if fused and not hasattr(point, "bytes_fused"):
            raise ValueError(f"point {point.name!r} has no bytes_fused; pass fused=False or LayerTime objects")
        if point.time_ms is None:
            raise ValueError(f"{point.name!r} has no time of its own (it is part of a fused region): pass the regions")
        moved = point.bytes_fused if fused else point.bytes
        ideal_ms = attainable_ms(point.flops, point.other_flops, moved, roofs)
        rows.append({"op_class": point.op_class, "points": 1, "measured_ms": point.time_ms, "attainable_ms": ideal_ms})
    if not rows:
        return pd.DataFrame(columns=CLASS_GAP_COLUMNS)
    frame = pd.DataFrame(rows).groupby("op_class", sort=False).sum().reset_index()
    frame["gap_ms"] = frame["measured_ms"] - frame["attainable_ms"]
    total_ms, total_gap = frame["measured_ms"].sum(), frame["gap_ms"].sum()
    frame["time_share"] = frame["measured_ms"] / total_ms if total_ms else 0.0
    frame["gap_share"] = frame["gap_ms"] / total_gap if total_gap else 0.0
    return frame[CLASS_GAP_COLUMNS].sort_values("gap_ms", ascending=False, ignore_index=True)


__all__ = [
    "Bound",
    "Bounds",
    "RooflineRow",
    "attainable_bounds",
    "attainable_ms",
    "check_roofs",
    "class_gaps",
    "classify",
    "gap_split",
    "roofline",
]
