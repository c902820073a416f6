"""Design choices read from a model's count and modules (counting/design.py), on tiny closed-form models."""

import pytest
from torch import nn

from utilscope.counting.design import _aligned, activation_name, channels_per_group, design


class Rep(nn.Module):
    """A RepVGG-style block: a 3x3 and a 1x1 branch, summed; it can be re-parameterized."""

    def __init__(self, cin, cout):
        super().__init__()
        self.kxk, self.one = nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.Conv2d(cin, cout, 1, 2, bias=False)

    def forward(self, x):
        return self.kxk(x) + self.one(x)

    def reparameterize(self):
        pass


def test_shares_alignment_stem_depth_and_width_of_a_tiny_cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 4, 4, bias=False),
        nn.SiLU(),  # patchify stem: 8x8 -> 2x2
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),  # depthwise
        nn.Conv2d(8, 12, 1, bias=False),
        nn.ReLU(),
        nn.SiLU(),  # pointwise to 12 channels (not a multiple of 8)
        nn.Flatten(),
        nn.Linear(48, 16, bias=False),
    )
    found = design(model, resolution=8)
    stem, dw, pw, fc = 2 * 3 * 16 * 8 * 4, 2 * 9 * 8 * 4, 2 * 8 * 12 * 4, 2 * 48 * 16
    total = stem + dw + pw + fc
    assert found.dense_share == pytest.approx(stem / total) and found.depthwise_share == pytest.approx(dw / total)
    assert found.pointwise_share == pytest.approx(pw / total) and found.linear_share == pytest.approx(fc / total)
    assert found.grouped_share == 0 and not found.squeeze_excite and not found.reparameterizable
    # channels per group: stem 3->8 (3 is not aligned), dw 1->1, pw 8->12, fc 48->16 (aligned)
    assert found.aligned_share == pytest.approx(fc / total)
    assert (found.stem, found.patchify_stem, found.depth, found.activation) == ("k4s4", True, 4, "silu")
    assert found.width == pytest.approx((stem * 8 + dw * 8 + pw * 12 + fc * 16) / total)


def test_a_repvgg_block_is_reparameterizable_and_its_stem_is_the_3x3_branch():
    found = design(nn.Sequential(Rep(3, 8), nn.ReLU()), resolution=8)
    assert found.reparameterizable and found.stem == "k3s2" and not found.patchify_stem


@pytest.mark.parametrize("op, name", [("aten.silu_", "silu"), ("aten.hardtanh", "relu6"), ("aten.gelu", "gelu")])
def test_activation_names(op, name):
    assert activation_name(op) == name


def test_the_atlas_classes_networks_by_where_their_flops_are():
    """Attention anywhere: attention-hybrid; else depthwise convs at >= 0.5% of FLOPs; else grouped at >= 5%."""
    from torch import nn

    from utilscope.counting import count
    from utilscope.counting.architecture import conv_class

    class Hybrid(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3)

        def forward(self, x):
            tokens = self.conv(x).flatten(2).transpose(1, 2)
            return nn.functional.scaled_dot_product_attention(tokens, tokens, tokens)

    nets = {
        "dense": nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 16, 3)),
        "depthwise": nn.Sequential(nn.Conv2d(3, 16, 1), nn.Conv2d(16, 16, 3, groups=16), nn.Conv2d(16, 16, 1)),
        "grouped": nn.Sequential(nn.Conv2d(3, 16, 1), nn.Conv2d(16, 16, 3, groups=4), nn.Conv2d(16, 16, 1)),
        "attention-hybrid": Hybrid(),
    }
    assert {name: conv_class(count(net, resolution=16)) for name, net in nets.items()} == {n: n for n in nets}


@pytest.mark.parametrize(
    "module",
    [
        nn.Conv2d(3, 64, 7, 2),  # the stem: counted, 3 % 8 != 0
        nn.Conv2d(32, 32, 3, groups=32),  # depthwise: 1 channel per group, unaligned though 32 % 8 == 0
        nn.Conv2d(128, 128, 3, groups=32),  # ResNeXt: 4 per group
        nn.Conv2d(168, 168, 3, groups=7),  # RegNet: 24 per group
        nn.Conv2d(64, 30, 1),
        nn.Linear(48, 16),
    ],
)
def test_the_design_alignment_is_the_one_rule_as_the_tables_were_built(module):
    # the rule the stored tables were built with: every channel count per group a multiple of 8
    assert _aligned(module) == all(c % 8 == 0 for c in channels_per_group(module))
