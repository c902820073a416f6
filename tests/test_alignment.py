"""The one alignment rule (``hardware.alignment.unaligned_sides`` / ``unaligned_channels``), closed form."""

from __future__ import annotations

import pytest
from torch import nn

from utilscope.advise.rewrites import unaligned_share
from utilscope.counting.counter import count
from utilscope.hardware.alignment import unaligned_channels, unaligned_sides


def test_a_dense_conv_or_linear_is_judged_on_both_sides():
    assert unaligned_sides(64, 128, 8) == {}  # 64 % 8 == 0, 128 % 8 == 0
    assert unaligned_sides(30, 32, 8) == {"input": 30}  # 30 = 3*8 + 6
    assert unaligned_sides(32, 30, 8) == {"output": 30}
    assert unaligned_sides(30, 31, 8) == {"input": 30, "output": 31}
    assert unaligned_sides(30, 30, 4) == {"input": 30, "output": 30}  # tf32/fp32: 30 = 7*4 + 2
    assert unaligned_sides(24, 24, 16) == {"input": 24, "output": 24}  # int8: 24 = 16 + 8
    assert not unaligned_channels(64, 128, 8)
    assert unaligned_channels(32, 30, 8)


def test_the_image_input_side_is_not_judged():
    # the RGB stem: 3 input channels fixed by the data, 64 output channels aligned
    assert unaligned_sides(3, 64, 8, image_input=True) == {}
    assert unaligned_sides(3, 64, 8) == {"input": 3}  # the stem counted (counting.design)
    assert unaligned_sides(3, 30, 8, image_input=True) == {"output": 30}  # the output side is still judged


def test_a_grouped_conv_is_judged_per_group():
    # ResNeXt 32x4d: 128 channels in 32 groups -> 4 per group, 4 % 8 != 0, though 128 % 8 == 0
    assert unaligned_sides(128, 128, 8, groups=32) == {"input": 4, "output": 4}
    # RegNet group width 24 (e.g. 168 channels in 7 groups): 24 % 8 == 0
    assert unaligned_sides(168, 168, 8, groups=7) == {}
    # 2 groups of 20: the totals (40) are multiples of 8, the groups are not
    assert unaligned_sides(40, 40, 8, groups=2) == {"input": 20, "output": 20}


def test_a_depthwise_conv_is_judged_by_its_total_channels():
    # one input channel per group: no tensor cores, vectorized over all channels
    assert unaligned_sides(32, 32, 8, groups=32) == {}
    assert unaligned_sides(30, 30, 8, groups=30) == {"input": 30, "output": 30}
    assert unaligned_sides(32, 64, 8, groups=32) == {}  # channel multiplier 2
    # judged per group (counting.design's stored shares): 1 channel per group, never a multiple of 8
    assert unaligned_sides(32, 32, 8, groups=32, depthwise_per_group=True) == {"input": 1, "output": 1}
    assert unaligned_channels(32, 64, 8, groups=32, depthwise_per_group=True)  # 1 in, 2 out per group


@pytest.mark.parametrize("groups", [0, 3])
def test_groups_must_divide_the_channels(groups):
    with pytest.raises(ValueError, match="does not divide"):
        unaligned_sides(32, 32, 8, groups=groups)


def test_advise_unaligned_share_applies_the_rule_with_the_image_exempt():
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False),  # the stem: reads the image, 16 out aligned
        nn.Conv2d(16, 16, 3, padding=1, groups=2, bias=False),  # 8 per group: aligned
        nn.Conv2d(16, 16, 1, groups=4, bias=False),  # 4 per group: unaligned, though 16 % 8 == 0
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False),  # depthwise, 16 channels: aligned
        nn.Conv2d(16, 12, 1, bias=False),  # 12 out: unaligned
    )
    counted = count(model, resolution=8)
    # FLOPs = 2 * 64 positions * out * in per group * kernel
    stem, grouped, grouped4, depthwise, pointwise = (
        2 * 64 * 16 * 3 * 9,
        2 * 64 * 16 * 8 * 9,
        2 * 64 * 16 * 4,
        2 * 64 * 16 * 9,
        2 * 64 * 12 * 16,
    )
    total = stem + grouped + grouped4 + depthwise + pointwise  # 253952
    assert unaligned_share(counted, 8, model) == pytest.approx((grouped4 + pointwise) / total)  # 32768 / 253952
