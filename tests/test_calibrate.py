"""Calibration (predict/ops.py, predict/calibrate.py): the seeded sample, the ops' shapes, a resumable profile."""

import collections

import pytest
import torch

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.measure.settings import CudnnSettings
from utilscope.predict import calibrate as cal
from utilscope.predict.ops import KINDS, OpConfig, build_op, fits, sample_configs

TINY = [OpConfig("conv", 2, 8, 16, 8, 3, 2, 1), OpConfig("conv", 1, 12, 12, 9, 5, 1, 12, 2),
        OpConfig("linear", 4, 24, 10), OpConfig("activation", 2, 8, 8, 6, variant="silu"),
        OpConfig("add", 2, 8, 8, 6), OpConfig("concat", 1, 8, 8, 4), OpConfig("se_gate", 2, 16, 16, 5),
        OpConfig("pool", 2, 8, 8, 7, 3, 2, variant="max"), OpConfig("pool", 1, 8, 8, 7, variant="global"),
        OpConfig("shuffle", 1, 8, 8, 4), OpConfig("batch_norm", 1, 8, 8, 4), OpConfig("layer_norm", 1, 8, 8, 4),
        OpConfig("mul", 1, 8, 8, 4)]  # fmt: skip


def test_the_sample_is_seeded_distinct_within_bounds_and_stratified():
    sample = sample_configs(2000, seed=3)
    assert sample == sample_configs(2000, seed=3) and sample != sample_configs(2000, seed=4)
    assert len({c.key for c in sample}) == 2000 and all(fits(c) for c in sample)
    kinds = collections.Counter(c.kind for c in sample)
    assert set(kinds) == set(KINDS) and 0.4 < kinds["conv"] / 2000 < 0.55
    convs = [c for c in sample if c.kind == "conv"]
    styles = collections.Counter("depthwise" if c.groups == c.channels else "grouped" if c.groups > 1
                                 else "pointwise" if c.kernel == 1 else "dense" for c in convs)  # fmt: skip
    assert min(styles.values()) > 0.15 * len(convs)
    unaligned = sum(c.channels % 8 != 0 for c in sample) / len(sample)
    assert 0.2 < unaligned < 0.4
    with pytest.raises(UsageError, match="at least 1"):
        sample_configs(0)


@pytest.mark.parametrize("config", TINY, ids=lambda c: c.kind)
def test_each_op_runs_on_its_inputs_with_the_output_its_config_says(config):
    module, shapes = build_op(config)
    out = module.eval()(*[torch.randn(shape) for shape in shapes])
    if config.kind == "linear":
        assert tuple(out.shape) == (config.batch, config.out_channels)
    else:
        channels = 2 * config.channels if config.kind == "concat" else config.out_channels
        assert tuple(out.shape) == (config.batch, channels, config.out_size, config.out_size)


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
    again = cal.open_profile("cpu", "fp32", CudnnSettings(), seed=0, existing=loaded)
    cal.calibrate(again, 10, out, "cpu")
    assert len(timed) == 10  # only the two configs it lacked
    with pytest.raises(UsageError, match="the existing profile is for .* seed 0, not .* seed 1"):
        cal.open_profile("cpu", "fp32", CudnnSettings(), seed=1, existing=loaded)


def test_the_calibrate_command(tmp_path, tiny_sample, capsys):
    out = tmp_path / "p.json"
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--count", "3"]) == 0
    assert "3 configurations timed, 0 failed" in capsys.readouterr().out
    assert main(["calibrate", "--out", str(tmp_path / "p.txt"), "--device", "cpu"]) == 2
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--count", "0"]) == 2
    (tmp_path / "bad.json").write_text("{}")
    assert main(["calibrate", "--out", str(tmp_path / "bad.json"), "--device", "cpu", "--count", "1"]) == 2
    assert "not a device profile" in capsys.readouterr().err
