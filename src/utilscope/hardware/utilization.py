"""Utilization, defined once: achieved FLOP/s ÷ peak FLOP/s (ARCHITECTURE.md, "utilization"), and in the same way
bandwidth utilization: achieved GB/s ÷ the memory bandwidth. Every place that reports one (a timed row, an
attribution, a roofline bound, a prediction, a published row) calls ``utilization``; ``achieved_tflops`` turns
counted FLOPs and a time into the numerator. Both work elementwise on numpy arrays and pandas Series too."""

from __future__ import annotations

from numbers import Real


def achieved_tflops(flops, time_ms):
    """TFLOP/s of ``flops`` (2 x MACs) done in ``time_ms`` milliseconds: flops / (time_ms / 1e3) / 1e12."""
    return flops / (time_ms / 1e3) / 1e12


def utilization(achieved, peak, missing=None):
    """``achieved / peak``, the share of the peak (a datasheet peak, a measured ceiling, a user's peak) the work
    used: TFLOP/s against TFLOP/s, or GB/s against a memory bandwidth in GB/s. A scalar peak that is None or 0 is
    unknown: returns ``missing`` (None, or NaN where the caller fills a column)."""
    if peak is None or (isinstance(peak, Real) and peak == 0):
        return missing
    return achieved / peak
