"""Summaries of an attribution: per op class, FLOP share beside time share; the slowest points."""

from __future__ import annotations

import pandas as pd

from utilscope.attribute.records import Attribution
from utilscope.hardware.utilization import achieved_tflops, utilization


def points_frame(attribution: Attribution) -> pd.DataFrame:
    """One row per point (layer or fused region) with its time share, achieved TFLOP/s and utilization."""
    rows = [
        {
            "name": p.name,
            "op_class": p.op_class,
            "flops": p.flops,
            "other_flops": p.other_flops,
            "bytes": p.bytes,
            "time_ms": p.time_ms,
            "layers": len(p.layers),
            "kernels": len(p.kernels),
        }
        for p in attribution.points
    ]
    frame = pd.DataFrame(
        rows, columns=["name", "op_class", "flops", "other_flops", "bytes", "time_ms", "layers", "kernels"]
    )
    return with_rates(frame, attribution)


def with_rates(frame: pd.DataFrame, attribution: Attribution) -> pd.DataFrame:
    """Add time and FLOP shares, achieved TFLOP/s and utilization to rows with ``flops`` and ``time_ms``."""
    total_ms = frame["time_ms"].sum()
    frame["time_share"] = frame["time_ms"] / total_ms if total_ms else 0.0
    frame["flop_share"] = frame["flops"] / attribution.flops if attribution.flops else 0.0
    frame["achieved_tflops"] = achieved_tflops(frame["flops"], frame["time_ms"])
    frame["utilization"] = utilization(frame["achieved_tflops"], attribution.peak_tflops, missing=float("nan"))
    return frame


def class_summary(attribution: Attribution) -> pd.DataFrame:
    """Per op class: FLOP share and time share ("depthwise convs: 9% of FLOPs, 41% of time")."""
    frame = points_frame(attribution)
    summary = frame.groupby("op_class", sort=False).agg(
        points=("name", "size"), flops=("flops", "sum"), time_ms=("time_ms", "sum"), bytes=("bytes", "sum")
    )
    summary = with_rates(summary, attribution)
    return summary.sort_values("time_ms", ascending=False).reset_index()


def class_sentences(attribution: Attribution, limit: int = 5) -> list[str]:
    """'depthwise_conv: 9.0% of FLOPs, 41.0% of time' for the classes that take the most time."""
    return [
        f"{row.op_class}: {row.flop_share:.1%} of FLOPs, {row.time_share:.1%} of time"
        for row in class_summary(attribution).head(limit).itertuples()
    ]
