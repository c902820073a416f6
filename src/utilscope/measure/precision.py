"""Precisions on a device: which ones it runs, and the math mode a measurement runs in (``utilscope.precision``
has the names and dtypes).

fp16 and bf16 cast weights and activations (no autocast); the fp32 precisions keep fp32 tensors and set PyTorch's
TF32 switches (``Precision.tf32_switches``): fp32 as PyTorch's defaults (TF32 in cuDNN convolutions, not in
matmuls), fp32_strict none, tf32 both. amp and amp_bf16 (GPU only) keep fp32 weights and input
and run under ``torch.autocast`` with TF32 allowed, as timm's benchmark does; autocast's cache of cast weights is
off, so every call casts the weights again, as timm's benchmark does by entering autocast once per step.
"""

from __future__ import annotations

import contextlib

import torch

from utilscope.errors import UsageError
from utilscope.precision import MEASURED, Precision, parse_precision
from utilscope.torch_flags import tf32_mode

__all__ = ["MEASURED", "Precision", "check_precision", "math_mode", "parse_precision", "supported_precisions"]


def supported_precisions(device: torch.device) -> list[Precision]:
    """fp32 and fp32_strict everywhere (one and the same math where there is no TF32 unit); on CPUs also bf16; on
    GPUs fp16 and amp, and tf32, bf16 and amp_bf16 from compute capability 8.0 (Ampere)."""
    if device.type != "cuda":
        return [Precision.FP32, Precision.FP32_STRICT, Precision.BF16]
    major, _ = torch.cuda.get_device_capability(device)
    precisions = [Precision.FP32, Precision.FP32_STRICT, Precision.FP16, Precision.AMP]
    if major >= 8:
        precisions += [Precision.TF32, Precision.BF16, Precision.AMP_BF16]
    return precisions


def check_precision(precision: Precision, device: torch.device) -> Precision:
    supported = supported_precisions(device)
    if precision not in supported:
        names = ", ".join(p.value for p in supported)
        raise UsageError(f"precision {precision.value} is not supported on {device.type}; this device runs: {names}")
    return precision


@contextlib.contextmanager
def math_mode(precision: Precision):
    """For the duration of a measurement, restored after: the precision's TF32 switches (``tf32_switches``); for
    ``amp`` / ``amp_bf16`` CUDA autocast to fp16 / bf16, its weight cache off. (cuDNN's algorithm choice is
    ``CudnnSettings.applied``.)"""
    autocast_dtype = precision.autocast_dtype
    with tf32_mode(*precision.tf32_switches):
        if autocast_dtype is None or not torch.cuda.is_available():  # amp is refused on CPUs (check_precision)
            yield
            return
        with torch.autocast("cuda", dtype=autocast_dtype, cache_enabled=False):
            yield
