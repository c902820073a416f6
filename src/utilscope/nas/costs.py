"""Analytic costs of the layers search spaces are made of, from the counting engine's formulas.

The spaces count their networks without building them (``complexity``, ``layer_cost``); these helpers make sure
they count a convolution and a linear layer exactly as ``utilscope.count`` does when it traces the built network.
"""

from __future__ import annotations

import functools

from utilscope.counting.formulas import conv_flops, conv_output_size, matmul_flops, numel


def conv_cost(
    size: int,
    c_in: int,
    c_out: int,
    kernel: int,
    stride: int = 1,
    groups: int = 1,
    bias: bool = False,
    bn: bool = False,
) -> tuple[int, int, int]:
    """(output size, flops, params) of a square conv with padding kernel // 2 on a ``size`` x ``size`` input at
    batch 1, optionally followed by BN (2 params per channel; running statistics are buffers).
    flops = 2 x out_size^2 x c_out x (c_in / groups) x kernel^2 (``counting.formulas.conv_flops``)."""
    out = conv_output_size(size, kernel, stride, padding=kernel // 2)
    weight = (c_out, c_in // groups, kernel, kernel)
    flops = conv_flops((1, c_in, size, size), weight, (1, c_out, out, out))
    return out, flops, numel(weight) + (c_out if bias else 0) + (2 * c_out if bn else 0)


@functools.lru_cache(maxsize=256)  # matmul_flops broadcasts batch shapes with torch: slow for a network's classifier
def linear_cost(in_features: int, out_features: int) -> tuple[int, int]:
    """(flops, params) of a linear layer with bias on one sample: flops = 2 x in x out (the bias add is not a flop,
    as in ``counting.formulas``); params = in x out weights + out biases."""
    flops = matmul_flops((1, in_features), (in_features, out_features))
    return flops, in_features * out_features + out_features
