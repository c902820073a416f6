"""Calibration (predict/ops.py, predict/calibrate.py): the seeded sample, the ops' shapes, a resumable profile."""

import collections

import pytest
import torch

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.measure.settings import CudnnSettings
from utilscope.predict import calibrate as cal
from utilscope.predict.ops import (
    KINDS,
    LARGE_MEMORY_OPS,
    MAX_ACTIVATION_ELEMENTS,
    SLICE_OPS,
    OpConfig,
    build_op,
    fits,
    quotas,
    sample_configs,
)

TINY = [
    OpConfig("conv", 2, 8, 16, 8, 3, 2, 1),
    OpConfig("conv", 1, 12, 12, 9, 5, 1, 12, 2),
    OpConfig("linear", 4, 24, 10),
    OpConfig("activation", 2, 8, 8, 6, variant="silu"),
    OpConfig("add", 2, 8, 8, 6),
    OpConfig("concat", 1, 8, 8, 4),
    OpConfig("se_gate", 2, 16, 16, 5),
    OpConfig("pool", 2, 8, 8, 7, 3, 2, variant="max"),
    OpConfig("pool", 1, 8, 8, 7, variant="global"),
    OpConfig("shuffle", 1, 8, 8, 4),
    OpConfig("cast", 2, 8, 8, 5, variant="up"),
    OpConfig("cast", 1, 8, 8, 4, variant="down"),
    OpConfig("batch_norm", 1, 8, 8, 4),
    OpConfig("layer_norm", 1, 8, 8, 4),
    OpConfig("mul", 1, 8, 8, 4),
    OpConfig("mul", 2, 8, 8, 4, variant="gate"),
    OpConfig("conv", 2, 8, 16, 8, 2, 2),
    OpConfig("pool", 1, 8, 8, 8, 2, 2, variant="avg"),
    OpConfig("linear", 2, 8, 16, 3),
    OpConfig("conv", 1, 8, 8, 9, 1, kernel_w=7),
    OpConfig("conv", 1, 8, 8, 9, 11, 1, 8, kernel_w=1),
    OpConfig("group_norm", 2, 24, 24, 5),
    OpConfig("chain", 2, 16, 16, 6, 3, groups=16, variant="gelu"),
    OpConfig("head", 2, 40, 10),
    OpConfig("large_conv", 1, 3, 8, 23, 11, 4),
    OpConfig("conv_head", 2, 16, 10, 3, 3),
    OpConfig("layout_copy", 2, 24, 24, 5),
    OpConfig("multiplier_conv", 1, 8, 16, 9, 3, 2, 8),
    OpConfig("grouped_stage", 2, 48, 48, 8, 3, 2, 2),
    OpConfig("narrow_grouped", 2, 16, 16, 8, 3, 2, 8),
    OpConfig("token_linear", 2, 8, 32, 3),
    OpConfig("radix_sum", 2, 16, 8, 5, groups=2),
    *(OpConfig("large_memory", 2, 32, 32, 5, variant=op) for op in LARGE_MEMORY_OPS),
    *(OpConfig("channel_slice", 2, 24, 8, 5, 3, variant=op, kernel_w=3) for op in ("gelu", "add", "cat", "gate")),
    OpConfig("channel_slice", 2, 24, 8, 9, 1, variant="band", kernel_w=7),
    OpConfig("channel_slice", 1, 24, 6, 5, 3, variant="depthwise", kernel_w=3),
]


def test_the_sample_is_seeded_distinct_within_bounds_and_stratified():
    sample = sample_configs(2000, seed=3)
    assert sample == sample_configs(2000, seed=3) and sample != sample_configs(2000, seed=4)
    assert len({c.key for c in sample}) == 2000 and all(fits(c) for c in sample)
    kinds = collections.Counter(c.kind for c in sample)
    assert kinds == quotas(2000) and sum(quotas(2000).values()) == 2000
    assert kinds["conv"] == 794 and kinds["head"] == 32  # 2000 x 0.5 / 1.26 and 2000 x 0.02 / 1.26, rounded
    # any prefix: the kinds' shares, give or take one; the convs' two (the small kinds' first configs, each half a
    # step in, come early)
    prefix = collections.Counter(c.kind for c in sample[:100])
    assert all(abs(prefix[kind] - quota) <= (2 if kind == "conv" else 1) for kind, quota in quotas(100).items())
    convs = [c for c in sample if c.kind == "conv"]
    styles = collections.Counter(
        "depthwise"
        if c.groups == c.channels
        else "grouped"
        if c.groups > 1
        else "pointwise"
        if c.kernel == 1
        else "dense"
        for c in convs
    )
    assert min(styles.values()) > 0.15 * len(convs)
    assert any(c.channels == 3 and c.stride > 1 for c in convs)  # stems
    assert any(c.kernel == c.stride == 2 for c in convs)  # patchify downsampling
    unaligned = sum(c.channels % 8 != 0 for c in sample) / len(sample)
    assert 0.1 < unaligned < 0.4
    assert any(c.kernel_w for c in convs)  # factorized and band kernels
    assert any(c.kind == "head" and c.channels > 2048 for c in sample)  # VGG's and AlexNet's wide FC layers
    assert any(c.kind == "large_conv" and c.kernel == 11 and c.channels == 3 for c in sample)  # AlexNet's stem
    assert all(c.kernel == c.size and c.out_size == 1 for c in sample if c.kind == "conv_head")  # no padding
    multiplied = [c for c in sample if c.kind == "multiplier_conv"]  # depthwise, 2 or 4 outputs per channel
    assert multiplied and all(c.groups == c.channels and c.out_channels // c.channels in (2, 4) for c in multiplied)
    grouped = [c for c in sample if c.kind == "grouped_stage"]  # any multiple-of-8 group width, stride 1 and 2
    assert all(c.groups >= 2 and (c.channels // c.groups) % 8 == 0 and c.kernel == 3 for c in grouped)
    assert {c.stride for c in grouped} == {1, 2} and len({c.channels // c.groups for c in grouped}) > 10
    narrow = [c for c in sample if c.kind == "narrow_grouped"]  # 2 or 3 channels a group, stride 1 and 2
    assert all(c.groups >= 2 and c.channels // c.groups in (2, 3) and c.kernel == 3 for c in narrow)
    assert {c.stride for c in narrow} == {1, 2} and {c.channels // c.groups for c in narrow} == {2, 3}
    pointwise = [c for c in sample if c.kind == "pointwise_depthwise"]  # 1x1 depthwise, stride 1 and 2
    assert all(c.groups == c.channels == c.out_channels and c.kernel == 1 and not c.kernel_w for c in pointwise)
    assert {c.stride for c in pointwise} == {1, 2}
    entries = [c for c in sample if c.kind == "grouped_entry"]  # a stage's first grouped conv: 3x3, stride 2
    assert all(c.groups >= 2 and (c.channels // c.groups) % 8 == 0 and (c.kernel, c.stride) == (3, 2) for c in entries)
    assert all(c.batch >= 64 and c.batch * c.channels * c.size**2 <= MAX_ACTIVATION_ELEMENTS for c in entries)
    assert len({c.channels // c.groups for c in entries}) > 5
    slices = [c for c in sample if c.kind == "channel_slice"]  # an op on a part of a tensor's channels
    variants = {c.variant for c in slices}
    assert variants <= set(SLICE_OPS) and len(variants) >= 5 and all(2 * c.out_channels <= c.channels for c in slices)
    bands = [c for c in slices if c.variant == "band"]
    assert bands and all(1 in (c.kernel, c.kernel_width) and max(c.kernel, c.kernel_width) in (7, 11) for c in bands)
    tokens = [c for c in sample if c.kind == "token_linear"]  # an MLP's layer on a stage's tokens, 4x up or down
    assert all(
        c.size > 1 and c.batch >= 32 and 4 in (c.out_channels / c.channels, c.channels / c.out_channels) for c in tokens
    )
    assert max(c.batch * c.size**2 for c in tokens) > 331_776  # more rows than the linear kind's largest
    radix = [c for c in sample if c.kind == "radix_sum"]  # (B, radix x C, H, W) -> (B, C, H, W)
    assert radix and all(c.channels == c.groups * c.out_channels and c.groups in (2, 4) for c in radix)
    large = [c for c in sample if c.kind == "large_memory"]  # beyond every other kind's 2^28 elements
    assert {c.variant for c in large} == set(LARGE_MEMORY_OPS)
    assert all(c.batch * c.channels * c.size**2 > MAX_ACTIVATION_ELEMENTS for c in large)
    assert "kernel_w" not in OpConfig("conv", 1, 8, 8, 9, 3).key  # keys drawn before kernel_w existed stay
    smaller = sample_configs(500, seed=3)
    for kind in KINDS:  # a larger count extends each kind's configs of a smaller one
        mine = [c for c in sample if c.kind == kind]
        assert [c for c in smaller if c.kind == kind] == mine[: quotas(500)[kind]]
    with pytest.raises(UsageError, match="at least 1"):
        sample_configs(0)


@pytest.mark.parametrize("config", TINY, ids=lambda c: c.kind)
def test_each_op_runs_on_its_inputs_with_the_output_its_config_says(config):
    module, shapes = build_op(config)
    out = module.eval()(*[torch.randn(shape) for shape in shapes])
    if config.kind in ("linear", "token_linear", "head"):
        tokens = (config.size, config.size) if config.size > 1 else ()
        assert tuple(out.shape) == (config.batch, *tokens, config.out_channels)
    else:
        channels = config.out_channels
        if config.kind == "concat":
            channels = 2 * config.channels
        elif config.kind == "channel_slice" and config.variant == "cat":  # its slice and the next as many channels
            channels = 2 * config.out_channels
        assert tuple(out.shape) == (config.batch, channels, config.out_size, config.out_size)


def test_ops_get_their_inputs_in_the_layout_a_network_feeds_them():
    fp16 = cal.parse_precision("fp16")
    linear, conv = OpConfig("linear", 2, 24, 10, size=5), OpConfig("conv", 2, 8, 16, 8, 3)
    (tokens,) = cal.op_inputs(linear, build_op(linear)[1], torch.device("cpu"), fp16)
    assert tokens.shape == (2, 5, 5, 24) and tokens.is_contiguous() and tokens.dtype == torch.float16
    (image,) = cal.op_inputs(conv, build_op(conv)[1], torch.device("cpu"), fp16)
    assert image.is_contiguous(memory_format=torch.channels_last) and not image.is_contiguous()
    (nchw_image,) = cal.op_inputs(conv, build_op(conv)[1], torch.device("cpu"), fp16, channels_last=False)
    assert nchw_image.is_contiguous()  # a profile in timm's condition (calibrate --no-channels-last)
    copy = OpConfig("layout_copy", 2, 8, 8, 8)  # its input NCHW, its output channels_last
    (nchw,) = cal.op_inputs(copy, build_op(copy)[1], torch.device("cpu"), fp16)
    assert nchw.is_contiguous() and build_op(copy)[0](nchw).is_contiguous(memory_format=torch.channels_last)
    amp = cal.parse_precision("amp_bf16")
    for direction, source, target in (("up", torch.bfloat16, torch.float32), ("down", torch.float32, torch.bfloat16)):
        cast = OpConfig("cast", 2, 8, 8, 8, variant=direction)  # between fp32 and the activations' dtype
        image, like = cal.op_inputs(cast, build_op(cast)[1], torch.device("cpu"), amp)
        assert image.dtype == source and image.is_contiguous(memory_format=torch.channels_last)
        assert build_op(cast)[0](image, like).dtype == target
    fp32_up = OpConfig("cast", 1, 8, 8, 4, variant="up")  # fp32 activations: a cast from fp16
    assert [
        t.dtype for t in cal.op_inputs(fp32_up, build_op(fp32_up)[1], torch.device("cpu"), cal.parse_precision("fp32"))
    ] == [torch.float16, torch.float32]


def test_cold_copies_cover_twice_the_l2_cache_at_most_one_per_call():
    assert cal.cold_copy_count(10 << 20, 50 << 20) == 10
    assert cal.cold_copy_count(200 << 20, 50 << 20) == 1
    assert cal.cold_copy_count(1 << 10, 50 << 20) == cal.REPEATS
    assert cal.cold_copy_count(0, 50 << 20) == 1
    module = torch.nn.Linear(4, 4)
    assert cal.cold_copies(module, torch.device("cpu")) == [module]


@pytest.fixture()
def tiny_sample(monkeypatch):
    monkeypatch.setattr(cal, "sample_configs", lambda count, seed: TINY[:count])


def test_calibration_times_each_config_records_failures_and_resumes(tmp_path, tiny_sample, monkeypatch):
    out = tmp_path / "profile.json"
    profile = cal.open_profile("cpu", "fp32", CudnnSettings(), seed=0)
    real, timed = cal.time_op_ms, []

    def timing(config, *args):
        timed.append(config.key)
        if config.kind == "se_gate":
            raise MemoryError()
        return real(config, *args)

    monkeypatch.setattr(cal, "time_op_ms", timing)
    cal.calibrate(profile, 8, out, "cpu")
    assert len(timed) == 8 and len(profile.latency_ms) == 7 and all(ms > 0 for ms in profile.latency_ms.values())
    assert list(profile.failed.values()) == ["oom: MemoryError: "]
    loaded = cal.DeviceProfile.load(out)
    assert loaded.latency_ms == profile.latency_ms and loaded.environment["device_type"] == "cpu"
    assert loaded.environment["memory_format"] == "channels_last"
    nchw = cal.open_profile("cpu", "fp32", CudnnSettings(), seed=0, channels_last=False)
    assert nchw.memory_format == nchw.environment["memory_format"] == "contiguous"  # the environment says it too
    loaded.sample_version = 2  # timed by an earlier sampler: what it timed stays, the new sample's rest is timed
    again = cal.open_profile("cpu", "fp32", CudnnSettings(), seed=0, existing=loaded)
    assert again.sample_version == cal.SAMPLE_VERSION
    cal.calibrate(again, 10, out, "cpu")
    assert len(timed) == 10 and len(again.latency_ms) == 9  # only the two configs it lacked
    with pytest.raises(UsageError, match="the existing profile is for .* seed 0, not .* seed 1"):
        cal.open_profile("cpu", "fp32", CudnnSettings(), seed=1, existing=loaded)
    with pytest.raises(UsageError, match="channels_last, .* not .* contiguous"):
        cal.open_profile("cpu", "fp32", CudnnSettings(), seed=0, existing=loaded, channels_last=False)


def test_the_calibrate_command(tmp_path, tiny_sample, capsys):
    out = tmp_path / "p.json"
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--count", "3"]) == 0
    assert "3 configurations timed, 0 failed" in capsys.readouterr().out
    assert main(["calibrate", "--out", str(tmp_path / "p.txt"), "--device", "cpu"]) == 2
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--count", "0"]) == 2
    (tmp_path / "bad.json").write_text("{}")
    assert main(["calibrate", "--out", str(tmp_path / "bad.json"), "--device", "cpu", "--count", "1"]) == 2
    assert "not a device profile" in capsys.readouterr().err


def test_an_interrupted_calibration_keeps_what_it_timed(tmp_path, tiny_sample, monkeypatch, capsys):
    out, calls = tmp_path / "p.json", []

    def timing(config, *args):
        calls.append(config.key)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return 0.5

    monkeypatch.setattr(cal, "time_op_ms", timing)
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--count", "5"]) == 130
    assert "interrupted: 2 configurations timed and 0 failed are kept in" in capsys.readouterr().err
    kept = cal.DeviceProfile.load(out)
    assert len(kept.latency_ms) == len(kept.configs) == 2  # the config in flight left no trace
