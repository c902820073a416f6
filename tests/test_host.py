"""The host side of eager PyTorch (``predict.host``): call kinds, the two timelines in closed form, the host
calibration on the CPU, and eager predictions with a host profile."""

import json
import textwrap
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import load_script

from utilscope.cli import main
from utilscope.counting.counter import count_traced
from utilscope.errors import UsageError
from utilscope.predict import host_calibrate, host_chains, profiles
from utilscope.predict.host import (
    CALL_KINDS,
    FORWARD,
    MODULE,
    SPLIT,
    HostProfile,
    container_calls,
    eager_timing,
    host_ms,
    issued_ms,
    layer_calls,
    load_host,
)
from utilscope.predict.run import PredictRequest, predict_networks

NET = textwrap.dedent("""
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(8)

        def forward(self, x):
            return self.bn(self.conv(x)) + x

    def net():
        return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), Block(), nn.ReLU())
""")


def unit_host(**call_us) -> HostProfile:
    """A host whose every call costs 1 µs, but those given."""
    return HostProfile("a CPU", "2.0", "NVIDIA H100 80GB HBM3", {kind: call_us.get(kind, 1.0) for kind in CALL_KINDS})


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tmp_path_factory.mktemp("net") / "net.py"
    path.write_text(NET)
    _, recorded = count_traced(f"{path}:net", 1, 8, "fp32", channels_last=False)
    return recorded


def test_a_forward_ends_when_both_timelines_are_done():
    issued = np.array([1.0, 2.0, 3.0])  # the host issues a kernel each ms
    # a GPU faster than the host waits for each launch: the last kernel starts at 3 and ends at 3.5
    fast = eager_timing(issued, np.array([0.5, 0.5, 0.5]), 3.2, 0.1)
    assert fast.latency_ms == pytest.approx(3.5 + 0.1)
    assert fast.per_forward_ms == pytest.approx(3.2) and fast.bound == "host"
    # a slower GPU runs back to back from the first launch: 1 + 3 x 2 ms
    slow = eager_timing(issued, np.array([2.0, 2.0, 2.0]), 3.2, 0.1)
    assert slow.latency_ms == pytest.approx(7.0 + 0.1)
    assert slow.per_forward_ms == pytest.approx(6.0) and slow.bound == "device"


def test_a_layer_s_calls_are_its_module_call_and_its_ops(traced):
    calls = layer_calls(traced)
    kinds = [sorted(c) for c in calls]
    assert ["conv", MODULE] in kinds  # a Conv2d: its module call and its conv
    assert ["elementwise"] in kinds  # the block's functional add: no module call
    assert all(kind in CALL_KINDS for c in calls for kind in c)
    assert container_calls(traced) == 2  # the Sequential and the Block above the leaves


def test_the_host_time_is_the_calls_by_kind(traced):
    host = unit_host(conv=10.0)
    layer_ms, containers_ms = host_ms(host, traced)
    convs = sum(kinds.count("conv") for kinds in layer_calls(traced))
    total_calls = sum(len(kinds) for kinds in layer_calls(traced))
    assert layer_ms.sum() == pytest.approx((total_calls + 9 * convs) / 1e3)
    assert containers_ms == pytest.approx(2 / 1e3)
    fast = host_ms(host.at_speed(2.0), traced)
    assert fast[0].sum() == pytest.approx(layer_ms.sum() / 2)
    issued = issued_ms([(0,), (len(layer_ms) - 1,)], layer_ms, containers_ms)
    assert issued[-1] == pytest.approx(layer_ms.sum() + containers_ms)


GROUPED = textwrap.dedent("""
    from torch import nn

    def net():  # 3x3 convs: 2 channels a group at 8 groups, depthwise, dense; a 1x1 one of 8 groups
        return nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=8), nn.Conv2d(16, 16, 3, 1, 1, groups=16),
                             nn.Conv2d(16, 16, 3, 1, 1), nn.Conv2d(16, 16, 1, groups=8))
""")
# cuDNN's kernels a call of 2-channel groups: one a group at 8 groups, one kernel at 128; 3 a group of 16 channels
KERNELS = (
    {"group_width": 2, "groups": 8, "size": 7, "kernels": 8},
    {"group_width": 2, "groups": 128, "size": 7, "kernels": 1},
    {"group_width": 16, "groups": 2, "size": 14, "kernels": 6},
    {"group_width": 16, "groups": 2, "size": 56, "kernels": 1},
)


def test_a_3x3_grouped_conv_adds_a_split_kind_priced_as_the_kernels_beyond_its_first(tmp_path):
    path = tmp_path / "grouped.py"
    path.write_text(GROUPED)
    _, recorded = count_traced(f"{path}:net", 1, 8, "fp32", channels_last=False)
    splits = [kind for kinds in layer_calls(recorded) for kind in kinds if kind.startswith(SPLIT)]
    assert splits == [f"{SPLIT}:2:8:8"]  # not the depthwise, dense or 1x1 convs
    host = replace(unit_host(), conv_kernels=KERNELS, split_kernel_us=5.0, scale=2.0)
    assert host.call_ms(splits[0]) == pytest.approx(7 * 5.0 * 2.0 / 1e3)  # 8 kernels: 7 beyond the first
    assert unit_host().call_ms(splits[0]) == 0.0  # a profile without the table: one kernel
    assert host.calls_ms({"conv": 2, splits[0]: 3}) == pytest.approx(2 * 2.0 / 1e3 + 3 * 0.07)
    assert "grouped convs by their kernels (4 counted)" in host.describe()


def test_a_grouped_conv_s_kernels_are_the_nearest_row_s_of_its_group_width():
    host = replace(unit_host(), conv_kernels=KERNELS)
    assert host.kernels_a_call(2, 8, 7) == 8
    assert host.kernels_a_call(2, 16, 28) == 16  # nearest: 8 groups (one kernel a group), times 16 groups
    assert host.kernels_a_call(2, 100, 7) == 1  # nearer 128 groups than 8 in log2: one kernel
    assert host.kernels_a_call(16, 4, 14) == 12  # 3 a group
    assert host.kernels_a_call(16, 2, 56) == 1  # the same convs at another size
    assert host.kernels_a_call(4, 8, 7) == 1  # no row of 4 channels a group


def test_the_calibration_counts_the_grid_s_kernels_and_times_a_split_kernel(monkeypatch, tmp_path):
    monkeypatch.setattr(host_calibrate, "grouped_call", lambda width, groups, size, device, dtype: (width, groups))
    monkeypatch.setattr(host_calibrate, "count_kernels", lambda call, device: call[1] if call[0] == 2 else 1)
    rows = host_calibrate.conv_kernel_rows(torch.device("cpu"), torch.float16)
    pairs = {(row["group_width"], row["groups"]) for row in rows}
    assert all(width * groups <= host_calibrate.KERNEL_CHANNELS for width, groups in pairs)
    assert (128, 16) in pairs and (128, 32) not in pairs and len(rows) == 4 * len(pairs)
    # the host time of a call: 20 us for one kernel, 7 us more a kernel
    timed = []

    def interleaved(cases, device, calls):
        timed.append(calls)
        return {name: 20.0 + 7.0 * (call[1] - 1) for name, call in cases.items()}

    monkeypatch.setattr(host_calibrate, "interleaved_us", interleaved)
    assert host_calibrate.split_kernel_us(rows, torch.device("cpu"), torch.float16) == pytest.approx(7.0)
    # six convs spread over the 44 split ones (4-128 kernels, each at four sizes): 4, 6, 12, 24, 48 and 64 kernels, as
    # many calls a sample as keep 64-kernel calls within the launch queue
    assert timed == [host_calibrate.QUEUE_KERNELS // 64]
    assert host_calibrate.split_kernel_us([r for r in rows if r["kernels"] == 1], None, None) == 0.0
    monkeypatch.setattr(host_calibrate, "conv_kernel_rows", lambda device, dtype: rows)
    host = host_calibrate.with_conv_kernels(unit_host(), torch.device("cpu"), torch.float16)
    assert host.conv_kernels == tuple(rows) and host.split_kernel_us == pytest.approx(7.0)
    assert host.kernels_source.startswith("calibrate --host, ") and host.kernels_source.endswith(", batch 1")
    assert load_host(host.save(tmp_path / "host.json")) == host


def test_calibrate_host_prints_how_many_grouped_convs_split(monkeypatch, tmp_path, capsys):
    host = replace(unit_host(), conv_kernels=KERNELS[:2], split_kernel_us=5.0, kernels_source="a GPU")
    monkeypatch.setattr(host_calibrate, "calibrate_host", lambda device, on_kind: host)
    assert main(["calibrate", "--host", "--out", str(tmp_path / "host.json")]) == 0
    out = capsys.readouterr().out
    assert "grouped 3x3 convs: 1 of 2 run more than one kernel a call (up to 8), 5.00 µs a kernel beyond" in out
    assert load_host(tmp_path / "host.json") == host


def test_a_sweep_s_grouped_rows_become_a_host_profile_s_table(tmp_path, capsys):
    """``scripts/attach_conv_kernels.py``: the sweep's grouped rows of cuDNN's heuristics (not dense, depthwise or
    autotuned ones); its host's microseconds a kernel beyond the first carried by the ratio of one-kernel calls."""
    sweep = pd.DataFrame(
        [  # channels, group width, groups, size, kernels a call, cuDNN autotuning, host us
            (16, "2 a group", 8, 7, 8.0, False, 20.0 + 7 * 10.0),
            (32, "2 a group", 16, 7, 16.0, False, 20.0 + 15 * 10.0),
            (32, "2 a group", 16, 7, 16.0, True, 999.0),
            (256, "2 a group", 128, 7, 1.0, False, 20.0),
            (64, "dense", 1, 7, 1.0, False, 20.0),
            (64, "1 a group", 64, 7, 1.0, False, 20.0),
        ],
        columns=["channels", "group_width", "groups", "size", "kernels_a_call", "cudnn_benchmark", "host_us"],
    )
    sweep.to_csv(tmp_path / "sweep.csv", index=False)
    unit_host(conv=39.0).save(tmp_path / "host.json")  # 39 + 1 us a module call: twice the sweep's one-kernel call
    script = load_script("scripts/attach_conv_kernels.py")
    script.main([str(tmp_path / "sweep.csv"), str(tmp_path / "host.json"), "--source", "a sweep"])
    host = load_host(tmp_path / "host.json")
    assert [(row["groups"], row["kernels"]) for row in host.conv_kernels] == [(8, 8), (16, 16), (128, 1)]
    assert host.split_kernel_us == pytest.approx(20.0) and host.kernels_source.startswith("a sweep; 10.00 us")
    assert "3 grouped convs, 2 of them split; 20.00 us a kernel" in capsys.readouterr().out


def test_a_host_speed_out_of_range_is_a_usage_error():
    with pytest.raises(UsageError, match="outside 0.2-5"):
        unit_host().at_speed(20.0)


def test_the_host_calibration_on_the_cpu_times_every_kind(monkeypatch, tmp_path):
    monkeypatch.setattr(host_calibrate, "CALLS", 5)
    monkeypatch.setattr(host_calibrate, "SAMPLES", 2)
    monkeypatch.setattr(host_calibrate, "WARMUP_CALLS", 1)
    told = []
    monkeypatch.setattr(host_calibrate, "CHAIN_FORWARDS", 2)
    host = host_calibrate.calibrate_host("cpu", lambda kind, us: told.append(kind))
    assert sorted(told) == sorted(CALL_KINDS) and all(us >= 0 for us in host.call_us.values())
    # every calibration network traced and timed; the scale is their median ratio
    assert [row["chain"] for row in host.chains] == list(host_chains.chains())
    assert all(row["calls"] > 10 and row["measured_ms"] > 0 and row["summed_ms"] > 0 for row in host.chains)
    assert host.scale == host_calibrate.composition_scale(list(host.chains)) > 0
    saved = host.save(tmp_path / "host.json")
    assert load_host(saved) == host


def test_the_calibration_times_its_cases_in_rounds_each_round_every_case_in_turn(monkeypatch):
    """A slow spell of the host falls on every kind alike: after each case's warm-up, every round samples each case
    once, in turn, and each case's time is the median of its rounds."""
    monkeypatch.setattr(host_calibrate, "SAMPLES", 3)
    monkeypatch.setattr(host_calibrate, "WARMUP_CALLS", 1)
    order = []
    cases = {name: (lambda name=name: order.append(name)) for name in ("conv", "norm")}
    times = iter([1.0, 10.0, 3.0, 30.0, 2.0, 20.0])  # per call: conv, norm; conv, norm; conv, norm
    monkeypatch.setattr(host_calibrate, "_sample_us", lambda call, device, calls: (call(), next(times))[1])
    measured = host_calibrate.interleaved_us(cases, torch.device("cpu"), calls=1)
    assert order == ["conv", "norm"] * 4  # the warm-up, then three rounds
    assert measured == {"conv": 2.0, "norm": 20.0}


def test_the_composition_scale_is_the_networks_median_ratio_and_scales_every_call_but_the_synchronize():
    rows = [{"measured_ms": m, "summed_ms": 1.0} for m in (1.0, 3.0, 2.0)]
    assert host_calibrate.composition_scale(rows) == 2.0
    host = replace(unit_host(conv=10.0, forward=4.0), scale=1.5).at_speed(2.0)
    assert host.call_ms("conv") == pytest.approx(10.0 * 1.5 / 1e3 / 2.0)
    assert host.call_ms(FORWARD) == pytest.approx(4.0 / 1e3 / 2.0)  # the synchronize is timed as it runs
    assert "its calls x1.50 in a forward" in host.describe()


def test_a_host_profile_without_networks_composes_at_scale_1(tmp_path):
    path = tmp_path / "old.json"
    call_us = {kind: 2.0 for kind in CALL_KINDS}
    path.write_text(
        json.dumps({"format": "utilscope-host-profile/1", "cpu": "x", "torch": "2", "device": "y", "call_us": call_us})
    )
    host = load_host(path)
    assert host.scale == 1.0 and host.chains == () and host.call_ms("conv") == pytest.approx(0.002)


def test_a_file_that_is_not_a_host_profile_is_one_line(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(UsageError, match="is not a host profile"):
        load_host(path)
    path.write_text(
        json.dumps(
            {"format": "utilscope-host-profile/1", "cpu": "x", "torch": "2", "device": "y", "call_us": {"conv": 1.0}}
        )
    )
    with pytest.raises(UsageError, match="no time for the call kinds"):
        load_host(path)


def test_the_registry_finds_the_host_profile_of_a_device_profile_s_machine(monkeypatch, tmp_path):
    monkeypatch.setattr(profiles, "HOSTS_DIR", tmp_path)
    unit_host().save(tmp_path / "h100_host.json")
    assert profiles.host_of("NVIDIA H100 80GB HBM3").cpu == "a CPU"
    assert profiles.host_of("NVIDIA H200").cpu == "a CPU"  # no H200 machine's: the one shipped
    monkeypatch.setattr(profiles, "HOSTS_DIR", tmp_path / "none")
    assert profiles.host_of("NVIDIA H100 80GB HBM3") is None


def test_a_host_profile_is_for_eager_only(tmp_path):
    path = unit_host().save(tmp_path / "host.json")
    with pytest.raises(UsageError, match="give --backend eager"):
        PredictRequest("torchvision:resnet18", gpu="h100_sxm", host_profile=str(path))


def test_eager_with_a_host_is_the_host_s_pace_at_batch_1_and_the_gpu_s_at_256(tmp_path, capsys):
    path = unit_host(conv=20.0, norm=10.0).save(tmp_path / "host.json")
    code = main(
        [
            "predict",
            "torchvision:resnet18",
            "--gpu",
            "h100_sxm",
            "--backend",
            "eager",
            "--batch",
            "1,256",
            "--host-profile",
            str(path),
            "--json",
        ]
    )
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    small, large = rows
    assert small["bound"] == "host" and small["host"].startswith("host: a CPU")
    assert small["samples_per_s"] == pytest.approx(1 / small["host_ms"] * 1e3)
    assert large["bound"] != "host" and large["host_ms"] == pytest.approx(small["host_ms"])


def test_eager_without_a_host_profile_says_it_is_the_gpu_s_time_alone(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(profiles, "HOSTS_DIR", tmp_path)  # no host profile shipped
    code = main(["predict", "torchvision:resnet18", "--gpu", "h100_sxm", "--backend", "eager", "--batch", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "no host profile" in " ".join(out.split())


def test_anchors_at_the_host_s_pace_fit_its_speed_and_the_rest_the_gpu(tmp_path):
    host = unit_host(conv=20.0, norm=10.0)
    truth = host.at_speed(0.5).save(tmp_path / "slow.json")
    given = host.save(tmp_path / "host.json")
    asked = {"gpu": "a100_sxm4_80gb", "backend": "eager", "batches": (1,)}
    measured = predict_networks(PredictRequest("torchvision:resnet18", host_profile=str(truth), **asked))
    sps = measured.predictions[0].samples_per_s
    anchors = (f"torchvision:resnet18@1={sps}",)
    fitted = predict_networks(PredictRequest("torchvision:resnet18", host_profile=str(given), anchors=anchors, **asked))
    assert fitted.anchor_fit.host_speed == pytest.approx(0.5, rel=0.01)
    assert fitted.predictions[0].samples_per_s == pytest.approx(sps, rel=0.01)
    assert any(line.startswith("host speed 1.00 -> 0.50x") for line in fitted.anchor_fit.describe())
    slowest = f"torchvision:resnet18@1={sps / 20}"  # a host 10x slower than the truth: beyond the range
    with pytest.raises(UsageError, match="no host speed within 0.2-5.0x"):
        predict_networks(PredictRequest("torchvision:resnet18", host_profile=str(given), anchors=(slowest,), **asked))


def test_a_host_anchor_faster_than_the_gpu_alone_contradicts_it_and_a_graph_anchor_at_batch_1_is_warned(tmp_path):
    given = unit_host(conv=20.0, norm=10.0).save(tmp_path / "host.json")
    asked = {"gpu": "a100_sxm4_80gb", "batches": (1,)}
    fast = ("torchvision:resnet18@1=10000",)  # host-bound at speed 1, and 10,000/s is beyond the GPU's kernels alone
    fit = predict_networks(
        PredictRequest("torchvision:resnet18", backend="eager", host_profile=str(given), anchors=fast, **asked)
    ).anchor_fit
    assert list(fit.faster_than_gpu) == [0] and fit.host_speed is None
    assert any("contradicts the device anchors" in line for line in fit.describe())
    graph = predict_networks(PredictRequest("torchvision:resnet18", anchors=("torchvision:resnet18@1=2000",), **asked))
    assert any("measured on graph at batch 1" in line for line in graph.anchor_fit.describe())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_kernel_count_on_a_gpu_is_one_a_launch_and_the_grid_counts_every_conv():
    device = torch.device("cuda")
    x = torch.zeros(1024, device=device)
    assert host_calibrate.count_kernels(lambda: x.add_(1), device) == 1
    assert host_calibrate.count_kernels(lambda: x.add_(1).mul_(2), device) == 2
    rows = host_calibrate.conv_kernel_rows(device, torch.float16)
    assert len(rows) == 448 and all(row["kernels"] >= 1 for row in rows)
