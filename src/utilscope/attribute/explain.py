"""Everything ``utilscope layers`` reports about one attribution: roofline, bounds, gap split, findings."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from utilscope.attribute.hints import Hint, hints
from utilscope.attribute.records import Attribution
from utilscope.attribute.roofline import RooflineRow, attainable_bounds, class_gaps, gap_split, roofline
from utilscope.attribute.summary import class_summary, points_frame


@dataclass
class Explanation:
    attribution: Attribution
    points: pd.DataFrame  # one row per layer or fused region, with time and FLOP shares
    classes: pd.DataFrame  # per op class: FLOP share beside time share
    roofline: list[RooflineRow]  # against the datasheet roofs (or the measured ceilings where no datasheet)
    gap: dict | None  # measured vs attainable utilization: architecture- and runtime-limited shares
    class_gaps: pd.DataFrame | None  # per op class: measured vs attainable time
    findings: list[Hint]  # one per rule that fired, biggest time at stake first

    def to_frame(self) -> pd.DataFrame:
        """``points``: one row per layer (eager, graph) or fused region (compiled backends) with its time, time and
        FLOP shares, achieved TFLOP/s and utilization."""
        return self.points

    def to_dict(self) -> dict:
        return {
            **self.attribution.to_dict(),
            "classes": self.classes.to_dict(orient="records"),
            "roofline": [asdict(row) for row in self.roofline],
            "attainable": self.gap,
            "class_gaps": self.class_gaps.to_dict(orient="records") if self.class_gaps is not None else None,
            "findings": [hint.to_dict() for hint in self.findings],
        }


def explain(attribution: Attribution) -> Explanation:
    roofs = attribution.roofs
    rows = roofline(attribution.points, roofs) if roofs is not None else []
    gap, gaps = None, None
    measured = attribution.measured_utilization
    if roofs is not None and attribution.layers:
        bounds = attainable_bounds(attribution.layers, roofs)
        gap = gap_split(measured, bounds) if measured is not None else asdict(bounds)
        gaps = class_gaps(attribution.points, roofs)
    return Explanation(
        attribution,
        points_frame(attribution),
        class_summary(attribution),
        rows,
        gap,
        gaps,
        hints(attribution),
    )
