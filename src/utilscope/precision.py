"""Precisions: the one table of their names, the tensors they use and how many bytes an element takes.

Counting (``--dtype``), the hardware tables (peaks, ceilings) and measurement (``--precision``) all read these;
each accepts a subset: ``COUNTED``, ``UNITS`` (peaks, ceilings), ``MEASURED``. tf32 keeps fp32 tensors and runs
fp32 matmuls and convolutions on the TF32 tensor cores; int8 has datasheet peaks and a GEMM ceiling, and is neither
counted nor measured. ``amp`` and ``amp_bf16`` are PyTorch's automatic mixed precision, as timm's benchmark runs it:
fp32 weights and input, convolutions and matmuls autocast to fp16 (bf16) on the tensor cores with fp32 accumulate,
TF32 allowed for what stays fp32; their peak is their math unit's (``unit``: fp16, bf16).
"""

from __future__ import annotations

from enum import Enum

import torch


class Precision(str, Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    AMP = "amp"
    AMP_BF16 = "amp_bf16"

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of weights and activations."""
        return _DTYPES[self]

    @property
    def bytes_per_element(self) -> int:
        return self.dtype.itemsize

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype autocast runs convolutions and matmuls in (None: no autocast)."""
        return _AUTOCAST.get(self)

    @property
    def unit(self) -> Precision:
        """The math unit whose peak and GEMM ceiling apply: autocast's dtype for amp / amp_bf16, else itself."""
        return _AUTOCAST_UNIT.get(self, self)

    @property
    def count_dtype(self) -> str:
        """The counting engine's dtype name for this precision's tensors: tf32 counts as fp32 (the same tensors);
        amp as fp16, amp_bf16 as bf16 (autocast's dtype is what the convolutions and matmuls read and write; the
        weights' fp32 copies read by the casts are not counted)."""
        return Precision.FP32.value if self is Precision.TF32 else self.unit.value


_DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int8,
    Precision.AMP: torch.float32,
    Precision.AMP_BF16: torch.float32,
}
_AUTOCAST_UNIT = {Precision.AMP: Precision.FP16, Precision.AMP_BF16: Precision.BF16}
_AUTOCAST = {precision: unit.dtype for precision, unit in _AUTOCAST_UNIT.items()}
COUNTED = (Precision.FP32, Precision.FP16, Precision.BF16)  # the dtypes the counting engine traces in
UNITS = tuple(p for p in Precision if p.unit is p)  # the math units a datasheet gives peaks for
MEASURED = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16, Precision.AMP, Precision.AMP_BF16)
