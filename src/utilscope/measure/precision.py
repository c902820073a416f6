"""Precisions on a device: which ones it runs, and the math mode a measurement runs in (``utilscope.precision``
has the names and dtypes).

fp16 and bf16 cast weights and activations (no autocast); tf32 keeps fp32 tensors and lets matmuls and
convolutions use the TF32 tensor cores; fp32 forbids TF32.
"""

from __future__ import annotations

import torch

from utilscope.errors import UsageError
from utilscope.precision import MEASURED, Precision
from utilscope.torch_flags import tf32_mode

__all__ = ["MEASURED", "Precision", "check_precision", "math_mode", "parse_precision", "supported_precisions"]


def parse_precision(text: str) -> Precision:
    if text not in MEASURED:
        choices = ", ".join(p.value for p in MEASURED)
        raise UsageError(f"unknown precision {text!r}; use one of: {choices}")
    return Precision(text)


def supported_precisions(device: torch.device) -> list[Precision]:
    """fp32 everywhere; on CPUs also bf16; on GPUs fp16, and tf32/bf16 from compute capability 8.0 (Ampere)."""
    if device.type != "cuda":
        return [Precision.FP32, Precision.BF16]
    major, _ = torch.cuda.get_device_capability(device)
    precisions = [Precision.FP32, Precision.FP16]
    if major >= 8:
        precisions += [Precision.TF32, Precision.BF16]
    return precisions


def check_precision(precision: Precision, device: torch.device) -> Precision:
    supported = supported_precisions(device)
    if precision not in supported:
        names = ", ".join(p.value for p in supported)
        raise UsageError(f"precision {precision.value} is not supported on {device.type}; this device runs: {names}")
    return precision


def math_mode(precision: Precision):
    """TF32 on for ``tf32`` only, for the duration of a measurement; restored after. (cuDNN's algorithm choice is
    ``CudnnSettings.applied``.)"""
    return tf32_mode(precision is Precision.TF32)
