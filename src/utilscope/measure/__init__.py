"""Measurement: timing harness, backends, precisions, NVML sampling and the batch-size profile."""

from utilscope.measure.backends import BACKENDS, get_backend
from utilscope.measure.precision import Precision
from utilscope.measure.profile import ProfileResult, ProfileRow, profile
from utilscope.measure.timing import TimingPlan, TimingStats, measure

__all__ = [
    "BACKENDS",
    "Precision",
    "ProfileResult",
    "ProfileRow",
    "TimingPlan",
    "TimingStats",
    "get_backend",
    "measure",
    "profile",
]
