"""The ``mbv3`` search space: analytic complexity equals the traced count, seeded sampling, record validation."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import utilscope
from utilscope.errors import UsageError
from utilscope.nas.sampler import load_jsonl, sample_architectures, save_jsonl
from utilscope.nas.space import arch_id
from utilscope.nas.spaces import get_space, list_spaces, mbv3

SPACE = get_space("mbv3")
SMALLEST = mbv3.uniform_arch(resolution=128, depth=2, kernel_size=3, expand_ratio=3)
LARGEST = mbv3.uniform_arch(resolution=224, depth=4, kernel_size=7, expand_ratio=6)
SAMPLED = sample_architectures(SPACE, 30, seed=1234)


def test_registered():
    assert "mbv3" in list_spaces("mb*")
    assert SPACE is mbv3.SPACE and SPACE.name == "mbv3"


@pytest.mark.parametrize(
    "arch", [SMALLEST, LARGEST, *SAMPLED], ids=["smallest", "largest", *(a["id"] for a in SAMPLED)]
)
def test_analytic_complexity_equals_traced_count(arch):
    traced = utilscope.count(SPACE.build(arch), batch=1, resolution=SPACE.resolution(arch))
    analytic = SPACE.complexity(arch)
    assert traced.traced_on == "meta" and not traced.unsupported
    assert (analytic.flops, analytic.params) == (traced.total.flops, traced.total.params)


def test_conv_cost_closed_form():
    # stem at 224: 3x3 conv 3->16 stride 2 -> 112x112; flops = 2 x 112^2 x 16 x 3 x 3^2 = 10_838_016;
    # params = 16 x 3 x 9 weights + 2 x 16 BN = 464
    assert mbv3.conv_cost(224, 3, 16, 3, stride=2, bn=True) == (112, 10_838_016, 464)
    # depthwise 7x7 stride 2 on 13x13 (208 / 16): padding 3 -> 7x7 out; 2 x 49 x 480 x 1 x 49 = 2_304_960
    assert mbv3.conv_cost(13, 480, 480, 7, stride=2, groups=480) == (7, 2_304_960, 480 * 49)


def test_flops_range_of_the_space():
    # golden values (checked against the traced count above); OFA's largest subnet has ~7.7 M params
    assert SPACE.complexity(SMALLEST) == mbv3.Complexity(flops=82_952_448, params=3_410_792)
    assert SPACE.complexity(LARGEST) == mbv3.Complexity(flops=1_132_341_312, params=7_664_760)
    assert all(SPACE.complexity(SMALLEST).flops <= SPACE.complexity(a).flops <= 1_132_341_312 for a in SAMPLED)


def test_squeeze_excite_layers_are_se_gates():
    traced = utilscope.count(SPACE.build(SMALLEST), batch=1, resolution=128)
    se_flops = sum(layer.flops for layer in traced.layers if layer.op_class == "se_gate")
    se_blocks = [block for block in mbv3.blocks(SMALLEST) if block.use_se]
    assert {block.out_channels for block in se_blocks} == {40, 112, 160}
    # each SE: 1x1 convs mid->se and se->mid on the pooled 1x1 map: 2 x 2 x mid x se flops
    assert se_flops == sum(4 * block.mid_channels * block.se_channels for block in se_blocks)


def test_built_network_runs_on_cpu():
    model = SPACE.build(SMALLEST).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 128, 128)).shape == (1, 1000)


def test_sampling_is_seeded_deduplicated_and_canonical():
    first = sample_architectures(SPACE, 50, seed=0)
    assert first == sample_architectures(SPACE, 50, seed=0)
    assert first != sample_architectures(SPACE, 50, seed=1)
    assert len({arch["id"] for arch in first}) == 50
    for arch in first:
        assert arch["seed"] == 0 and arch["id"] == arch_id(SPACE.validate(arch))
        assert SPACE.validate(arch) == {k: v for k, v in arch.items() if k not in ("id", "seed")}
        assert [len(stage) for stage in arch["kernel_sizes"]] == arch["depths"]
    # golden: numpy's PCG64 stream is the same on every platform, so these ids are too
    assert [arch["id"] for arch in first[:3]] == ["87217a69e9f64d96", "e0bcb4c3f7c27a16", "fdd9a72d22b73092"]
    assert json.loads(json.dumps(first)) == first


def test_the_committed_h200_architectures_keep_their_ids():
    """The H200 dataset was sampled from 5 of the 25 resolutions: every record still validates to its id."""
    archs = load_jsonl(Path(__file__).parents[1] / "data" / "h200" / "mbv3_archs.jsonl", "mbv3")
    assert len(archs) == 600 and {arch["resolution"] for arch in archs} == {160, 176, 192, 208, 224}
    assert all(arch_id(arch) == arch["id"] for arch in archs)
    assert set(mbv3.RESOLUTIONS) == set(range(128, 225, 4))


def test_sample_uses_only_the_given_generator():
    a, b = SPACE.sample(np.random.default_rng(7)), SPACE.sample(np.random.default_rng(7))
    assert a == b and all(type(v) is int for v in [a["resolution"], *a["depths"], *sum(a["kernel_sizes"], [])])


def test_flops_band():
    low, high = 300e6, 400e6
    archs = sample_architectures(SPACE, 20, seed=3, flops_min=low, flops_max=high)
    assert len(archs) == 20 and all(low <= SPACE.complexity(arch).flops <= high for arch in archs)
    with pytest.raises(UsageError, match="FLOPs band"):
        sample_architectures(SPACE, 3, seed=0, flops_max=60e6)  # below the smallest network (83 MFLOPs)


def test_same_network_same_canonical_record():
    active = copy.deepcopy(SAMPLED[0])
    del active["id"], active["seed"]
    max_depth = copy.deepcopy(active)  # OFA style: 4 entries per stage whatever the depth, numpy ints
    for field in ("kernel_sizes", "expand_ratios"):
        max_depth[field] = [[np.int64(v) for v in stage] + [3] * (4 - len(stage)) for stage in active[field]]
    assert SPACE.validate(max_depth) == SPACE.validate(active) == active
    assert arch_id(SPACE.validate(max_depth)) == SAMPLED[0]["id"]


def _broken(edit):
    arch = copy.deepcopy(SMALLEST)
    edit(arch)
    return arch


@pytest.mark.parametrize(
    ("arch", "message"),
    [
        ([1, 2], "JSON object"),
        (_broken(lambda a: a.pop("depths")), "missing field.*'depths'"),
        (_broken(lambda a: a.update(widths=[1])), "unknown field.*'widths'"),
        (_broken(lambda a: a.update(space="regnet")), "'space'.*'mbv3'.*'regnet'"),
        (_broken(lambda a: a.update(resolution=225)), "'resolution'.*128, 132, 136, .*, 220, 224.*225"),
        (_broken(lambda a: a.update(resolution="224")), "'resolution'.*128.*'224'"),
        (_broken(lambda a: a.update(resolution=True)), "'resolution'.*128"),
        (_broken(lambda a: a.update(depths=(2, 2, 2, 2, 2))), "'depths'.*a list of 5 entries"),
        (_broken(lambda a: a.update(depths=[2, 2, 2, 2])), "'depths'.*a list of 5 entries"),
        (_broken(lambda a: a["depths"].__setitem__(1, 5)), r"'depths\[1\]'.*2, 3, 4.*5"),
        (_broken(lambda a: a["kernel_sizes"][0].__setitem__(1, 9)), r"'kernel_sizes\[0\]\[1\]'.*3, 5, 7.*9"),
        (_broken(lambda a: a["kernel_sizes"][2].__setitem__(0, 3.0)), r"'kernel_sizes\[2\]\[0\]'.*3, 5, 7"),
        (_broken(lambda a: a["kernel_sizes"][3].append(3)), r"'kernel_sizes\[3\]'.*list of 2 or 4 entries"),
        (_broken(lambda a: a.update(kernel_sizes=[3] * 5)), r"'kernel_sizes\[0\]'.*list of 2 or 4 entries"),
        (_broken(lambda a: a.update(kernel_sizes="3")), "'kernel_sizes'.*a list of 5 entries"),
        (_broken(lambda a: a["expand_ratios"][4].__setitem__(1, 5)), r"'expand_ratios\[4\]\[1\]'.*3, 4, 6.*5"),
    ],
)
def test_validate_names_the_bad_field(arch, message):
    with pytest.raises(UsageError, match=message):
        SPACE.validate(arch)
    with pytest.raises(UsageError, match=message):
        SPACE.complexity(arch)


def test_features():
    features = SPACE.features(SAMPLED[0])
    arch, cost = SAMPLED[0], SPACE.complexity(SAMPLED[0])
    assert all(type(value) is float for value in features.values())
    assert features["depth"] == sum(arch["depths"]) == sum(features[f"stage{i}_depth"] for i in range(1, 6))
    assert features["resolution"] == arch["resolution"]
    assert features["stage2_kernel_size_mean"] == np.mean(arch["kernel_sizes"][1])
    assert features["gflops"] == cost.flops / 1e9 and features["mparams"] == cost.params / 1e6
    assert SPACE.features(LARGEST)["kernel_size_mean"] == 7.0 and SPACE.features(LARGEST)["expand_ratio_mean"] == 6.0


def test_save_load_round_trip(tmp_path):
    path = save_jsonl(tmp_path / "archs.jsonl", SAMPLED)
    assert load_jsonl(path) == SAMPLED
    assert load_jsonl(path, space_name="mbv3") == SAMPLED


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"space": "mbv3", ', "not JSON"),
        ('{"resolution": 224}', "'space' field"),
        ('["mbv3"]', "'space' field"),
        (json.dumps({**SMALLEST, "space": "nope"}), "unknown search space 'nope'"),
        (json.dumps({**SMALLEST, "kernel_sizes": [[9, 3]] * 5}), r"'kernel_sizes\[0\]\[0\]'.*3, 5, 7"),
        (json.dumps({k: v for k, v in SMALLEST.items() if k != "resolution"}), "missing field.*'resolution'"),
    ],
)
def test_load_jsonl_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "archs.jsonl"
    path.write_text(json.dumps(SMALLEST) + "\n\n" + line + "\n")
    with pytest.raises(UsageError, match=f"archs.jsonl:3: .*{message}"):
        load_jsonl(path)


def test_load_jsonl_rejects_another_space(tmp_path):
    path = tmp_path / "archs.jsonl"
    path.write_text(json.dumps({"space": "regnet"}) + "\n")
    with pytest.raises(UsageError, match="archs.jsonl:1: .*'regnet', expected 'mbv3'"):
        load_jsonl(path, space_name="mbv3")


def test_an_architecture_file_is_read_by_one_rule_with_and_without_the_spaces(tmp_path):
    """``arch_files.read_lines`` (no space imported: the command line's check while parsing) says what
    ``load_jsonl`` says of a file that is not one of architectures, and ``check_architecture`` what ``nas.source``
    says of an id the file lacks."""
    from utilscope.nas import arch_files
    from utilscope.nas.source import read_record

    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(SAMPLED[0]) + "\n\n" + json.dumps({"id": "x"}) + "\n")
    for read in (arch_files.read_lines, load_jsonl):
        with pytest.raises(UsageError, match=r"a\.jsonl:3: an architecture must be a JSON object with a 'space'"):
            read(path)
    path.write_text(json.dumps(SAMPLED[0]) + "\n")
    assert [record for _, record in arch_files.read_lines(path)] == [SAMPLED[0]]
    for check in (arch_files.check_architecture, read_record):
        with pytest.raises(UsageError, match=r"no architecture with id 'nope' in .*a\.jsonl \(1 architectures\)"):
            check(str(path), "nope")
    arch_files.check_architecture(path, SAMPLED[0]["id"])
