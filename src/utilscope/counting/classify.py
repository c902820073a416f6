"""Op classes: what kind of work a layer is, for summaries and diagnosis."""

from __future__ import annotations

from enum import Enum

from utilscope.counting.formulas import Call, Kind


class OpClass(str, Enum):
    DENSE_CONV = "dense_conv"
    POINTWISE_CONV = "pointwise_conv"
    GROUPED_CONV = "grouped_conv"
    DEPTHWISE_CONV = "depthwise_conv"
    LINEAR = "linear"  # linear layers, matmuls and attention
    NORM = "norm"
    ACTIVATION = "activation"  # activations and softmax
    POOL = "pool"  # pooling and reductions
    ELEMENTWISE = "elementwise"
    SE_GATE = "se_gate"  # everything inside a squeeze-excite block
    OTHER = "other"  # data movement, tensor creation, views, unknown ops


_BY_KIND = {
    Kind.MATMUL: OpClass.LINEAR,
    Kind.ATTENTION: OpClass.LINEAR,
    Kind.NORM: OpClass.NORM,
    Kind.ACTIVATION: OpClass.ACTIVATION,
    Kind.SOFTMAX: OpClass.ACTIVATION,
    Kind.POOL: OpClass.POOL,
    Kind.REDUCE: OpClass.POOL,
    Kind.ELEMENTWISE: OpClass.ELEMENTWISE,
}


def conv_class(input_shape, weight_shape, groups: int) -> OpClass:
    """Depthwise: one group per input channel; grouped: 1 < groups < Cin; pointwise: a 1x1(x1) kernel."""
    if groups > 1 and groups == input_shape[1]:
        return OpClass.DEPTHWISE_CONV
    if groups > 1:
        return OpClass.GROUPED_CONV
    if all(k == 1 for k in weight_shape[2:]):
        return OpClass.POINTWISE_CONV
    return OpClass.DENSE_CONV


def event_class(kind: Kind | None, call: Call) -> OpClass:
    if kind is Kind.CONV:
        return conv_class(call.args[0], call.args[1], int(call.arg(8, "groups", 1)))
    return _BY_KIND.get(kind, OpClass.OTHER)
