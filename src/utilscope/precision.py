"""Precisions: the one table of their names, the tensors they use and how many bytes an element takes.

Counting (``--dtype``), the hardware tables (peaks, ceilings) and measurement (``--precision``) all read these;
each accepts a subset: ``COUNTED``, ``UNITS`` (peaks, ceilings), ``MEASURED``. The fp32 precisions keep fp32 tensors
and differ in PyTorch's TF32 switches (``tf32_switches``, recorded with every measurement): ``fp32`` is what PyTorch
runs when nobody sets them (cuDNN convolutions on the TF32 tensor cores, matmuls in IEEE fp32), ``fp32_strict`` forbids
TF32 everywhere, ``tf32`` allows it everywhere. A GPU without TF32 tensor cores (before Ampere) and a CPU run all
three on their fp32 units, whatever the switches say. int8 has datasheet peaks and a GEMM ceiling, and is neither
counted nor measured. ``amp`` and ``amp_bf16`` are PyTorch's automatic mixed precision, as timm's benchmark runs it:
fp32 weights and input, convolutions and matmuls autocast to fp16 (bf16) on the tensor cores with fp32 accumulate,
TF32 allowed for what stays fp32; their peak is their math unit's (``unit``: fp16, bf16). The names import nothing:
torch is imported when a dtype is first asked for (the command line's parser reads ``MEASURED`` and ``COUNTED``).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from utilscope.errors import UsageError

if TYPE_CHECKING:
    import torch


class Precision(str, Enum):
    FP32 = "fp32"
    FP32_STRICT = "fp32_strict"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    AMP = "amp"
    AMP_BF16 = "amp_bf16"

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of weights and activations (torch is imported here, not with the names: a command line's
        parser reads them)."""
        import torch

        return getattr(torch, _DTYPES[self])

    @property
    def bytes_per_element(self) -> int:
        return self.dtype.itemsize

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype autocast runs convolutions and matmuls in (None: no autocast)."""
        unit = _AUTOCAST_UNIT.get(self)
        return None if unit is None else unit.dtype

    @property
    def unit(self) -> Precision:
        """The math unit whose peak and GEMM ceiling apply: autocast's dtype for amp / amp_bf16; TF32 for ``fp32``,
        whose convolutions (a CNN's FLOPs) PyTorch runs on the TF32 tensor cores; fp32 for ``fp32_strict``; else
        itself. Where a device has no TF32 unit, ``unit_among`` says fp32."""
        return _UNITS.get(self, self)

    def unit_among(self, available) -> str:
        """The name of the unit this precision runs on, among ``available`` (a device's peaks or ceilings): its
        ``unit``, except TF32 where ``available`` has none, a device without TF32 tensor cores running TF32-allowed
        math on its fp32 units. The name may still be missing from ``available``: the caller looks it up."""
        unit = self.unit.value
        return "fp32" if unit == "tf32" and unit not in available else unit

    @property
    def tf32_switches(self) -> tuple[bool, bool]:
        """(matmuls, cuDNN convolutions) allowed to use TF32 while this precision is measured: PyTorch's defaults
        for ``fp32``; both for ``tf32`` and under autocast (as timm's benchmark runs); neither otherwise."""
        return _TF32_SWITCHES.get(self, (False, False))

    @property
    def count_dtype(self) -> str:
        """The counting engine's dtype name for this precision's tensors: every fp32 precision counts as fp32;
        amp as fp16, amp_bf16 as bf16 (autocast's dtype is what the convolutions and matmuls read and write; the
        weights' fp32 copies read by the casts are not counted)."""
        fp32_tensors = _DTYPES[self] == "float32" and self not in _AUTOCAST_UNIT
        return "fp32" if fp32_tensors else self.unit.value


_DTYPES = {  # the torch dtype of each precision's tensors, by its name in torch (``torch.float32``)
    Precision.FP32: "float32",
    Precision.FP32_STRICT: "float32",
    Precision.TF32: "float32",
    Precision.FP16: "float16",
    Precision.BF16: "bfloat16",
    Precision.INT8: "int8",
    Precision.AMP: "float32",
    Precision.AMP_BF16: "float32",
}
_AUTOCAST_UNIT = {Precision.AMP: Precision.FP16, Precision.AMP_BF16: Precision.BF16}
_UNITS = {**_AUTOCAST_UNIT, Precision.FP32: Precision.TF32, Precision.FP32_STRICT: Precision.FP32}
# PyTorch's defaults (torch.backends.cuda.matmul and cudnn.conv fp32_precision, or the legacy allow_tf32 flags)
_TF32_SWITCHES = {
    Precision.FP32: (False, True),
    Precision.TF32: (True, True),
    Precision.AMP: (True, True),
    Precision.AMP_BF16: (True, True),
}
COUNTED = (Precision.FP32, Precision.FP16, Precision.BF16)  # the dtypes the counting engine traces in
UNITS = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16, Precision.INT8)  # a datasheet's peaks
MEASURED = (
    Precision.FP32,
    Precision.FP32_STRICT,
    Precision.TF32,
    Precision.FP16,
    Precision.BF16,
    Precision.AMP,
    Precision.AMP_BF16,
)


def check_counted(name: str) -> str:
    """``name`` if the counting engine traces in it (``COUNTED``: fp32, fp16, bf16); UsageError naming them."""
    names = [unit.value for unit in COUNTED]
    if name not in names:
        raise UsageError(f"unknown dtype {name!r}; use one of: {', '.join(names)}")
    return name


def parse_precision(text: str) -> Precision:
    """A measured precision by its name (``MEASURED``); a UsageError listing them for another."""
    if text not in MEASURED:
        choices = ", ".join(p.value for p in MEASURED)
        raise UsageError(f"unknown precision {text!r}; use one of: {choices}")
    return Precision(text)
