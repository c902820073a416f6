"""Exact channel padding (utilscope.advise.padding) and the BatchNorm folding advise measures
(utilscope.measure.backends.fold_batchnorm): tiny networks, one per pattern that ties channels together, each
rewritten with outputs unchanged to 1e-5 (float32, CPU)."""

from __future__ import annotations

import copy

import pytest
import timm
import torch
from conftest import randomized
from timm.layers import Conv2dSame
from torch import nn
from torch.nn import functional as F

from utilscope.advise.layout import Layout
from utilscope.advise.padding import pad_channels, verify
from utilscope.errors import ModelError, UsageError
from utilscope.measure.backends import fold_batchnorm

RTOL = 1e-5
EXAMPLE_SHAPE = (1, 3, 16, 16)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny convs: one intra-op thread is faster than two that spin against other processes on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def padded(model: nn.Module, shape=EXAMPLE_SHAPE):
    """Pad ``model``; check its outputs are unchanged and the original's weights untouched."""
    model = randomized(model)
    example = torch.randn(shape)
    before = copy.deepcopy(model.state_dict())
    result = pad_channels(model, example)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert verify(model, result.model, example, rtol=RTOL) <= RTOL
    return result


def widths(result, name: str) -> tuple[int, int]:
    conv = result.model.get_submodule(name)
    return (
        (conv.in_channels, conv.out_channels) if isinstance(conv, nn.Conv2d) else (conv.in_features, conv.out_features)
    )


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn, self.conv2 = nn.Conv2d(3, 13, 3, padding=1), nn.BatchNorm2d(13), nn.Conv2d(13, 16, 3)

    def forward(self, x):
        return self.conv2(torch.relu(self.bn(self.conv1(x))))


def test_a_conv_bn_relu_conv_chain_of_13_channels_is_padded_to_16():
    result = padded(Chain())
    # 13 -> ceil(13 / 8) * 8 = 16
    assert widths(result, "conv1") == (3, 16) and widths(result, "conv2") == (16, 16)
    assert result.model.bn.num_features == 16
    assert result.padded_layers == 2
    # conv1: 3 more filters of 3 x 3 x 3 and 3 biases = 84; bn: 3 weights + 3 biases = 6; conv2: 16 filters x 3 more
    # input channels x 3 x 3 = 432 (running statistics are buffers, not parameters)
    assert result.added_params == 84 + 6 + 432
    group = next(g for g in result.groups if g.channels == 13)
    assert (group.padded_channels, group.blocked_by, group.layers) == (16, None, ("conv1", "bn", "conv2"))
    # the 3-channel input is reported: a conv reads it, and it stays as it is
    assert [g.blocked_by for g in result.groups if g.channels == 3] == ["graph input"]
    assert not result.nothing_to_do


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Conv2d(3, 13, 3, padding=1), nn.Conv2d(13, 8, 1)
        self.a, self.b = nn.Conv2d(13, 13, 3, padding=1), nn.Conv2d(13, 13, 1)

    def forward(self, x):
        x = self.stem(x)
        return self.head(torch.relu(self.a(x) + self.b(x)) + x)


def test_a_residual_add_ties_both_branches_and_the_shortcut_into_one_group():
    result = padded(Residual())
    (group,) = [g for g in result.groups if g.channels == 13]
    assert group.padded_channels == 16  # 13 -> 16
    assert set(group.layers) == {"stem", "a", "b", "head"}
    assert widths(result, "a") == widths(result, "b") == (16, 16) and widths(result, "head") == (16, 8)


class Dense(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0, self.conv1 = nn.Conv2d(3, 5, 3, padding=1), nn.Conv2d(5, 6, 3, padding=1)
        self.conv2, self.head = nn.Conv2d(11, 7, 3, padding=1), nn.Conv2d(18, 8, 1)

    def forward(self, x):
        x0 = self.conv0(x)
        x1 = torch.relu(self.conv1(x0))
        x2 = self.conv2(torch.cat([x0, x1], dim=1))
        return self.head(torch.cat([x0, x1, x2], 1))


def test_a_concatenation_lays_its_inputs_end_to_end():
    result = padded(Dense())
    # x0: 5 -> 8, x1: 6 -> 8, x2: 7 -> 8; cat(x0, x1): 8 + 8 = 16, cat(x0, x1, x2): 8 + 8 + 8 = 24
    assert widths(result, "conv0") == (3, 8) and widths(result, "conv1") == (8, 8)
    assert widths(result, "conv2") == (16, 8) and widths(result, "head") == (24, 8)


class MobileBlock(nn.Module):
    def __init__(self, width=20):
        super().__init__()
        self.expand, self.bn1 = nn.Conv2d(3, width, 1), nn.BatchNorm2d(width)
        self.dw, self.bn2 = nn.Conv2d(width, width, 3, padding=1, groups=width), nn.BatchNorm2d(width)
        self.project = nn.Conv2d(width, 16, 1)

    def forward(self, x):
        x = nn.functional.relu6(self.bn1(self.expand(x)))
        return self.project(nn.functional.relu6(self.bn2(self.dw(x))))


def test_a_depthwise_conv_takes_its_groups_from_the_padded_channels():
    result = padded(MobileBlock())
    dw = result.model.dw
    assert dw.in_channels == dw.out_channels == dw.groups == 24  # 20 -> ceil(20 / 8) * 8 = 24
    assert widths(result, "project") == (24, 16)


class SameBlock(nn.Module):
    """TF-style "same" padding (timm's ``Conv2dSame``), whose forward symbolic tracing cannot follow."""

    def __init__(self):
        super().__init__()
        self.stem = Conv2dSame(3, 20, 3, stride=2)
        self.dw = Conv2dSame(20, 20, 5, stride=2, groups=20)
        self.project = nn.Conv2d(20, 16, 1)

    def forward(self, x):
        return self.project(torch.relu(self.dw(torch.relu(self.stem(x)))))


def test_same_padded_convs_are_read_as_the_convs_they_are_and_padded():
    result = padded(SameBlock(), shape=(1, 3, 15, 15))  # odd: the "same" padding is asymmetric
    assert isinstance(result.model.stem, Conv2dSame) and widths(result, "stem") == (3, 24)
    assert result.model.dw.groups == widths(result, "dw")[1] == 24 and widths(result, "project") == (24, 16)


class BlurDownsample(nn.Module):
    """timm's ``BlurPool2d`` as TResNet calls it: a reflect pad, then a fixed blur filter (a buffer) convolved per
    channel by a functional ``conv2d`` whose ``groups`` is a number; and a dense functional conv of a parameter."""

    def __init__(self, width=20):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.register_buffer("filt", torch.rand(width, 1, 3, 3))
        self.dense = nn.Parameter(torch.randn(12, width, 1, 1))
        self.project = nn.Conv2d(12, 16, 1)

    def forward(self, x):
        x = F.pad(torch.relu(self.stem(x)), [1, 1, 1, 1], mode="reflect")
        x = F.conv2d(x, self.filt, stride=2, groups=20)
        return self.project(F.conv2d(x, self.dense))


def test_a_functional_blur_conv_and_a_dense_functional_conv_are_padded():
    result = padded(BlurDownsample())
    assert widths(result, "stem") == (3, 24) and widths(result, "project") == (16, 16)
    assert tuple(result.model.filt.shape) == (24, 1, 3, 3) and tuple(result.model.dense.shape) == (16, 24, 1, 1)
    assert [g.blocked_by for g in result.blocked] == ["graph input"] and result.padded_layers == 4


class FunctionalGrouped(nn.Module):
    """A grouped ``F.conv2d`` of a parameter: 12 channels in 4 groups of 3, out 20 in groups of 5."""

    def __init__(self):
        super().__init__()
        self.conv0, self.head = nn.Conv2d(3, 12, 3), nn.Conv2d(20, 8, 1)
        self.grouped = nn.Parameter(torch.randn(20, 3, 3, 3))

    def forward(self, x):
        return self.head(F.conv2d(self.conv0(x), self.grouped, groups=4))


def test_a_functional_grouped_conv_is_padded_group_by_group_and_keeps_its_groups():
    result = padded(FunctionalGrouped())
    # each group's 3 inputs and 5 outputs padded to 8, as for the module (test_a_grouped_conv_is_padded_...)
    assert tuple(result.model.grouped.shape) == (32, 8, 3, 3) and widths(result, "head") == (32, 8)
    assert widths(result, "conv0") == (3, 32) and result.padded_layers == 3


class EcaBlock(nn.Module):
    """timm's ECA gate (a Conv1d along the channels of the pooled features) on 20 channels, after ``before``."""

    def __init__(self, before: nn.Module):
        super().__init__()
        self.conv, self.bn, self.before = nn.Conv2d(3, 20, 3), nn.BatchNorm2d(20), before
        self.eca, self.head = timm.layers.EcaModule(kernel_size=5), nn.Conv2d(20, 8, 1)

    def forward(self, x):
        return self.head(self.eca(self.before(self.bn(self.conv(x)))))


def test_an_eca_gate_is_padded_where_its_padding_is_zeros_at_the_end():
    result = padded(EcaBlock(nn.ReLU()))
    assert widths(result, "conv") == (3, 24) and widths(result, "head") == (24, 8)
    assert [g.blocked_by for g in result.blocked] == ["graph input"]


def test_an_eca_gate_after_a_sigmoid_keeps_its_channels():
    result = padded(EcaBlock(nn.Sigmoid()))  # sigmoid(0) = 0.5: the conv along the channels would read it
    assert result.nothing_to_do and widths(result, "conv") == (3, 20)
    assert "eca.conv convolves over the channels: needs zeros after them" in {g.blocked_by for g in result.groups}


class EcaOnCat(nn.Module):
    """ECA over a cat of 5 and 7 channels: padded piece by piece, its padding would sit between them."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 5, 1), nn.Conv2d(3, 7, 1)
        self.eca, self.head = timm.layers.EcaModule(kernel_size=3), nn.Conv2d(12, 8, 1)

    def forward(self, x):
        return self.head(self.eca(torch.cat([self.a(x), self.b(x)], 1)))


def test_an_eca_gate_on_padding_between_channels_keeps_them():
    result = padded(EcaOnCat())
    assert widths(result, "head") == (12, 8)
    assert "eca.conv convolves over the channels: needs zeros after them" in {g.blocked_by for g in result.groups}


class SqueezeExcite(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.reduce, self.expand = nn.Conv2d(3, 16, 3), nn.Conv2d(16, 5, 1), nn.Conv2d(5, 16, 1)
        self.head = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        x = self.conv(x)
        gate = torch.sigmoid(self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True)))))
        return self.head(x * gate)


def test_a_squeeze_excite_gate_pads_its_reduction():
    result = padded(SqueezeExcite())
    # the 16-channel tensors (input, gate, product) are aligned already; the reduction 5 -> 8
    assert widths(result, "reduce") == (16, 8) and widths(result, "expand") == (8, 16)
    assert widths(result, "conv") == (3, 16)
    # reduce: 3 more filters of 16 weights and 3 biases = 51; expand: 16 filters x 3 more inputs = 48
    assert result.added_params == 51 + 48


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.pool, self.fc = nn.Conv2d(3, 13, 3), nn.AdaptiveAvgPool2d(1), nn.Linear(13, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


def test_a_classifier_reads_the_pooled_and_flattened_padded_channels():
    result = padded(Classifier())
    # 13 -> 16 through pool and flatten; the logits are the graph output and keep their 10
    assert widths(result, "conv") == (3, 16) and widths(result, "fc") == (16, 10)


class Res2Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 52, 1), nn.BatchNorm2d(52)
        self.convs = nn.ModuleList(nn.Conv2d(13, 13, 3, padding=1) for _ in range(3))
        self.conv3 = nn.Conv2d(52, 16, 1)

    def forward(self, x):
        pieces = torch.split(torch.relu(self.bn1(self.conv1(x))), 13, 1)
        outputs, sp = [], None
        for i, conv in enumerate(self.convs):
            sp = pieces[i] if i == 0 else sp + pieces[i]
            sp = torch.relu(conv(sp))
            outputs.append(sp)
        return self.conv3(torch.cat([*outputs, pieces[3]], 1))


def test_a_split_into_unaligned_chunks_pads_each_chunk():
    result = padded(Res2Split())
    # 52 = 4 x 13 is cut at 13, 26 and 39 downstream, so each chunk is padded on its own: 4 x 16 = 64
    assert widths(result, "conv1") == (3, 64) and result.model.bn1.num_features == 64
    assert all(widths(result, f"convs.{i}") == (16, 16) for i in range(3))
    assert widths(result, "conv3") == (64, 16)  # cat of 3 outputs and the last chunk: 4 x 16


class Ghost(nn.Module):
    def __init__(self, out_channels=25):
        super().__init__()
        init = -(-out_channels // 2)  # 13
        self.out_channels = out_channels
        self.primary, self.bn1 = nn.Conv2d(3, init, 1), nn.BatchNorm2d(init)
        self.cheap, self.bn2 = nn.Conv2d(init, init, 3, padding=1, groups=init), nn.BatchNorm2d(init)
        self.head = nn.Conv2d(out_channels, 8, 1)

    def forward(self, x):
        x1 = torch.relu(self.bn1(self.primary(x)))
        x2 = torch.relu(self.bn2(self.cheap(x1)))
        return self.head(torch.cat([x1, x2], dim=1)[:, : self.out_channels])


def test_a_ghost_module_cat_then_slice():
    result = padded(Ghost())
    # x1: 13 -> 16, x2 (depthwise of x1): 16; cat: 32 with channels at 0..12 and 16..28; [:, :25] keeps 0..12 and
    # 16..27, 28 wide, rounded up to 32 (channel 28, the 13th of x2, comes along as padding the head ignores)
    assert widths(result, "primary") == (3, 16) and result.model.cheap.groups == 16
    assert widths(result, "head") == (32, 8)


class GhostV2(Ghost):
    """GhostNet-V2's module: a gate computed first, from a pooled input, multiplies the cat-then-slice computed
    after it, resized to the slice's size read from ``out.shape``."""

    def __init__(self, out_channels=25):
        super().__init__(out_channels)
        self.gate = nn.Conv2d(3, out_channels, 1)

    def forward(self, x):
        gate = torch.sigmoid(self.gate(F.avg_pool2d(x, 2)))
        x1 = torch.relu(self.bn1(self.primary(x)))
        out = torch.cat([x1, torch.relu(self.bn2(self.cheap(x1)))], dim=1)
        size = (out.shape[-2], out.size(3))
        return self.head(out[:, : self.out_channels] * F.interpolate(gate, size=size, mode="nearest"))


def test_a_gate_computed_before_the_cat_it_multiplies_takes_the_slices_layout():
    result = padded(GhostV2())
    # as in the ghost module; the gate's conv writes its 25 channels where the slice has them: 0..12 and 16..27
    assert widths(result, "primary") == (3, 16) and widths(result, "gate") == (3, 32)
    assert widths(result, "head") == (32, 8) and [g.blocked_by for g in result.blocked] == ["graph input"]


class CrossSlices(nn.Module):
    """Each branch adds a (whole) slice of the other: each class waits for the other, and graph order decides."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.head_a, self.head_b = (
            nn.Conv2d(3, 13, 1),
            nn.Conv2d(3, 13, 1),
            nn.Conv2d(13, 8, 1),
            nn.Conv2d(13, 8, 1),
        )

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        return self.head_a(a + b[:, :13]) + self.head_b(b + a[:, :13])


def test_classes_that_wait_for_each_other_are_placed_in_graph_order():
    result = padded(CrossSlices())
    assert all(widths(result, name) == (3, 16) for name in ("a", "b"))
    assert all(widths(result, name) == (16, 8) for name in ("head_a", "head_b"))


class FocalLike(nn.Module):
    """FocalNet's modulation: one conv's output split by sizes into query, context and 3 gates, a one-channel gate
    broadcast over the context, and an open-ended slice of the gates."""

    def __init__(self):
        super().__init__()
        self.f, self.h = nn.Conv2d(3, 8 + 8 + 3, 1), nn.Conv2d(8, 8, 1)  # 19 output channels

    def forward(self, x):
        q, ctx, gates = torch.split(self.f(x), [8, 8, 3], 1)
        ctx_all = ctx * gates[:, 0:1] + ctx.mean((2, 3), keepdim=True) * gates[:, 2:]
        return q * self.h(ctx_all)


def test_a_split_by_sizes_and_an_open_ended_slice_keep_their_channels():
    result = padded(FocalLike())
    # 19 = 8 + 8 + 3, cut at 8 and 16: the gates' 3 channels are padded to 8, so f writes 8 + 8 + 8 = 24; every
    # piece is re-pointed at its padded channels, and gates[:, 2:] stays one channel wide (not 2..8 of the padding)
    assert widths(result, "f") == (3, 24) and widths(result, "h") == (8, 8)


class Fuse(nn.Module):
    """HRNet's fuse layer: a low-resolution branch upsampled and added to the high-resolution one."""

    def __init__(self):
        super().__init__()
        self.high, self.low = nn.Conv2d(3, 13, 3, padding=1), nn.Conv2d(3, 13, 3, stride=2, padding=1)
        self.lower = nn.Conv2d(3, 13, 3, stride=2, padding=1)
        self.up, self.head = nn.Upsample(scale_factor=2.0, mode="nearest"), nn.Conv2d(13, 8, 1)

    def forward(self, x):
        fused = self.high(x) + self.up(self.low(x))
        return self.head(fused + F.interpolate(self.lower(x), scale_factor=2.0, mode="bilinear"))


def test_upsampling_keeps_the_channel_layout():
    result = padded(Fuse())
    # upsampling works per channel: the three branches and the sums are one group of 13 channels, padded to 16
    assert widths(result, "high") == widths(result, "low") == widths(result, "lower") == (3, 16)
    assert widths(result, "head") == (16, 8)


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0, self.grouped = nn.Conv2d(3, 12, 3), nn.Conv2d(12, 20, 3, groups=4)
        self.conv2, self.conv3 = nn.Conv2d(20, 13, 1), nn.Conv2d(13, 8, 1)

    def forward(self, x):
        return self.conv3(torch.relu(self.conv2(self.grouped(self.conv0(x)))))


def test_a_grouped_conv_is_padded_group_by_group():
    result = padded(Grouped())
    # 4 groups of 3 input and 5 output channels, each padded to 8: 12 -> 32 and 20 -> 32
    assert widths(result, "grouped") == (32, 32) and result.model.grouped.groups == 4
    assert widths(result, "conv0") == (3, 32) and widths(result, "conv2") == (32, 16)


class GroupedBottleneck(nn.Module):
    """RegNet's block with an unaligned group width (10): 1x1, grouped 3x3, squeeze-excite, 1x1, residual."""

    def __init__(self):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv1, self.bn1 = nn.Conv2d(16, 30, 1), nn.BatchNorm2d(30)
        self.grouped, self.bn2 = nn.Conv2d(30, 30, 3, padding=1, groups=3), nn.BatchNorm2d(30)
        self.se_reduce, self.se_expand = nn.Conv2d(30, 8, 1), nn.Conv2d(8, 30, 1)
        self.conv3, self.bn3 = nn.Conv2d(30, 16, 1), nn.BatchNorm2d(16)

    def forward(self, x):
        x = torch.relu(self.bn0(self.stem(x)))
        y = torch.relu(self.bn2(self.grouped(torch.relu(self.bn1(self.conv1(x))))))
        y = y * torch.sigmoid(self.se_expand(torch.relu(self.se_reduce(y.mean((2, 3), keepdim=True)))))
        return torch.relu(x + self.bn3(self.conv3(y)))


def test_a_grouped_bottleneck_with_squeeze_excite_is_padded_group_by_group():
    result = padded(GroupedBottleneck())
    assert widths(result, "grouped") == (48, 48) and result.model.bn2.num_features == 48
    assert widths(result, "conv1") == (16, 48) and widths(result, "se_expand") == (8, 48)
    assert widths(result, "conv3") == (48, 16) and all(g.blocked_by is None for g in result.groups if g.channels == 30)


class GroupedAfterCat(nn.Module):
    """A grouped conv over a cat of 5 and 7 channels: padded piece by piece, its two groups would differ."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 5, 1), nn.Conv2d(3, 7, 1)
        self.grouped, self.head = nn.Conv2d(12, 12, 3, groups=2), nn.Conv2d(12, 8, 1)

    def forward(self, x):
        return self.head(self.grouped(torch.cat([self.a(x), self.b(x)], 1)))


def test_a_grouped_conv_whose_groups_would_be_laid_out_differently_is_blocked_with_its_reason():
    result = padded(GroupedAfterCat())
    reasons = {g.channels: g.blocked_by for g in result.groups if g.blocked_by}
    assert "layouts differ across the groups of grouped" in reasons[12]
    assert widths(result, "grouped")[0] == 12


def test_a_grouped_conv_with_aligned_channels_is_left_as_it_is():
    # 16 channels in 4 groups of 4: the tensor is aligned; padding each group to 8 would double the layer
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 16, 3, groups=4), nn.Conv2d(16, 8, 1))
    assert padded(model).nothing_to_do


class Blocked(nn.Module):
    def __init__(self, middle: nn.Module | None, flatten_spatial=False):
        super().__init__()
        self.conv, self.middle, self.flatten_spatial = nn.Conv2d(8, 13, 3, padding=1), middle, flatten_spatial
        self.fc = nn.Linear(13 * 16 * 16, 10)
        self.head = nn.Conv2d(13, 8, 1)

    def forward(self, x):
        x = self.conv(x)
        if self.flatten_spatial:
            return self.fc(torch.flatten(x, 1))
        if self.middle is None:  # a channel shuffle of 13 = 1 x 13 (as ShuffleNet writes it)
            n, c, h, w = x.shape
            return self.head(x.view(n, 1, c, h, w).transpose(1, 2).reshape(n, c, h, w))
        return self.head(self.middle(x))


@pytest.mark.parametrize(
    "model, reason",
    [
        (Blocked(nn.GroupNorm(1, 13)), "GroupNorm normalizes over channels"),
        (Blocked(nn.Conv2d(13, 13, 3, padding=1, groups=13)), None),  # the control: a depthwise conv is padded
        (Blocked(None), "reads .shape"),
        (Blocked(lambda x: F.interpolate(x, size=(x.size(2), x.size(1)))), "reads the channel count (.size())"),
        (Blocked(None, flatten_spatial=True), "flatten with spatial 16x16 mixes channels and positions"),
    ],
    ids=["group-norm", "depthwise-control", "channel-shuffle", "size-of-channels", "flatten-spatial"],
)
def test_ops_that_mix_channels_block_padding(model, reason):
    """An 8-channel input, so the 13-channel tensors are the only unaligned ones."""
    result = padded(model, shape=(1, 8, 16, 16))
    thirteen = [g for g in result.groups if g.channels == 13]
    assert thirteen and all(g.padded_channels == (13 if reason else 16) for g in thirteen)  # 13 -> 16 when free
    assert reason in {g.blocked_by for g in thirteen}
    assert result.nothing_to_do == bool(reason)


class PadsChannels(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv2d(8, 13, 1), nn.Conv2d(15, 8, 1)

    def forward(self, x):
        return self.head(F.pad(self.conv(x), [0, 0, 0, 0, 1, 1]))


def test_a_pad_of_the_channel_dim_blocks_padding():
    result = padded(PadsChannels(), shape=(1, 8, 16, 16))
    assert "a pad of [0, 0, 0, 0, 1, 1] that reaches the channel dim" in {g.blocked_by for g in result.groups}
    assert result.nothing_to_do


def test_a_depthwise_conv_with_a_channel_multiplier_is_blocked():
    model = nn.Sequential(nn.Conv2d(8, 13, 1), nn.Conv2d(13, 26, 3, groups=13), nn.Conv2d(26, 8, 1))
    result = padded(model, shape=(1, 8, 16, 16))
    assert {g.blocked_by for g in result.groups} == {"depthwise conv with channel multiplier 2"}
    assert result.nothing_to_do and result.model is model


class WritesIntoSlice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv2d(8, 26, 1), nn.Conv2d(13, 8, 1)

    def forward(self, x):
        x = self.conv(x)
        part = x[:, :13]
        part.mul_(2.0)  # writes into x, which is a graph output
        return x, self.head(part)


def test_an_in_place_write_into_a_slice_keeps_the_slice_unpadded():
    """x is an output (unpadded), so a padded slice x[:, 0:16] would double x's channels 13..15 as well."""
    result = padded(WritesIntoSlice(), shape=(1, 8, 16, 16))
    assert widths(result, "head") == (13, 8)
    assert "an in-place op on a channel slice" in {g.blocked_by for g in result.groups}


def test_an_aligned_model_has_nothing_to_do_and_comes_back_untouched():
    model = nn.Sequential(nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 1))
    result = padded(model, shape=(1, 8, 16, 16))
    assert result.nothing_to_do and result.model is model
    assert (result.groups, result.padded_layers, result.added_params) == ((), 0, 0)


def test_a_graph_output_with_unaligned_channels_is_blocked():
    model = nn.Sequential(nn.Conv2d(8, 13, 3), nn.ReLU())
    result = padded(model, shape=(1, 8, 16, 16))
    assert [g.blocked_by for g in result.groups] == ["graph output"] and result.model is model


@pytest.mark.parametrize(
    "model, example, multiple, message",
    [
        ("resnet50", torch.randn(EXAMPLE_SHAPE), 8, "needs a torch.nn.Module"),
        (Chain(), torch.randn(3, 16, 16), 8, r"\(N, C, H, W\) tensor, got \(3, 16, 16\)"),
        (Chain(), [1, 2], 8, "got list"),
        (Chain(), torch.randn(EXAMPLE_SHAPE), 0, "must be at least 1 and at most 128 .*, got 0"),
        (Chain(), torch.randn(EXAMPLE_SHAPE), 129, "must be at least 1 and at most 128 .*, got 129"),
        (Chain(), torch.randn(EXAMPLE_SHAPE), 8.0, "a whole number, got 8.0"),
    ],
)
def test_bad_arguments_are_usage_errors(model, example, multiple, message):
    with pytest.raises(UsageError, match=message):
        pad_channels(model, example, multiple)


def test_verify_reports_outputs_that_differ():
    a, b = Chain().eval(), Chain().eval()
    with pytest.raises(ModelError, match="max relative difference"):
        verify(a, b, torch.randn(EXAMPLE_SHAPE))


def test_layout_algebra():
    padded_layout = Layout.padded(0, 52, {13, 26, 39}, 8)
    assert padded_layout.width == 64 and padded_layout.positions[13] == 16
    cat = Layout.concat([Layout.padded(0, 13, (), 8), Layout.padded(0, 13, (), 8)])
    assert cat.natural(0, 25).width == 28 and cat.window(0, 25, 8).width == 32
    assert cat.holds(0, 25, cat.window(0, 25, 8)) and not cat.holds(0, 25, Layout.identity(25))
    # per_group: the layout each of the equal groups has, where all have the same one
    assert Layout.padded(0, 30, {10, 20}, 8).per_group(3) == Layout(tuple(range(10)), 16)
    assert Layout.identity(12).per_group(4) == Layout.identity(3)
    assert cat.per_group(2) == Layout.padded(0, 13, (), 8)  # two groups of 13, each padded to 16
    uneven = Layout.concat([Layout.padded(0, 5, (), 8), Layout.padded(0, 7, (), 8)])  # groups of 6: 5+1, 6
    assert uneven.per_group(2) is None and Layout.padded(0, 30, (), 8).per_group(3) is None


class ConvFlops:
    """Conv FLOPs of the forward passes while installed (forward hooks): all, unaligned (in or out channels not a
    multiple of 8), and unaligned other than those reading the 3-channel image."""

    def __init__(self, *models: nn.Module):
        self.total = self.unaligned = self.inner_unaligned = 0
        self.handles = [
            m.register_forward_hook(self.hook) for model in models for m in model.modules() if isinstance(m, nn.Conv2d)
        ]

    def hook(self, conv, inputs, output):
        flops = 2 * output.numel() * conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]
        unaligned = bool(conv.in_channels % 8 or conv.out_channels % 8)
        self.total += flops
        self.unaligned += flops * unaligned
        self.inner_unaligned += flops * (unaligned and conv.in_channels != 3)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()


def test_ghostnet_is_padded_exactly_and_only_its_stem_stays_unaligned():
    torch.manual_seed(0)
    model = timm.create_model("ghostnet_100", pretrained=False).eval()
    example = torch.randn(1, 3, 64, 64)
    result = pad_channels(model, example)
    with ConvFlops(model) as before, ConvFlops(result.model) as after:
        assert verify(model, result.model, example, rtol=RTOL) <= RTOL
    assert before.unaligned / before.total > 0.15  # 20% at 224 x 224
    assert after.inner_unaligned == 0 and after.unaligned / after.total < 0.05  # the stem reads the 3-channel image
    assert [g.blocked_by for g in result.groups if g.blocked_by] == ["graph input"]


class ResNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.down, self.bn_down = nn.Conv2d(3, 16, 1, bias=False), nn.BatchNorm2d(16)

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + self.bn_down(self.down(x)))


def test_fold_batchnorm_folds_every_batchnorm_after_a_conv():
    model = randomized(ResNetLike())
    example = torch.randn(EXAMPLE_SHAPE)
    folded, notes = fold_batchnorm(model, example)
    assert notes == () and not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert verify(model, folded, example, rtol=RTOL) <= RTOL
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 3  # the original keeps its own
