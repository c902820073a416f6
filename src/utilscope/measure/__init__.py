"""Measurement: what to measure (``settings``), the timing harness, backends, precisions, NVML sampling and the
batch-size sweep (``sweep``: ``profile``).

The names below are bound when first asked for (``from utilscope.measure import profile``): importing one light
module of the package (``measure.backends``'s registry, which a command line's help lists) imports no torch."""

import importlib

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


def __getattr__(name: str):
    if name in _LAZY:
        value = globals()[name] = getattr(importlib.import_module(_LAZY[name]), name)  # bound from now on
        return value
    raise AttributeError(f"module 'utilscope.measure' has no attribute {name!r}")


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
