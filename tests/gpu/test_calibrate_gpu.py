"""GPU-only behaviour of `utilscope calibrate`: a profile in timm's condition (amp, NCHW), run on the lent H200
(skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from utilscope.measure.settings import CudnnSettings
from utilscope.predict import calibrate as cal
from utilscope.predict import profile_rows
from utilscope.predict.ops import OpConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CONFIGS = [OpConfig("conv", 32, 64, 64, 28, 3), OpConfig("layer_norm", 32, 96, 96, 28)]


def test_an_amp_nchw_profile_times_its_configs_with_their_casts_and_keeps_its_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(cal, "sample_configs", lambda count, seed: CONFIGS[:count])
    out = tmp_path / "h200_amp_graph.json"
    profile = cal.open_profile("cuda", "amp", CudnnSettings(), seed=0, channels_last=False)
    assert profile.memory_format == "contiguous" and profile.precision == "amp"
    cal.calibrate(profile, len(CONFIGS), out, "cuda")
    assert not profile.failed and all(ms > 0 for ms in profile.latency_ms.values())
    fp16 = cal.time_op_ms(CONFIGS[0], torch.device("cuda"), cal.parse_precision("fp16"), CudnnSettings(), False)
    assert profile.latency_ms[CONFIGS[0].key] > fp16  # its fp32 weight is read and cast on every call
    kept = profile_rows.write_beside(out, cal.DeviceProfile.load(out))
    ops, _ = profile_rows.load(out)
    assert kept.is_file() and len(ops) == len(CONFIGS)  # each config one row, its casts folded in


def test_the_host_profile_times_every_call_kind_on_the_gpu_s_host():
    from utilscope.predict.host import CALL_KINDS, FORWARD
    from utilscope.predict.host_calibrate import calibrate_host

    host = calibrate_host("cuda")
    assert sorted(host.call_us) == sorted(CALL_KINDS) and host.device == torch.cuda.get_device_name()
    # a launch costs the host microseconds, a cuDNN conv more than a ReLU; the idle synchronize is no launch
    assert 1.0 < host.call_us["activation"] < host.call_us["conv"] < 1000.0
    assert 0.0 < host.call_us[FORWARD] < 1000.0
    # its calibration networks took about what their calls took alone: not orders of magnitude more or less
    assert len(host.chains) == 7 and 0.8 < host.scale < 3.0
