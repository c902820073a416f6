"""Measurement: what to measure (``settings``), the timing harness, backends, precisions, NVML sampling and the
batch-size sweep (``sweep``: ``profile``)."""

from utilscope.measure.backends import BACKENDS, get_backend
from utilscope.measure.precision import Precision
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import ProfileResult, ProfileRow, profile
from utilscope.measure.timing import TimingPlan, TimingStats, measure

__all__ = [
    "BACKENDS",
    "CudnnSettings",
    "MeasureRequest",
    "Precision",
    "ProfileResult",
    "ProfileRow",
    "TimingPlan",
    "TimingStats",
    "get_backend",
    "measure",
    "profile",
]
