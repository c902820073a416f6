"""Closed-form checks of the cost formulas, the registry and the meta shortcuts.

Each expected value has its arithmetic in a comment (the style of PyTorch's ``test_flop_counter.py``). Every
formula is checked twice: as a pure function of shapes, and through ``utilscope.count`` on a tiny module.
Unless stated, ``count`` runs at batch 2, resolution 8: the input is (2, 3, 8, 8), 384 elements.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from counting_helpers import Lambda, count, count_on_cpu, layer
from torch import nn

from utilscope.counting import formulas, tracer
from utilscope.counting.formulas import Call, Cost, Kind, Rule
from utilscope.counting.tracer import META_SHORTCUTS

aten = torch.ops.aten
S = torch.Size


# --- convolution: pure formula -------------------------------------------------------------------------------


def test_conv_flops_dense_3x3():
    # x (1, 3, 8, 8), w (16, 3, 3, 3), padding 1 -> y (1, 16, 8, 8)
    # 2 * (16*8*8 = 1024 outputs) * (3*3*3 = 27 MACs each) = 55296
    assert formulas.conv_flops((1, 3, 8, 8), (16, 3, 3, 3), (1, 16, 8, 8)) == 55296


def test_conv_flops_strided_uses_output_shape():
    # stride 2, padding 1 -> y (1, 16, 4, 4): 2 * (16*4*4 = 256) * 27 = 13824
    assert formulas.conv_flops((1, 3, 8, 8), (16, 3, 3, 3), (1, 16, 4, 4)) == 13824


def test_conv_flops_grouped():
    # groups 4: w (16, 8/4 = 2, 3, 3); y (1, 16, 8, 8): 2 * 1024 * (2*3*3 = 18) = 36864
    assert formulas.conv_flops((1, 8, 8, 8), (16, 2, 3, 3), (1, 16, 8, 8)) == 36864


def test_conv_flops_depthwise():
    # groups = Cin = 8: w (8, 1, 3, 3); y (1, 8, 8, 8): 2 * 512 * 9 = 9216
    assert formulas.conv_flops((1, 8, 8, 8), (8, 1, 3, 3), (1, 8, 8, 8)) == 9216


def test_conv_flops_pointwise():
    # w (16, 8, 1, 1); y (2, 16, 8, 8): 2 * 2048 * 8 = 32768
    assert formulas.conv_flops((2, 8, 8, 8), (16, 8, 1, 1), (2, 16, 8, 8)) == 32768


def test_conv_flops_conv1d_and_conv3d():
    # conv1d: w (4, 3, 3); y (2, 4, 62): 2 * 496 * 9 = 8928
    assert formulas.conv_flops((2, 3, 64), (4, 3, 3), (2, 4, 62)) == 8928
    # conv3d: w (4, 3, 1, 3, 3); y (2, 4, 1, 6, 6): 2 * 288 * 27 = 15552
    assert formulas.conv_flops((2, 3, 1, 8, 8), (4, 3, 1, 3, 3), (2, 4, 1, 6, 6)) == 15552


def test_conv_flops_transposed_scatters_each_input():
    # transposed: w (Cin 8, Cout 4, 2, 2); each of the 2*8*8*8 = 1024 inputs meets 4*2*2 = 16 weights:
    # 2 * 1024 * 16 = 32768 (y (2, 4, 16, 16) is not used)
    assert formulas.conv_flops((2, 8, 8, 8), (8, 4, 2, 2), (2, 4, 16, 16), transposed=True) == 32768


def test_conv_output_size():
    # (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    assert formulas.conv_output_size(224, 3, stride=2, padding=1) == 112  # (224 + 2 - 2 - 1) // 2 + 1
    assert formulas.conv_output_size(13, 7, stride=2, padding=3) == 7  # (13 + 6 - 6 - 1) // 2 + 1
    assert formulas.conv_output_size(8, 3) == 6  # (8 - 2 - 1) // 1 + 1
    assert formulas.conv_output_size(8, 3, padding=2, dilation=2) == 8  # (8 + 4 - 4 - 1) // 1 + 1
    sizes = formulas.conv_output_size(np.array([224, 7]), 3, stride=2, padding=1)  # elementwise on arrays
    assert sizes.tolist() == [112, 4]  # (7 + 2 - 2 - 1) // 2 + 1 = 4


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "dilation"), [(8, 3, 1, 1, 1), (9, 3, 2, 1, 1), (10, 5, 3, 0, 2)]
)
def test_conv_output_size_matches_torch(size, kernel, stride, padding, dilation):
    conv = nn.Conv2d(1, 1, kernel, stride, padding, dilation)
    out = conv(torch.zeros(1, 1, size, size, device="meta")).shape[-1]
    assert formulas.conv_output_size(size, kernel, stride, padding, dilation) == out


def conv_call(x, w, bias, y, transposed=False, groups=1) -> Call:
    args = (S(x), S(w), None if bias is None else S(bias), [1, 1], [0, 0], [1, 1], transposed, [0, 0], groups)
    return Call(args, {}, (S(y),))


def test_conv_rule_bias_is_one_other_flop_per_output():
    rule = formulas.REGISTRY["aten.convolution"]
    # flops 2 * (8*6*6 = 288) * 27 = 15552; bias: 1 per output element = 288
    assert rule.cost(conv_call((1, 3, 8, 8), (8, 3, 3, 3), (8,), (1, 8, 6, 6))) == Cost(15552, 288)
    assert rule.cost(conv_call((1, 3, 8, 8), (8, 3, 3, 3), None, (1, 8, 6, 6))) == Cost(15552, 0)


def test_conv_rule_reads_transposed_flag():
    rule = formulas.REGISTRY["aten.convolution"]
    call = conv_call((2, 8, 8, 8), (8, 4, 2, 2), (4,), (2, 4, 16, 16), transposed=True)
    # 2 * 1024 inputs * 16 = 32768; bias 2*4*16*16 = 2048
    assert rule.cost(call) == Cost(32768, 2048)


# --- convolution: through count ------------------------------------------------------------------------------

# The stem Conv2d(3, 8, 1) makes the tested conv's input (2, 8, 8, 8) = 1024 elements, so groups can be 4 or 8.
CONV_CASES = {
    # name: (conv, flops, other_flops, op_class)
    # y (2, 16, 6, 6) = 1152; 2 * 1152 * (8*3*3 = 72) = 165888; bias 1152
    "dense_3x3": (nn.Conv2d(8, 16, 3), 165888, 1152, "dense_conv"),
    # y (2, 16, 8, 8) = 2048; 2 * 2048 * 72 = 294912; no bias
    "padded_no_bias": (nn.Conv2d(8, 16, 3, padding=1, bias=False), 294912, 0, "dense_conv"),
    # y (2, 16, 4, 4) = 512: (8 + 2 - 3) // 2 + 1 = 4; 2 * 512 * 72 = 73728; bias 512
    "strided": (nn.Conv2d(8, 16, 3, stride=2, padding=1), 73728, 512, "dense_conv"),
    # dilation 3: effective kernel 7, y (2, 16, 2, 2) = 128; 2 * 128 * 72 = 18432
    "dilated": (nn.Conv2d(8, 16, 3, dilation=3, bias=False), 18432, 0, "dense_conv"),
    # groups 4: w (16, 2, 3, 3); y 2048; 2 * 2048 * 18 = 73728; bias 2048
    "grouped": (nn.Conv2d(8, 16, 3, padding=1, groups=4), 73728, 2048, "grouped_conv"),
    # groups = Cin = 8: w (8, 1, 3, 3); y (2, 8, 8, 8) = 1024; 2 * 1024 * 9 = 18432
    "depthwise": (nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), 18432, 0, "depthwise_conv"),
    # depthwise with channel multiplier 2: w (16, 1, 3, 3); y 2048; 2 * 2048 * 9 = 36864; bias 2048
    "depthwise_x2": (nn.Conv2d(8, 16, 3, padding=1, groups=8), 36864, 2048, "depthwise_conv"),
    # w (16, 8, 1, 1); y 2048; 2 * 2048 * 8 = 32768; bias 2048
    "pointwise": (nn.Conv2d(8, 16, 1), 32768, 2048, "pointwise_conv"),
    "pointwise_no_bias": (nn.Conv2d(8, 16, 1, bias=False), 32768, 0, "pointwise_conv"),
    # transposed, w (8, 4, 2, 2); y (2, 4, 16, 16) = 2048; 2 * (1024 inputs) * 16 = 32768; bias 2048
    "transposed": (nn.ConvTranspose2d(8, 4, 2, stride=2), 32768, 2048, "dense_conv"),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_count_conv(case):
    conv, flops, other_flops, op_class = CONV_CASES[case]
    result = count(nn.Sequential(nn.Conv2d(3, 8, 1, bias=False), conv))
    tested = layer(result, "1")
    assert (tested.flops, tested.other_flops, tested.op_class) == (flops, other_flops, op_class)
    assert tested.ops == {"aten.convolution": 1}
    # the stem: y (2, 8, 8, 8) = 1024; 2 * 1024 * 3 = 6144
    assert result.total.flops == flops + 6144


class Conv1dAnd3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 4, 3)
        self.c3 = nn.Conv3d(3, 4, (1, 3, 3), bias=False)

    def forward(self, x):
        return self.c1(x.flatten(2)), self.c3(x.unsqueeze(2))


def test_count_conv1d_and_conv3d():
    result = count(Conv1dAnd3d())
    # conv1d: x (2, 3, 64) -> y (2, 4, 62) = 496; 2 * 496 * 9 = 8928; bias 496
    assert (layer(result, "c1").flops, layer(result, "c1").other_flops) == (8928, 496)
    # conv3d: x (2, 3, 1, 8, 8) -> y (2, 4, 1, 6, 6) = 288; 2 * 288 * 27 = 15552
    assert (layer(result, "c3").flops, layer(result, "c3").other_flops) == (15552, 0)
    assert {layer(result, n).op_class for n in ("c1", "c3")} == {"dense_conv"}


# --- matmul, linear, attention -------------------------------------------------------------------------------


def test_matmul_flops():
    # (4, 8) @ (8, 3): 2 * 4 * 8 * 3 = 192
    assert formulas.matmul_flops((4, 8), (8, 3)) == 192
    # bmm (5, 4, 8) @ (5, 8, 3): 2 * 5 * 4 * 8 * 3 = 960
    assert formulas.matmul_flops((5, 4, 8), (5, 8, 3)) == 960
    # (2, 3, 4, 8) @ (8, 3): batch 2*3 = 6; 2 * 6 * 4 * 8 * 3 = 1152
    assert formulas.matmul_flops((2, 3, 4, 8), (8, 3)) == 1152


def test_matmul_flops_rejects_mismatched_inner_dims():
    with pytest.raises(ValueError, match="inner dimensions"):
        formulas.matmul_flops((4, 8), (7, 3))


def test_matmul_flops_broadcasts_batch_dims():
    # batch dims (1,) and (5,) broadcast to (5,): 2 * 5 * 4 * 8 * 3 = 960
    assert formulas.matmul_flops((1, 4, 8), (5, 8, 3)) == 960
    # (2, 1) and (3,) broadcast to (2, 3): 2 * 6 * 4 * 8 * 3 = 1152
    assert formulas.matmul_flops((2, 1, 4, 8), (3, 8, 3)) == 1152


def test_addmm_rule_counts_bias_as_other_flops():
    call = Call((S((3,)), S((4, 8)), S((8, 3))), {}, (S((4, 3)),))
    # 2 * 4 * 8 * 3 = 192; bias add 4 * 3 = 12
    assert formulas.REGISTRY["aten.addmm"].cost(call) == Cost(192, 12)


def test_attention_flops():
    # Q, K, V (2, 3, 8, 8): 2 * B2 * H3 * Lq8 * Lk8 * (E8 + Ev8) = 12288
    assert formulas.attention_flops((2, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8)) == 12288
    # Lq 4, Lk 16, E 8, Ev 2: 2 * 2 * 3 * 4 * 16 * (8 + 2) = 7680
    assert formulas.attention_flops((2, 3, 4, 8), (2, 3, 16, 8), (2, 3, 16, 2)) == 7680


def test_attention_other_flops():
    # scores 2*3*4*16 = 384: softmax 5 + scale 1 = 6 per score -> 2304; with a mask 7 per score -> 2688
    assert formulas.attention_other_flops((2, 3, 4, 8), (2, 3, 16, 8)) == 2304
    assert formulas.attention_other_flops((2, 3, 4, 8), (2, 3, 16, 8), masked=True) == 2688


def test_sdpa_rule_detects_mask_argument():
    rule = formulas.REGISTRY["aten._scaled_dot_product_flash_attention_for_cpu"]
    q = S((2, 3, 8, 8))
    outputs = (q, S((2, 3, 8)))
    # flops 2 * 2 * 3 * 8 * 8 * 16 = 12288; scores 2*3*8*8 = 384: 6 per score 2304, masked 7 per score 2688
    assert rule.cost(Call((q, q, q, 0.0, False), {}, outputs)) == Cost(12288, 2304)
    assert rule.cost(Call((q, q, q, 0.0, False), {"attn_mask": S((8, 8))}, outputs)) == Cost(12288, 2688)


def test_count_linear_2d():
    result = count(nn.Sequential(nn.Flatten(), nn.Linear(192, 10)))
    fc = layer(result, "1")
    # x (2, 3*8*8 = 192): 2 * 2 * 192 * 10 = 7680; bias 2 * 10 = 20
    assert (fc.flops, fc.other_flops, fc.op_class) == (7680, 20, "linear")


class Linear3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(x.flatten(1, 2))  # (2, 24, 8)


def test_count_linear_3d():
    fc = layer(count(Linear3d()), "fc")
    # x (2, 24, 8): 48 rows; 2 * 48 * 8 * 5 = 3840; bias 48 * 5 = 240
    assert (fc.flops, fc.other_flops, fc.op_class) == (3840, 240, "linear")


def test_count_matmul_and_bmm():
    matmul = count(Lambda(lambda x: torch.matmul(x, x.transpose(-1, -2))))
    bmm = count(Lambda(lambda x: torch.bmm(x.flatten(0, 1), x.flatten(0, 1).transpose(1, 2))))
    # (2, 3, 8, 8) @ (2, 3, 8, 8): batch 6; 2 * 6 * 8 * 8 * 8 = 6144
    assert matmul.total.flops == 6144
    assert bmm.total.flops == 6144
    assert layer(matmul, "Lambda").op_class == layer(bmm, "Lambda").op_class == "linear"


class MatmulWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(8, 5))

    def forward(self, x):
        return torch.matmul(x, self.w)


def test_count_matmul_broadcast_weight():
    # (2, 3, 8, 8) @ (8, 5): 48 rows; 2 * 48 * 8 * 5 = 3840
    assert count(MatmulWeight()).total.flops == 3840


SDPA_CASES = {
    # name: (module, flops, other_flops)
    # Q = K = V = x (2, 3, 8, 8): 2 * B2 * H3 * Lq8 * Lk8 * (E8 + Ev8) = 12288; scores 2*3*8*8 = 384, 6 each = 2304
    "heads": (Lambda(lambda x: F.scaled_dot_product_attention(x, x, x)), 12288, 2304),
    # Q = K = V = x.flatten(2) (2, 3, 64): 2 * B2 * Lq3 * Lk3 * (E64 + Ev64) = 4608; scores 2*3*3 = 18, 6 each = 108
    "tokens": (Lambda(lambda x: F.scaled_dot_product_attention(*[x.flatten(2)] * 3)), 4608, 108),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_count_sdpa(case):
    module, flops, other_flops = SDPA_CASES[case]
    result = count(module)
    assert (result.total.flops, result.total.other_flops) == (flops, other_flops)
    assert layer(result, "Lambda").op_class == "linear"


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_count_sdpa_on_cpu(case, monkeypatch):
    module, flops, other_flops = SDPA_CASES[case]
    result = count_on_cpu(module, monkeypatch)
    assert result.traced_on == "cpu"
    assert (result.total.flops, result.total.other_flops) == (flops, other_flops)
    assert layer(result, "Lambda").op_class == "linear"


def test_count_sdpa_value_dim_differs():
    result = count(Lambda(lambda x: F.scaled_dot_product_attention(x, x, x[..., :4])))
    # E 8, Ev 4: 2 * 2 * 3 * 8 * 8 * (8 + 4) = 9216 (whichever kernel runs: fused or the math path's two bmm)
    assert result.total.flops == 9216


# --- pooling, norms, elementwise, softmax --------------------------------------------------------------------


def test_pool_and_reduce_formulas():
    # max pool 3x3 -> y (2, 3, 3, 3) = 54: 54 * 9 = 486
    assert formulas.pool_other_flops((2, 3, 3, 3), (3, 3)) == 486
    # adaptive pooling / reductions: 1 per input element, 2*3*8*8 = 384
    assert formulas.reduce_other_flops((2, 3, 8, 8)) == 384


def test_pool_rule_expands_int_kernel():
    rule = formulas.REGISTRY["aten.max_pool2d_with_indices"]
    out = (S((2, 3, 3, 3)), S((2, 3, 3, 3)))
    # kernel 3 on a 2-D input means 3x3: 54 outputs * 9 = 486, whether given as 3, [3] or [3, 3]
    for kernel in (3, [3], [3, 3]):
        assert rule.cost(Call((S((2, 3, 8, 8)), kernel, [2, 2]), {}, out)) == Cost(0, 486)


POOL_CASES = {
    # (8 - 3) // 2 + 1 = 3 -> y (2, 3, 3, 3) = 54; 54 * 9 = 486
    "max_k3_s2": (nn.MaxPool2d(3, 2), 486),
    # (8 + 2 - 3) // 2 + 1 = 4 -> y (2, 3, 4, 4) = 96; 96 * 9 = 864
    "max_k3_s2_p1": (nn.MaxPool2d(3, 2, padding=1), 864),
    # y (2, 3, 4, 4) = 96; 96 * 2*2 = 384
    "avg_k2": (nn.AvgPool2d(2), 384),
    # y (2, 3, 2, 2) = 24; 24 * 3*3 = 216
    "avg_k3_s3": (nn.AvgPool2d(3, 3), 216),
    # adaptive to 1x1: 1 per input element, 384
    "adaptive_1x1": (nn.AdaptiveAvgPool2d(1), 384),
    # adaptive to 2x2: 1 per input element, 384
    "adaptive_2x2": (nn.AdaptiveAvgPool2d(2), 384),
}


@pytest.mark.parametrize("case", list(POOL_CASES))
def test_count_pool(case):
    module, other_flops = POOL_CASES[case]
    pool = layer(count(nn.Sequential(module)), "0")
    assert (pool.flops, pool.other_flops, pool.op_class) == (0, other_flops, "pool")


def test_norm_formulas():
    # batch norm: 2 per element; 2*3*8*8 = 384 -> 768
    assert formulas.batch_norm_other_flops((2, 3, 8, 8)) == 768
    # layer / group norm: 5 per element (1920), + 2 with an affine transform (7 * 384 = 2688)
    assert formulas.stats_norm_other_flops((2, 3, 8, 8), affine=False) == 1920
    assert formulas.stats_norm_other_flops((2, 3, 8, 8), affine=True) == 2688


def test_elementwise_and_softmax_formulas():
    # 1 per output element (384), or per_element each
    assert formulas.elementwise_other_flops((2, 3, 8, 8)) == 384
    assert formulas.elementwise_other_flops((2, 3, 8, 8), per_element=3) == 1152
    # softmax: 5 per element
    assert formulas.softmax_other_flops((2, 3, 8, 8)) == 1920


def _norm_cost(op: str, *args) -> Cost:
    x = S((2, 3, 8, 8))
    return formulas.REGISTRY[op].cost(Call((x, *args), {}, (x,)))


def test_batch_norm_rule_counts_input_statistics_like_layer_norm():
    c = S((3,))
    # running statistics (inference): 2 per element, 2 * 384 = 768
    assert _norm_cost("aten._native_batch_norm_legit_no_training", c, c, c, c, 0.1, 1e-5) == Cost(0, 768)
    assert _norm_cost("aten.native_batch_norm", c, c, c, c, False, 0.1, 1e-5) == Cost(0, 768)
    # training=True computes the input's statistics (instance norm): 5 + 2 affine = 7 * 384 = 2688
    assert _norm_cost("aten.native_batch_norm", c, c, None, None, True, 0.1, 1e-5) == Cost(0, 2688)
    assert _norm_cost("aten._native_batch_norm_legit", c, c, c, c, True, 0.1, 1e-5) == Cost(0, 2688)
    # no running statistics at all (the no_stats overload: input, weight, bias, training, momentum, eps): 2688
    assert _norm_cost("aten._native_batch_norm_legit", c, c, True, 0.1, 1e-5) == Cost(0, 2688)
    # no weight: 5 * 384 = 1920
    assert _norm_cost("aten.native_batch_norm", None, None, None, None, True, 0.1, 1e-5) == Cost(0, 1920)


def test_group_and_layer_norm_rules_read_their_own_weight_argument():
    c, w = S((3,)), S((8,))
    # group norm (input, weight, bias, N, C, HxW, group, eps): weight only 7 * 384 = 2688; bias only 5 * 384 = 1920
    assert _norm_cost("aten.native_group_norm", c, None, 2, 3, 64, 1, 1e-5) == Cost(0, 2688)
    assert _norm_cost("aten.native_group_norm", None, c, 2, 3, 64, 1, 1e-5) == Cost(0, 1920)
    # layer norm (input, normalized_shape, weight, bias, eps): 2688 and 1920 likewise
    assert _norm_cost("aten.native_layer_norm", [8], w, None, 1e-5) == Cost(0, 2688)
    assert _norm_cost("aten.native_layer_norm", [8], None, w, 1e-5) == Cost(0, 1920)


NORM_CASES = {
    # 2 per element: 2 * 384 = 768
    "batch_norm": (nn.BatchNorm2d(3), 768),
    # 5 + 2 per element: 7 * 384 = 2688
    "layer_norm": (nn.LayerNorm(8), 2688),
    # 5 per element: 5 * 384 = 1920
    "layer_norm_no_affine": (nn.LayerNorm(8, elementwise_affine=False), 1920),
    # 7 * 384 = 2688
    "group_norm": (nn.GroupNorm(1, 3), 2688),
    # 5 * 384 = 1920
    "group_norm_no_affine": (nn.GroupNorm(3, 3, affine=False), 1920),
}


@pytest.mark.parametrize("case", list(NORM_CASES))
def test_count_norm(case):
    module, other_flops = NORM_CASES[case]
    norm = layer(count(nn.Sequential(module)), "0")
    assert (norm.flops, norm.other_flops, norm.op_class) == (0, other_flops, "norm")


@pytest.mark.parametrize(
    ("affine", "other_flops"),
    [(False, 1920), (True, 2688)],  # 5 * 384 = 1920; 7 * 384 = 2688
)
def test_count_instance_norm(affine, other_flops):
    norm = layer(count(nn.Sequential(nn.InstanceNorm2d(3, affine=affine))), "0")
    assert norm.other_flops == other_flops


class WeightOnlyNorm(nn.Module):
    def __init__(self, group: bool):
        super().__init__()
        self.group = group
        self.weight = nn.Parameter(torch.ones(3 if group else 8))

    def forward(self, x):
        if self.group:
            return F.group_norm(x, 1, weight=self.weight, bias=None)
        return F.layer_norm(x, (8,), weight=self.weight, bias=None)


def test_count_layer_norm_weight_only_is_affine():
    # 7 * 384 = 2688
    assert count(WeightOnlyNorm(group=False)).total.other_flops == 2688


def test_count_group_norm_weight_only_is_affine():
    # 7 * 384 = 2688, as for layer norm with a weight and no bias
    assert count(WeightOnlyNorm(group=True)).total.other_flops == 2688


ELEMENTWISE_CASES = {
    # 1 per output element: 384
    "relu": (nn.ReLU(), "aten.relu", 384, "activation"),
    "relu_inplace": (nn.ReLU(inplace=True), "aten.relu_", 384, "activation"),
    "sigmoid": (nn.Sigmoid(), "aten.sigmoid", 384, "activation"),
    "hardswish": (nn.Hardswish(), "aten.hardswish", 384, "activation"),
    "add": (Lambda(lambda x: x + x), "aten.add", 384, "elementwise"),
    "mul": (Lambda(lambda x: x * 2.0), "aten.mul", 384, "elementwise"),
    # 5 per element: 1920
    "softmax": (nn.Softmax(dim=-1), "aten._softmax", 1920, "activation"),
}


@pytest.mark.parametrize("case", list(ELEMENTWISE_CASES))
def test_count_elementwise(case):
    module, op, other_flops, op_class = ELEMENTWISE_CASES[case]
    result = count(nn.Sequential(module))
    tested = layer(result, "0")
    assert tested.ops == {op: 1}
    assert (tested.flops, tested.other_flops, tested.op_class) == (0, other_flops, op_class)


def test_count_broadcast_add_counts_output_elements():
    # (2, 3, 8, 8) + (2, 3, 1, 1): 1 per output element, 384
    result = count(Lambda(lambda x: x + x.mean((2, 3), keepdim=True)))
    # mean: 1 per input element, 384; add: 384
    assert result.total.other_flops == 384 + 384


# --- unsupported ops -----------------------------------------------------------------------------------------


def test_unsupported_ops_are_reported_with_counts():
    result = count(Lambda(lambda x: torch.cumsum(torch.cumsum(x, 1), 2) + torch.fft.fft2(x).real))
    assert result.unsupported["aten.cumsum"] == 2
    fft_ops = {op for op in result.unsupported if "fft" in op}
    assert fft_ops, result.unsupported
    assert layer(result, "Lambda").unsupported == result.unsupported
    # the supported add is still counted: 384
    assert result.total.other_flops == 384


def test_supported_model_has_no_unsupported_ops():
    assert count(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())).unsupported == {}


# --- the registry --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(formulas.REGISTRY))
def test_registry_entry(name):
    rule = formulas.REGISTRY[name]
    assert isinstance(rule, Rule)
    assert isinstance(rule.kind, Kind)
    assert callable(rule.cost)
    assert formulas.lookup(name) is rule
    # a misspelt name would never match a traced op
    assert name.startswith("aten.") and hasattr(aten, name.removeprefix("aten."))


def test_only_norms_and_pools_write_just_their_first_output():
    # saved statistics (norms), indices (max pools) and attention's logsumexp are not needed at inference,
    # and nothing else is dropped
    first_only = {name for name, rule in formulas.REGISTRY.items() if rule.first_output_only}
    kinds = (Kind.NORM, Kind.POOL, Kind.ATTENTION)
    assert first_only == {name for name, rule in formulas.REGISTRY.items() if rule.kind in kinds}
    assert {"aten.native_layer_norm", "aten.max_pool2d_with_indices", "aten.adaptive_max_pool2d"} <= first_only


def _no_cost(_: Call) -> Cost:
    return Cost()


def test_register_twice_raises():
    name = "aten._utilscope_test_only_op"
    assert name not in formulas.REGISTRY
    try:
        formulas.register(Kind.ELEMENTWISE, name)(_no_cost)
        assert formulas.REGISTRY[name] == Rule(Kind.ELEMENTWISE, _no_cost)
        with pytest.raises(ValueError, match="registered twice"):
            formulas.register(Kind.ACTIVATION, name)(_no_cost)
        assert formulas.REGISTRY[name].kind is Kind.ELEMENTWISE
        with pytest.raises(ValueError, match="registered twice"):
            formulas.register(Kind.ELEMENTWISE, "aten.relu")(_no_cost)
    finally:
        formulas.REGISTRY.pop(name, None)


def test_register_failure_leaves_registry_unchanged():
    name = "aten._utilscope_test_only_op2"
    size_before = len(formulas.REGISTRY)
    try:
        with pytest.raises(ValueError):
            formulas.register(Kind.ELEMENTWISE, f"{name} aten.relu")(_no_cost)
        assert formulas.lookup(name) is None
        assert len(formulas.REGISTRY) == size_before
    finally:
        formulas.REGISTRY.pop(name, None)


# --- meta shortcuts ------------------------------------------------------------------------------------------


def meta(*shape, dtype=torch.float32, channels_last=False):
    t = torch.empty(shape, dtype=dtype, device="meta")
    return t.to(memory_format=torch.channels_last) if channels_last else t


def _bn_args(dtype, channels_last=False, training=None):
    x = meta(2, 8, 5, 5, dtype=dtype, channels_last=channels_last)
    params = [meta(8, dtype=dtype) for _ in range(4)]
    return (x, *params) + (() if training is None else (training,)) + (0.1, 1e-5)


def _ln_args(dtype, normalized=(5,), affine=True, layout=None):
    x = meta(2, 8, 5, 5, dtype=dtype, channels_last=layout == "channels_last")
    if layout == "permuted":
        x = meta(2, 5, 5, 8, dtype=dtype).permute(0, 3, 1, 2)
    w = meta(*normalized, dtype=dtype) if affine else None
    return (x, list(normalized), w, w, 1e-5)


def _addmm_args(dtype, transposed=False, expanded_bias=False):
    a = meta(4, 6, dtype=dtype)
    b = meta(3, 6, dtype=dtype).t() if transposed else meta(6, 3, dtype=dtype)
    bias = meta(1, 3, dtype=dtype).expand(4, 3) if expanded_bias else meta(3, dtype=dtype)
    return (bias, a, b)


def _unary_args(dtype, layout):
    if layout == "permuted":  # dense, but neither contiguous nor channels_last: the op's own kernel runs
        return (meta(2, 5, 8, 5, dtype=dtype).permute(0, 2, 1, 3),)
    if layout == "expanded":
        return (meta(2, 8, 1, 5, dtype=dtype).expand(2, 8, 4, 5),)
    if layout == "tokens":
        return (meta(2, 7, 7, 8, dtype=dtype),)
    return (meta(2, 8, 5, 5, dtype=dtype, channels_last=layout == "channels_last"),)


UNARY_CASES = [
    (layout, functools.partial(_unary_args, layout=layout))
    for layout in ("contiguous", "channels_last", "permuted", "expanded", "tokens")
]

UNARY_OPS = (
    aten.gelu.default,
    aten.silu.default,
    aten.sigmoid.default,
    aten.hardswish.default,
    aten.hardsigmoid.default,
)

SHORTCUT_CASES = {
    **dict.fromkeys(UNARY_OPS, UNARY_CASES),
    # in place: an expanded tensor cannot be written (the kernel refuses it, and so does the shortcut)
    aten.hardswish_.default: [case for case in UNARY_CASES if case[0] != "expanded"],
    aten.native_batch_norm.default: [
        ("eval", lambda dt: _bn_args(dt, training=False)),
        ("train", lambda dt: _bn_args(dt, training=True)),
        ("eval_channels_last", lambda dt: _bn_args(dt, channels_last=True, training=False)),
    ],
    aten._native_batch_norm_legit_no_training.default: [
        ("contiguous", lambda dt: _bn_args(dt)),
        ("channels_last", lambda dt: _bn_args(dt, channels_last=True)),
    ],
    aten.native_layer_norm.default: [
        ("last_dim", lambda dt: _ln_args(dt)),
        ("last_two_dims", lambda dt: _ln_args(dt, normalized=(5, 5))),
        ("no_affine", lambda dt: _ln_args(dt, affine=False)),
        ("channels_last", lambda dt: _ln_args(dt, layout="channels_last")),
        ("permuted", lambda dt: _ln_args(dt, layout="permuted")),
    ],
    aten.addmm.default: [
        ("contiguous", lambda dt: _addmm_args(dt)),
        ("transposed_b", lambda dt: _addmm_args(dt, transposed=True)),
        ("expanded_bias", lambda dt: _addmm_args(dt, expanded_bias=True)),
    ],
}


def _flatten_cases():
    """(label, make_args) or (label, make_args, mark) per op -> pytest params named op-label."""
    for func, cases in SHORTCUT_CASES.items():
        for label, make, *marks in cases:
            yield pytest.param(func, make, id=f"{func}-{label}", marks=marks)


def test_every_shortcut_has_cases():
    assert set(SHORTCUT_CASES) == set(META_SHORTCUTS)


def _layout(out):
    outs = out if isinstance(out, tuple) else (out,)
    return [(tuple(t.shape), t.stride(), t.dtype, t.device.type) for t in outs]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize(("func", "make_args"), list(_flatten_cases()))
def test_meta_shortcut_matches_meta_kernel(func, make_args, dtype):
    args = make_args(dtype)
    assert _layout(META_SHORTCUTS[func](*args)) == _layout(func(*args))
    if func._schema.is_mutable:  # in place: the input itself, as the kernel returns it
        assert META_SHORTCUTS[func](*args) is args[0] and func(*args) is args[0]


# --- the memo of meta outputs --------------------------------------------------------------------------------


def test_only_pure_ops_are_memoized():
    # a write (relu_) or an alias (view, t) must keep returning the tensor the op gives, not a fresh one
    assert tracer._is_pure(aten.add.Tensor) and tracer._is_pure(aten.convolution.default)
    assert not any(map(tracer._is_pure, (aten.relu_.default, aten.view.default, aten.t.default, aten.add_.Tensor)))
    # a factory has no tensor to carry its device into the key (a device context could change it): not memoized
    x = torch.empty(2, device="meta")
    assert not tracer._memoizable(aten.empty.memory_format, ([2],)) and tracer._memoizable(aten.cat.default, ([x, x],))


def test_memo_keys_scalars_by_type():
    # an int64 tensor times 2 stays int64, times 2.0 becomes float32: the two calls must not share an entry
    x = torch.empty(4, 4, dtype=torch.int64, device="meta")
    assert tracer._meta_call(aten.mul.Tensor, (x, 2), {}).dtype == torch.int64
    assert tracer._meta_call(aten.mul.Tensor, (x, 2.0), {}).dtype == torch.float32
    assert tracer._meta_call(aten.mul.Tensor, (x, 2), {}).dtype == torch.int64  # a hit


def test_memo_hit_matches_meta_kernel():
    # a channels_last tensor times its SE gate: the hit rebuilds the kernel's shape, strides and dtype, fresh
    x = torch.empty(2, 8, 5, 5, dtype=torch.float16, device="meta").contiguous(memory_format=torch.channels_last)
    gate = torch.empty(2, 8, 1, 1, dtype=torch.float16, device="meta")
    first = tracer._meta_call(aten.mul.Tensor, (x, gate), {})
    again = tracer._meta_call(aten.mul.Tensor, (x, gate), {})
    assert _layout(again) == _layout(first) == _layout(aten.mul.Tensor(x, gate)) and again is not first
    norm_args = (x, None, None, None, None, True, 0.1, 1e-5)  # a tuple of three outputs
    tracer._meta_call(aten.native_batch_norm.default, norm_args, {})
    hit = tracer._meta_call(aten.native_batch_norm.default, norm_args, {})
    assert isinstance(hit, tuple) and _layout(hit) == _layout(aten.native_batch_norm.default(*norm_args))


def test_a_full_memo_starts_over(monkeypatch):
    monkeypatch.setattr(tracer, "_META_OUTPUTS_MAX", 2)
    tracer._META_OUTPUTS.clear()
    x = torch.empty(3, device="meta")
    for scalar in (1, 2, 3):  # three keys: the third finds the memo full, clears it and is its only entry
        tracer._meta_call(aten.mul.Tensor, (x, scalar), {})
    assert len(tracer._META_OUTPUTS) == 1


def test_a_trace_with_memo_hits_counts_as_one_without(monkeypatch):
    block = lambda: [nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU()]  # noqa: E731
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), *block(), *block())
    with_memo = count(model)
    # the trace's entries: conv 3 -> 8, conv 8 -> 8, batch norm, GELU; the second block's three ops were hits
    assert len(tracer._META_OUTPUTS) == 4
    monkeypatch.setattr(tracer, "_memoizable", lambda func, args: False)
    assert count(model) == with_memo
