"""The RegNet search space: analytic = traced cost, pycls/torchvision width rules, seeded sampling, validation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from torchvision.models.regnet import BlockParams

import utilscope
from utilscope.errors import UsageError
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.spaces import get_space, list_spaces, regnet

SPACE = get_space("regnet")
BAND = (400e6, 1.6e9)
X_400MF = {
    "space": "regnet",
    "resolution": 224,
    "depth": 22,
    "w0": 24,
    "wa": 24.48,
    "wm": 2.54,
    "group_width": 16,
    "bottleneck_ratio": 1,
    "se": False,
}
# torchvision's RegNet configurations: (depth, w0, wa, wm, group width)
TORCHVISION_CONFIGS = {
    "regnet_x_400mf": (22, 24, 24.48, 2.54, 16),
    "regnet_x_800mf": (16, 56, 35.73, 2.28, 16),
    "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24),
    "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48),
    "regnet_x_8gf": (23, 80, 49.56, 2.88, 120),
    "regnet_y_400mf": (16, 48, 27.89, 2.09, 8),
    "regnet_y_800mf": (14, 56, 38.84, 2.4, 16),
    "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24),
    "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24),
    "regnet_y_8gf": (17, 192, 76.82, 2.19, 56),
}
# Where pycls's round-half-to-even differs from torchvision's _make_divisible (half up, and +g when rounding down
# loses more than 10%): regnet_x_400mf 392 / 16 = 24.5 -> 24 -> 384 (torchvision 400); regnet_y_800mf
# 136 / 16 = 8.5 -> 8 -> 128 (144) and 776 / 16 = 48.5 -> 48 -> 768 (784); regnet_y_8gf 192 / 56 = 3.43 -> 3 -> 168,
# under 0.9 x 192, so torchvision adds 56 (224).
PYCLS_WIDTHS = {
    "regnet_x_400mf": [32, 64, 160, 384],
    "regnet_y_800mf": [64, 128, 320, 768],
    "regnet_y_8gf": [168, 448, 896, 2016],
}


def _sampled() -> list[dict]:
    archs = sample_architectures(SPACE, 24, seed=3, flops_min=BAND[0], flops_max=BAND[1])
    small = sample_architectures(SPACE, 6, seed=5, flops_max=1e8)  # narrow stages: group widths capped at w / b
    return archs + [{**arch, "resolution": 193} for arch in small]  # an odd size: every stride-2 layer rounds up


SAMPLED = _sampled()


def test_registered():
    assert "regnet" in list_spaces() and SPACE is regnet.SPACE


def test_sampled_set_covers_the_choices():
    assert {arch["se"] for arch in SAMPLED} == {False, True}
    assert {arch["bottleneck_ratio"] for arch in SAMPLED} == set(regnet.BOTTLENECK_RATIOS)


@pytest.mark.parametrize("index", range(len(SAMPLED)))
def test_analytic_equals_traced(index):
    arch = SAMPLED[index]
    cost = SPACE.complexity(arch)
    traced = utilscope.count(SPACE.build(arch), batch=1, resolution=SPACE.resolution(arch))
    assert (traced.total.flops, traced.total.params) == (cost.flops, cost.params)
    assert not traced.unsupported


@pytest.mark.parametrize(
    "name, arch",
    [
        ("regnet_y_400mf", {**X_400MF, "depth": 16, "w0": 48, "wa": 27.89, "wm": 2.09, "group_width": 8, "se": True}),
        ("regnet_x_800mf", {**X_400MF, "depth": 16, "w0": 56, "wa": 35.73, "wm": 2.28}),
    ],
)
def test_matches_torchvision_model(name, arch):
    """Where the width rules agree, the record's network is torchvision's model: same FLOPs and params."""
    traced = utilscope.count(f"torchvision:{name}", batch=1, resolution=224)
    cost = SPACE.complexity(arch)
    assert (cost.flops, cost.params) == (traced.total.flops, traced.total.params)


@pytest.mark.parametrize("name", TORCHVISION_CONFIGS)
def test_stages_cross_check_torchvision(name):
    depth, w0, wa, wm, group_width = TORCHVISION_CONFIGS[name]
    reference = BlockParams.from_init_params(depth=depth, w_0=w0, w_a=wa, w_m=wm, group_width=group_width)
    derived = regnet.stages(
        {"depth": depth, "w0": w0, "wa": wa, "wm": wm, "group_width": group_width, "bottleneck_ratio": 1}
    )
    assert derived.depths == reference.depths
    assert derived.widths == PYCLS_WIDTHS.get(name, reference.widths)
    assert derived.group_widths == reference.group_widths
    assert regnet.stage_problem(derived) is None  # all published RegNets have 4 stages, one per width step


def test_regnet_x_400mf_record():
    derived = regnet.stages(SPACE.validate(X_400MF))
    assert (derived.widths, derived.depths) == ([32, 64, 160, 384], [1, 2, 7, 12])
    features = SPACE.features(X_400MF)
    assert features["stage4_width"] == 384 and features["stage3_depth"] == 7 and features["se"] == 0
    assert features["gflops"] == pytest.approx(SPACE.complexity(X_400MF).flops / 1e9)
    # groups per block: 32/16 once, 64/16 twice, 160/16 seven times, 384/16 twelve times
    assert features["groups_mean"] == pytest.approx((2 + 4 * 2 + 10 * 7 + 24 * 12) / 22)


def test_seeded_sampling_is_reproducible_and_in_band():
    first = sample_architectures(SPACE, 50, seed=0, flops_min=BAND[0], flops_max=BAND[1])
    again = sample_architectures(SPACE, 50, seed=0, flops_min=BAND[0], flops_max=BAND[1])
    other = sample_architectures(SPACE, 50, seed=1, flops_min=BAND[0], flops_max=BAND[1])
    assert first == again
    assert {a["id"] for a in first} != {a["id"] for a in other}
    assert len({a["id"] for a in first}) == 50
    assert all(BAND[0] <= SPACE.complexity(arch).flops <= BAND[1] for arch in first)
    assert all(json.loads(json.dumps(arch)) == arch for arch in first)
    assert all({**SPACE.validate(arch), "id": arch["id"], "seed": 0} == arch for arch in first)


def test_seed_zero_golden():
    """The same seed gives the same architectures on any machine (numpy's PCG64 stream, pure-Python widths)."""
    arch = SPACE.sample(np.random.default_rng(0))
    assert arch == {
        "space": "regnet",
        "resolution": 224,
        "depth": 23,
        "w0": 72,
        "wa": 32.4,
        "wm": 2.374,
        "group_width": 8,
        "bottleneck_ratio": 4,
        "se": False,
    }


def test_sample_needs_a_generator():
    with pytest.raises(UsageError, match="numpy.random.Generator"):
        SPACE.sample(0)
    with pytest.raises(UsageError, match="numpy.random.Generator"):
        SPACE.sample(np.random.RandomState(0))


def test_validate_normalizes():
    record = {**X_400MF, "wa": 24, "wm": 2.54049, "depth": np.int64(22), "id": "x", "seed": 3}
    canonical = SPACE.validate(record)
    assert canonical == {**X_400MF, "wa": 24.0, "wm": 2.54}
    assert type(canonical["depth"]) is int and type(canonical["wa"]) is float
    assert SPACE.validate(canonical) == canonical


@pytest.mark.parametrize(
    "change, message",
    [
        ({"depth": 11}, r"'depth': expected an integer in \[12, 28\]"),
        ({"depth": 22.0}, r"'depth': expected an integer"),
        ({"w0": 20}, r"'w0': expected an integer in \[8, 256\], a multiple of 8"),
        ({"wa": 300.0}, r"'wa': expected a number in \[8.0, 256.0\]"),
        ({"wa": float("nan")}, r"'wa': expected a number"),
        ({"wm": 1.2}, r"'wm': expected a number in \[1.5, 3.0\]"),
        ({"wm": "2.5"}, r"'wm': expected a number"),
        ({"group_width": 24}, r"'group_width': expected one of 1, 2, 4, 8, 16, 32"),
        ({"bottleneck_ratio": 3}, r"'bottleneck_ratio': expected one of 1, 2, 4"),
        ({"se": 1}, r"'se': expected true \(RegNetY\) or false \(RegNetX\)"),
        ({"resolution": 0}, r"'resolution': expected an integer in \[8, 4096\]"),
        ({"space": "mbv3"}, r"'space': expected 'regnet'"),
        ({"w_0": 24}, r"unknown field\(s\) 'w_0'"),
    ],
)
def test_validate_rejects_bad_fields(change, message):
    with pytest.raises(UsageError, match=message):
        SPACE.validate({**X_400MF, **change})


@pytest.mark.parametrize(
    "change",
    [
        {"depth": np.int64(22)},
        {"wa": 24},  # an int
        {"wm": 2.54049},  # more decimals than the record keeps
        {"se": 1},
        {"group_width": True},
        {"resolution": 224.0},
        {"w0": 20},  # not a multiple of 8
        {"space": "mbv3"},
        {"note": "x"},  # an unknown field
    ],
)
def test_only_canonical_records_skip_the_field_checks(change):
    """``validate`` keeps a canonical record's fields without checking them one by one; anything else, valid or not,
    goes through those checks."""
    assert regnet.is_canonical({**X_400MF, "id": "x", "seed": 3})
    assert not regnet.is_canonical({**X_400MF, **change})
    assert not regnet.is_canonical({k: v for k, v in X_400MF.items() if k != "wm"})
    assert not regnet.is_canonical([X_400MF])


def test_canonical_records_validate_as_the_field_checks_do():
    for arch in SAMPLED:
        assert regnet.is_canonical(arch)
        checked = SPACE.validate({**arch, "depth": np.int64(arch["depth"])})  # not canonical: checked field by field
        assert SPACE.validate(arch) == checked and type(checked["depth"]) is int


def _per_block_widths(wa: float, w0: int, wm: float, depth: int, q: int = regnet.WIDTH_QUANTUM):
    """The width rule block by block, one logarithm and power per block (a reference for ``generate_regnet``)."""
    steps = [round(math.log((j * wa + w0) / w0) / math.log(wm)) for j in range(depth)]
    block_widths = [round(w0 * wm ** float(k) / q) * q for k in steps]
    widths = sorted(set(block_widths))
    return widths, [block_widths.count(w) for w in widths], max(steps) + 1


def test_width_rule_equals_its_block_by_block_form():
    rng = np.random.default_rng(7)
    for _ in range(3000):
        arch = regnet.draw(rng)
        args = arch["wa"], arch["w0"], arch["wm"], arch["depth"]
        assert regnet.generate_regnet(*args) == _per_block_widths(*args)


def test_networks_equal_the_per_network_layers_cost_and_features():
    """``networks`` (all networks' layers as arrays, the predictor's path) gives each network the layers, FLOPs and
    features that ``layers``, ``complexity`` and ``features`` give it alone."""
    archs = [*SAMPLED, X_400MF]  # X_400MF's first stage has one block: no repeated block there
    networks = SPACE.networks(archs)
    assert len(set(networks.layers)) == len(networks.layers)
    assert networks.costs == [SPACE.layer_cost(layer.kind, layer.config) for layer in networks.layers]
    assert np.all(networks.count > 0) and np.all(np.diff(networks.network) >= 0)
    for index, arch in enumerate(archs):
        pairs = networks.network == index
        held = np.repeat(networks.layer[pairs], networks.count[pairs])  # the network's layers, repeats included
        assert [networks.layers[layer] for layer in held] == SPACE.layers(arch)
        assert networks.flops[index] == SPACE.complexity(arch).flops
        assert networks.features.iloc[index].to_dict() == SPACE.features(arch)
    assert list(networks.features.columns) == list(SPACE.features(X_400MF))


def test_validate_rejects_missing_fields_and_non_objects():
    with pytest.raises(UsageError, match="missing field\\(s\\) 'wm'"):
        SPACE.validate({k: v for k, v in X_400MF.items() if k != "wm"})
    with pytest.raises(UsageError, match="JSON object"):
        SPACE.validate([X_400MF])


@pytest.mark.parametrize(
    "change, stages",
    [
        ({"depth": 12, "w0": 256, "wa": 8.0, "wm": 3.0}, "1 stage"),  # widths 256 + 8j never reach 256 x 3^0.5
        ({"depth": 28, "w0": 8, "wa": 256.0, "wm": 1.5}, r"10 stage\(s\) from 18 width step"),
        # 4 widths, but the step from 16 skips 16 x 2.95 (k = 0, 2, 3, 4): not a 4-stage RegNet in pycls's sweeps
        ({"depth": 17, "w0": 16, "wa": 109.9, "wm": 2.95}, r"4 stage\(s\) from 5 width step"),
    ],
)
def test_validate_rejects_other_than_four_stages(change, stages):
    with pytest.raises(UsageError, match=f"{stages}.*exactly 4 stages"):
        SPACE.validate({**X_400MF, **change})
