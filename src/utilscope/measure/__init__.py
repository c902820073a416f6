"""Measurement: what to measure (``settings``), the timing harness, backends, precisions, NVML sampling and the
batch-size sweep (``sweep``: ``profile``).

The names below are bound when first asked for (``from utilscope.measure import profile``): importing one light
module of the package (``measure.backends``'s registry, which a command line's help lists) imports no torch."""

from utilscope.lazy import module_getattr

_LAZY = {
    "BACKENDS": "utilscope.measure.backends",
    "get_backend": "utilscope.measure.backends",
    "Precision": "utilscope.measure.precision",
    "CudnnSettings": "utilscope.measure.settings",
    "MeasureRequest": "utilscope.measure.settings",
    "ProfileResult": "utilscope.measure.sweep",
    "ProfileRow": "utilscope.measure.sweep",
    "profile": "utilscope.measure.sweep",
    "TimingPlan": "utilscope.measure.timing",
    "TimingStats": "utilscope.measure.timing",
    "measure": "utilscope.measure.timing",
}


__getattr__ = module_getattr(__name__, globals(), _LAZY)


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
