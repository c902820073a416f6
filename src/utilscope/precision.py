"""Precisions: the one table of their names, the tensors they use and how many bytes an element takes.

Counting (``--dtype``), the hardware tables (peaks, ceilings) and measurement (``--precision``) all read these;
each accepts a subset: ``COUNTED``, every precision (peaks), ``MEASURED``. tf32 keeps fp32 tensors and runs fp32
matmuls and convolutions on the TF32 tensor cores; int8 has datasheet peaks and a GEMM ceiling, and is neither
counted nor measured.
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

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of weights and activations."""
        return _DTYPES[self]

    @property
    def bytes_per_element(self) -> int:
        return self.dtype.itemsize

    @property
    def count_dtype(self) -> str:
        """The counting engine's dtype name for this precision's tensors (tf32 counts as fp32: the same tensors)."""
        return Precision.FP32.value if self is Precision.TF32 else self.value


_DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int8,
}
COUNTED = (Precision.FP32, Precision.FP16, Precision.BF16)  # the dtypes the counting engine traces in
MEASURED = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16)  # what a measurement runs in
