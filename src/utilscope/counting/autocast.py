"""CUDA autocast's casts, traced: what a network runs under ``torch.autocast("cuda", dtype)`` (precision ``amp``).

Autocast dispatches on CUDA tensors only, so a trace on the meta device (or the CPU) does not see it. This tracer
applies its cast policy itself, op by op, with the lists of PyTorch's autocast documentation ("CUDA Ops that can
autocast to float16" / "to float32"), as the aten ops they reach the dispatcher as:

- convolutions and matrix products run in the lower dtype: their fp32 inputs (the image, the fp32 weights, fp32
  activations) are cast first, each cast a copy kernel of its own (weights are cast on every call: the cache is
  off, as timm's benchmark runs it), recorded as ``CAST_OP``;
- norms and the math of the float32 list (layer and group norm, exp, log, pow, rsqrt, ...) run in fp32: their
  lower-dtype inputs are cast up first, and their fp32 outputs flow on (an elementwise op meeting an fp16 and an
  fp32 tensor promotes to fp32, as it does on the GPU);
- reductions and softmax with an output dtype (sum, prod, cumsum, vector and matrix norms, softmax) read the lower
  dtype and write fp32, without a copy;
- everything else (batch norm, activations, pooling, elementwise ops) runs in the dtype it is given.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from utilscope.counting.tracer import Tracer, tensors_of

# the lower dtype's functions, cast before their own checks run (a conv checks that input and bias agree)
LOWER = frozenset(
    {
        torch.conv1d,
        torch.conv2d,
        torch.conv3d,
        torch.conv_transpose1d,
        torch.conv_transpose2d,
        F.linear,
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.mm,
        torch.Tensor.mm,
        torch.bmm,
        torch.Tensor.bmm,
        torch.baddbmm,
        torch.addmm,
        torch.addbmm,
        torch.einsum,
        F.prelu,
        F.scaled_dot_product_attention,
    }
)
FLOAT32 = frozenset(
    {
        "aten.native_layer_norm",
        "aten.layer_norm",
        "aten.native_group_norm",
        "aten.group_norm",
        "aten.exp",
        "aten.expm1",
        "aten.log",
        "aten.log10",
        "aten.log2",
        "aten.log1p",
        "aten.reciprocal",
        "aten.rsqrt",
        "aten.pow",
        "aten.softplus",
        "aten.acos",
        "aten.asin",
        "aten.cosh",
        "aten.sinh",
        "aten.tan",
        "aten.erfinv",
        "aten.cdist",
        "aten.dist",
        "aten.renorm",
        "aten.logsumexp",
        "aten.cosine_similarity",
    }
)
FLOAT32_OUT = frozenset(
    {"aten.sum", "aten.prod", "aten.cumsum", "aten.cumprod", "aten.linalg_vector_norm", "aten.linalg_matrix_norm"}
)
HALF_TO_FLOAT = frozenset({"aten._softmax", "aten._log_softmax"})  # their third argument: write fp32
CAST_OP = "autocast._to_copy"  # the op name of autocast's casts in a trace (a model's own casts keep aten's)


class AutocastTracer(Tracer):
    """``Tracer`` under autocast's policy to ``lower`` (fp16 or bf16); the casts are recorded as ``aten._to_copy``
    events of the op's layer."""

    lower = torch.float16
    casting = False  # True while _LowerFunctions casts a function's argument

    def __enter__(self):
        self._functions = _LowerFunctions(self)
        self._functions.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._functions.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.casting and func is torch.ops.aten._to_copy.default:
            return self._recorded_cast(func, args, kwargs)
        name = str(func.overloadpacket)
        floats = _floats((args, kwargs)) if not self.suspended else set()
        if self.lower in floats:
            if name in FLOAT32:
                args, kwargs = self._cast_all((args, kwargs))
            elif name in FLOAT32_OUT:
                kwargs = {**kwargs, "dtype": torch.float32}
            elif name in HALF_TO_FLOAT and args[0].dtype == self.lower:
                args = (*args[:2], True, *args[3:])
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _cast_all(self, tree):
        """Every lower-dtype tensor of ``tree`` cast to fp32, each cast recorded."""

        def cast(value):
            if isinstance(value, torch.Tensor) and value.dtype == self.lower:
                return self._recorded_cast(torch.ops.aten._to_copy.default, (value,), {"dtype": torch.float32})
            return value

        return pytree.tree_map(cast, tree)

    def _recorded_cast(self, func, args, kwargs):
        """A cast of autocast's, recorded as ``CAST_OP``."""
        out = super().__torch_dispatch__(func, (), args, kwargs)
        if not self.suspended:
            self.events[-1].op = CAST_OP
        return out


class _LowerFunctions(TorchFunctionMode):
    """Casts the fp32 tensors of a ``LOWER`` function to the lower dtype (the casts reach the tracer beneath)."""

    def __init__(self, tracer: AutocastTracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in LOWER:
            args, kwargs = pytree.tree_map(self._cast, (args, kwargs))
        return func(*args, **kwargs)

    def _cast(self, value):
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
            return value
        self.tracer.casting = True
        try:
            return value.to(self.tracer.lower)
        finally:
            self.tracer.casting = False


def _floats(tree) -> set[torch.dtype]:
    """The floating dtypes of an op's tensor arguments."""
    return {t.dtype for t in tensors_of(tree) if t.is_floating_point()}


def autocast_tracer(lower: torch.dtype) -> type[AutocastTracer]:
    """The tracer class of autocast to ``lower``."""
    if lower == torch.float16:
        return AutocastTracer
    return type("AutocastTracerBf16", (AutocastTracer,), {"lower": lower})
