"""Cost formulas: pure functions of shapes, and a registry mapping aten ops to them.

Conventions (also in docs/methodology.md):

* ``flops`` = 2 x multiply-accumulates of convolution, matmul (mm/addmm/bmm/baddbmm) and attention. Biases are
  not part of ``flops``: a bias add is 1 ``other_flop`` per output element.
* ``other_flops`` (never folded into ``flops``):
  - elementwise ops and activations (add, mul, relu, sigmoid, hardswish, silu, gelu, ...): 1 per output element;
  - batch norm at inference (running statistics): 2 per element (``x * scale + shift``);
  - layer / group / instance norm: 5 per element for statistics and normalization (mean 1, variance 2,
    ``(x - mean) * rstd`` 2) plus 2 per element for the affine transform when it has one;
  - softmax / log-softmax: 5 per element (max, subtract, exp, sum, divide);
  - pooling with a kernel (max / avg): kernel-volume per output element;
    adaptive pooling and reductions (mean, sum, amax): 1 per input element;
  - attention: the softmax of the score matrix (5 per score) plus the scaling (1 per score).
* ``bytes`` (computed in the tracer from the same shapes): every tensor input read once (weights included),
  every output written once, at the tensors' dtype; a broadcast (stride-0) dimension is read once.
  Views cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from utilscope.registry import Registry

Shape = Sequence[int]


class Kind(str, Enum):
    """What an aten op does, which decides its op class and whether it can fuse into its producer."""

    CONV = "conv"
    MATMUL = "matmul"
    ATTENTION = "attention"
    NORM = "norm"
    ACTIVATION = "activation"
    ELEMENTWISE = "elementwise"
    POOL = "pool"
    REDUCE = "reduce"
    SOFTMAX = "softmax"
    MOVEMENT = "movement"  # copies data (cat, pad, clone, dtype casts): bytes but no flops
    CREATION = "creation"  # makes a new tensor (zeros, arange): writes its output
    VIEW = "view"  # aliases its input: no flops, no bytes


FUSIBLE_KINDS = frozenset({Kind.NORM, Kind.ACTIVATION, Kind.ELEMENTWISE})


def numel(shape: Shape) -> int:
    return math.prod(shape)


# --- pure formulas -------------------------------------------------------------------------------------------


def conv_flops(input_shape: Shape, weight_shape: Shape, output_shape: Shape, transposed: bool = False) -> int:
    """2 x MACs of a convolution. weight = (Cout, Cin/groups, *kernel), or (Cin, Cout/groups, *kernel) if
    transposed. Each output element of a regular conv is a dot product of length Cin/groups x kernel volume;
    in a transposed conv each *input* element is scattered through Cout/groups x kernel volume weights."""
    per_element_macs = numel(weight_shape[1:])
    return 2 * (numel(input_shape) if transposed else numel(output_shape)) * per_element_macs


def conv_output_size(size, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1):
    """One spatial side of a convolution's output, as PyTorch computes it:
    (size + 2 x padding - dilation x (kernel - 1) - 1) // stride + 1. ``size`` may be a numpy array of sides."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def matmul_flops(a_shape: Shape, b_shape: Shape) -> int:
    """2 x MACs of (..., M, K) @ (..., K, N), batch dims broadcast: 2 x batch x M x K x N."""
    *batch_a, m, k = a_shape
    *batch_b, k2, n = b_shape
    if k != k2:
        raise ValueError(f"matmul inner dimensions differ: {tuple(a_shape)} @ {tuple(b_shape)}")
    try:
        batch = numel(torch.broadcast_shapes(tuple(batch_a), tuple(batch_b)))
    except RuntimeError as exc:
        raise ValueError(f"matmul batch dimensions do not broadcast: {tuple(a_shape)} @ {tuple(b_shape)}") from exc
    return 2 * batch * m * k * n


def attention_flops(query_shape: Shape, key_shape: Shape, value_shape: Shape) -> int:
    """2 x MACs of softmax(Q K^T) V: Q (..., Lq, E), K (..., Lk, E), V (..., Lk, Ev).
    Scores: Lq x Lk x E MACs; weighted sum: Lq x Lk x Ev MACs; per batch x heads."""
    *batch, lq, e = query_shape
    lk, ev = key_shape[-2], value_shape[-1]
    return 2 * numel(batch) * lq * lk * (e + ev)


def attention_other_flops(query_shape: Shape, key_shape: Shape, masked: bool = False) -> int:
    """Softmax over the score matrix (5 per score) + scaling (1 per score) + the mask add if any."""
    scores = numel(query_shape[:-1]) * key_shape[-2]
    return scores * (6 + int(masked))


def elementwise_other_flops(output_shape: Shape, per_element: int = 1) -> int:
    """Elementwise ops and activations: ``per_element`` FLOPs per output element (1 by convention)."""
    return per_element * numel(output_shape)


def batch_norm_other_flops(output_shape: Shape) -> int:
    """Inference batch norm is y = x * scale + shift: 2 per element."""
    return 2 * numel(output_shape)


def stats_norm_other_flops(output_shape: Shape, affine: bool) -> int:
    """Layer/group/instance norm: statistics and normalization (5 per element) + affine (2 per element)."""
    return (5 + 2 * int(affine)) * numel(output_shape)


def softmax_other_flops(output_shape: Shape) -> int:
    """max, subtract, exp, sum, divide: 5 per element."""
    return 5 * numel(output_shape)


def pool_other_flops(output_shape: Shape, kernel_size: Shape) -> int:
    """Max/avg pooling: one compare/add per kernel element per output element."""
    return numel(output_shape) * numel(kernel_size)


def reduce_other_flops(input_shape: Shape) -> int:
    """Adaptive pooling and reductions (mean, sum, amax): 1 per input element."""
    return numel(input_shape)


# --- the registry --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """What a registry entry sees of one aten call: tensors are replaced by their shapes (``torch.Size``)."""

    args: tuple
    kwargs: dict
    outputs: tuple[Shape, ...]

    def arg(self, index: int, name: str, default=None):
        if len(self.args) > index:
            return self.args[index]
        return self.kwargs.get(name, default)


@dataclass(frozen=True)
class Cost:
    flops: int = 0
    other_flops: int = 0


@dataclass(frozen=True)
class Rule:
    kind: Kind
    cost: Callable[[Call], Cost]
    overwrites_first: bool = False  # copy_/fill_/zero_: the first argument is written, not read
    first_output_only: bool = False  # norms' saved statistics, max-pool indices: not needed at inference


REGISTRY: Registry[Rule] = Registry("op")


def register(kind: Kind, names: str, overwrites_first: bool = False, first_output_only: bool = False):
    """Register one cost function for whitespace-separated aten op names (``aten.convolution``)."""

    def decorate(cost: Callable[[Call], Cost]):
        REGISTRY.add_all(names.split(), Rule(kind, cost, overwrites_first, first_output_only))
        return cost

    return decorate


def lookup(op_name: str) -> Rule | None:
    return REGISTRY.get(op_name, None)


def _free(_: Call) -> Cost:
    return Cost()


def _per_output(call: Call) -> Cost:
    return Cost(other_flops=elementwise_other_flops(call.outputs[0]))


@register(Kind.CONV, "aten.convolution aten._convolution")
def _conv(call: Call) -> Cost:
    x, w, bias = call.args[0], call.args[1], call.args[2]
    transposed = bool(call.arg(6, "transposed", False))
    bias_flops = numel(call.outputs[0]) if bias is not None else 0
    return Cost(conv_flops(x, w, call.outputs[0], transposed), bias_flops)


@register(Kind.MATMUL, "aten.mm aten.bmm aten.matmul")
def _mm(call: Call) -> Cost:
    return Cost(matmul_flops(call.args[0], call.args[1]))


@register(Kind.MATMUL, "aten.addmm aten.baddbmm")
def _addmm(call: Call) -> Cost:
    return Cost(matmul_flops(call.args[1], call.args[2]), numel(call.outputs[0]))


@register(
    Kind.ATTENTION,
    "aten.scaled_dot_product_attention aten._scaled_dot_product_attention_math "
    "aten._scaled_dot_product_flash_attention aten._scaled_dot_product_flash_attention_for_cpu "
    "aten._scaled_dot_product_efficient_attention aten._scaled_dot_product_cudnn_attention",
    first_output_only=True,  # logsumexp and RNG state are for the backward pass
)
def _sdpa(call: Call) -> Cost:
    q, k, v = call.args[:3]
    masked = any(isinstance(a, torch.Size) for a in (*call.args[3:], *call.kwargs.values()))
    return Cost(attention_flops(q, k, v), attention_other_flops(q, k, masked))


@register(
    Kind.NORM,
    "aten._native_batch_norm_legit_no_training aten.native_batch_norm aten._native_batch_norm_legit "
    "aten.cudnn_batch_norm aten.miopen_batch_norm aten.batch_norm aten._batch_norm_impl_index",
    first_output_only=True,
)
def _batch_norm(call: Call) -> Cost:
    """Running statistics: 2 per element. Statistics of the input itself (instance norm, which PyTorch runs as a
    batch norm in training mode): computed like a layer norm."""
    computes_stats = next((a for a in call.args[3:] if isinstance(a, bool)), False)
    if computes_stats:
        return Cost(other_flops=stats_norm_other_flops(call.args[0], affine=call.args[1] is not None))
    return Cost(other_flops=batch_norm_other_flops(call.args[0]))


@register(Kind.NORM, "aten.native_layer_norm aten.rms_norm aten._fused_rms_norm", first_output_only=True)
def _layer_norm(call: Call) -> Cost:
    """(input, normalized_shape, weight, ...)"""
    weight = call.arg(2, "weight")
    return Cost(other_flops=stats_norm_other_flops(call.args[0], affine=weight is not None))


@register(Kind.NORM, "aten.native_group_norm", first_output_only=True)
def _group_norm(call: Call) -> Cost:
    """(input, weight, bias, N, C, HxW, group, eps)"""
    return Cost(other_flops=stats_norm_other_flops(call.args[0], affine=call.args[1] is not None))


_ACTIVATIONS = (
    "relu relu_ relu6 hardtanh hardtanh_ sigmoid sigmoid_ hardsigmoid hardsigmoid_ hardswish hardswish_ "
    "silu silu_ gelu gelu_ tanh tanh_ leaky_relu leaky_relu_ elu elu_ selu mish mish_ softplus prelu "
    "_prelu_kernel threshold threshold_ clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ log_sigmoid_forward"
)
register(Kind.ACTIVATION, " ".join(f"aten.{n}" for n in _ACTIVATIONS.split()))(_per_output)

_ELEMENTWISE = (
    "add add_ sub sub_ rsub mul mul_ div div_ neg abs exp exp_ log sqrt rsqrt pow pow_ reciprocal erf erf_ "
    "maximum minimum where masked_fill masked_fill_ floor ceil round sign sin cos lerp addcmul addcdiv "
    "eq ne lt le gt ge logical_and logical_or logical_not bitwise_and bitwise_not remainder fmod floor_divide"
)
register(Kind.ELEMENTWISE, " ".join(f"aten.{n}" for n in _ELEMENTWISE.split()))(_per_output)


@register(Kind.SOFTMAX, "aten._softmax aten._log_softmax aten.softmax aten.log_softmax aten._safe_softmax")
def _softmax(call: Call) -> Cost:
    return Cost(other_flops=softmax_other_flops(call.outputs[0]))


@register(
    Kind.POOL,
    "aten.max_pool2d_with_indices aten.max_pool2d aten.max_pool3d_with_indices aten.avg_pool2d "
    "aten.avg_pool3d aten.max_pool1d aten.avg_pool1d",
    first_output_only=True,
)
def _pool(call: Call) -> Cost:
    kernel = call.arg(1, "kernel_size")
    kernel = (kernel,) if isinstance(kernel, int) else tuple(kernel)
    spatial_dims = len(call.args[0]) - 2
    if len(kernel) == 1 and spatial_dims > 1:
        kernel = kernel * spatial_dims
    return Cost(other_flops=pool_other_flops(call.outputs[0], kernel))


@register(
    Kind.POOL,
    "aten._adaptive_avg_pool2d aten.adaptive_avg_pool2d aten._adaptive_avg_pool3d aten.adaptive_max_pool2d "
    "aten.adaptive_avg_pool1d",
    first_output_only=True,
)
def _adaptive_pool(call: Call) -> Cost:
    return Cost(other_flops=reduce_other_flops(call.args[0]))


@register(Kind.REDUCE, "aten.mean aten.sum aten.amax aten.amin aten.max aten.min aten.var aten.std aten.prod aten.norm")
def _reduce(call: Call) -> Cost:
    return Cost(other_flops=reduce_other_flops(call.args[0]))


@register(Kind.REDUCE, "aten.var_mean aten.std_mean")
def _var_mean(call: Call) -> Cost:
    """mean (1 per element) and the squared deviations (2 per element)."""
    return Cost(other_flops=3 * reduce_other_flops(call.args[0]))


@register(Kind.REDUCE, "aten.linalg_vector_norm")
def _vector_norm(call: Call) -> Cost:
    """square and add: 2 per input element."""
    return Cost(other_flops=2 * reduce_other_flops(call.args[0]))


register(
    Kind.MOVEMENT,
    " ".join(
        f"aten.{n}"
        for n in (
            "cat stack clone _to_copy contiguous constant_pad_nd reflection_pad2d replication_pad2d roll index "
            "_unsafe_index index_select gather repeat flip slice_scatter select_scatter lift_fresh_copy tril triu "
            "pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle upsample_nearest2d "
            "index_put index_put_ scatter scatter_"
        ).split()
    ),
)(_free)
register(Kind.MOVEMENT, "aten.copy_ aten.fill_ aten.zero_", overwrites_first=True)(_free)
register(
    Kind.CREATION,
    " ".join(
        f"aten.{n}"
        for n in (
            "empty zeros ones full arange new_empty new_zeros new_ones new_full empty_like zeros_like ones_like "
            "full_like scalar_tensor linspace empty_strided eye rand randn rand_like randn_like new_empty_strided"
        ).split()
    ),
)(_free)
register(
    Kind.VIEW,
    "aten.lift_fresh aten.detach aten.alias aten._unsafe_view aten.as_strided_ aten._assert_tensor_metadata "
    "aten._assert_async",
)(_free)


@register(Kind.MOVEMENT, "aten.upsample_bilinear2d aten.upsample_bicubic2d aten._upsample_bilinear2d_aa")
def _interpolate(call: Call) -> Cost:
    """Interpolating resize: 1 per output element by the elementwise convention."""
    return _per_output(call)
