"""The layer costs the search spaces count with: closed forms, and equal to the traced count of the layer."""

from __future__ import annotations

import pytest
from torch import nn

import utilscope
from utilscope.nas.costs import conv_cost, linear_cost


def test_conv_cost_closed_form():
    # 3x3 conv 32->64 in 2 groups, stride 2, on 56x56: padding 1 -> out (56 + 2 - 3) // 2 + 1 = 28;
    # flops = 2 * 28 * 28 * 64 * (32 / 2) * 3 * 3 = 14_450_688; params = 64 * 16 * 9 = 9216 weights
    assert conv_cost(56, 32, 64, 3, stride=2, groups=2) == (28, 14_450_688, 9216)
    # + bias (64) + BN scale and shift (2 * 64): 9216 + 64 + 128 = 9408
    assert conv_cost(56, 32, 64, 3, stride=2, groups=2, bias=True, bn=True) == (28, 14_450_688, 9408)
    # 1x1 conv 960->1280 on the pooled 1x1 map: 2 * 1280 * 960 = 2_457_600 flops, 1_228_800 weights
    assert conv_cost(1, 960, 1280, 1) == (1, 2_457_600, 1_228_800)


def test_linear_cost_closed_form():
    # 1280 -> 1000 on one sample: 2 * 1280 * 1000 = 2_560_000 flops; 1280 * 1000 + 1000 = 1_281_000 params
    assert linear_cost(1280, 1000) == (2_560_000, 1_281_000)


@pytest.mark.parametrize(
    ("size", "c_in", "c_out", "kernel", "stride", "groups", "bias", "bn"),
    [(16, 3, 16, 3, 1, 1, False, True), (15, 3, 3, 5, 2, 3, False, True), (1, 3, 4, 1, 1, 1, True, False)],
)  # c_in 3: count feeds RGB images
def test_conv_cost_equals_traced_count(size, c_in, c_out, kernel, stride, groups, bias, bn):
    layers = [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=bias)]
    module = nn.Sequential(*layers, *([nn.BatchNorm2d(c_out)] if bn else []))
    traced = utilscope.count(module.eval(), batch=1, resolution=size)
    out, flops, params = conv_cost(size, c_in, c_out, kernel, stride, groups, bias, bn)
    assert (flops, params) == (traced.total.flops, traced.total.params)
    assert traced.layers[0].output_shapes[0][-1] == out
