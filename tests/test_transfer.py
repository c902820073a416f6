"""predict/transfer.py (an op's time carried to another GPU by its datasheet) and counting/autocast.py (what a
network runs under CUDA autocast), on closed-form cases."""

from dataclasses import replace

import pandas as pd
import pytest
import torch
from torch import nn

from utilscope.counting.autocast import CAST_OP
from utilscope.counting.counter import count_traced
from utilscope.predict.features import Gpu
from utilscope.predict.transfer import MEMORY_EFFICIENCY, TENSOR_EFFICIENCY, transfer, wave_efficiency

SOURCE = Gpu("source", peak_flops=800e12, bandwidth_bytes=4e12, sm_count=100, key="src", clock_hz=2e9)
TARGET = Gpu("target", peak_flops=200e12, bandwidth_bytes=1e12, sm_count=50, key="tgt", clock_hz=2e9)


def test_wave_efficiency_is_the_busy_share_of_the_last_wave():
    assert wave_efficiency(pd.Series([100.0, 150.0, 50.0]).to_numpy(), 100).tolist() == [1.0, 0.75, 0.5]


def test_each_op_takes_the_largest_of_its_sm_tensor_and_memory_bounds():
    rows = pd.DataFrame(
        {
            "group": ["conv", "memory", "memory"],
            "flops": [8e12, 0.0, 0.0],
            "bytes": [4e9, 4e9, 4e6],
            "waves": [1.0, 0.0, 0.0],
        }
    )
    source_ms = pd.Series([20.0, 1.25, 0.5]).to_numpy()  # the last: slow on the source for its bytes
    ms, bound = transfer(rows, source_ms, SOURCE, TARGET)
    # the conv: 100 tiles, one full wave on the source, two on the target: SM-bound 20 ms x 2 (half the SM cycles)
    # against 8e12 / (200e12 x eff) s on the tensor cores and 4e9 / (1e12 x eff) s of memory
    tensor_ms, conv_memory_ms = 8e12 / (200e12 * TENSOR_EFFICIENCY) * 1e3, 4e9 / (1e12 * MEMORY_EFFICIENCY) * 1e3
    assert ms[0] == pytest.approx(max(40.0, tensor_ms, conv_memory_ms))
    assert ms[1] == pytest.approx(max(2.5, 4e9 / (1e12 * MEMORY_EFFICIENCY) * 1e3)) and bound[1] == "memory"
    assert ms[2] == pytest.approx(1.0) and bound[2] == "sm"
    assert list(bound[:1]) == ["tensor" if tensor_ms > 40 else "sm"]


def test_a_memory_bound_op_carried_to_faster_memory_gets_faster_by_its_streamed_part_alone():
    """The same SMs and clock, twice the bandwidth: of each memory row's source time, its bytes at the source's
    streamed bandwidth (at most the whole time) halve, the rest stays; a conv row and a slower target are as before."""
    faster = replace(SOURCE, name="faster", key="fast", bandwidth_bytes=8e12)
    rows = pd.DataFrame(
        {
            "group": ["memory", "memory", "conv"],
            "flops": [0.0, 0.0, 1e9],
            "bytes": [4e9, 1e9, 4e9],
            "waves": [0.0, 0.0, 1.0],
        }
    )
    source_ms = pd.Series([1.5, 1.0, 2.0]).to_numpy()
    streamed_ms = [4e9 / (4e12 * MEMORY_EFFICIENCY) * 1e3, 1e9 / (4e12 * MEMORY_EFFICIENCY) * 1e3]  # 1.176, 0.294
    ms, bound = transfer(rows, source_ms, SOURCE, faster)
    assert ms[0] == pytest.approx(1.5 - streamed_ms[0] / 2) and bound[0] == "sm"  # 0.912: above 4e9 at 8 TB/s
    assert ms[1] == pytest.approx(1.0 - streamed_ms[1] / 2)  # 0.853: mostly per-SM work
    assert ms[2] == pytest.approx(2.0)  # a conv's time is per-SM work
    memory_bound = pd.Series([0.5]).to_numpy()  # below its bytes at the source's bandwidth: all of it streams
    ms, bound = transfer(rows.iloc[:1], memory_bound, SOURCE, faster)
    assert ms[0] == pytest.approx(max(0.5 / 2, 4e9 / (8e12 * MEMORY_EFFICIENCY) * 1e3)) and bound[0] == "memory"
    slower_ms, _ = transfer(rows, source_ms, faster, SOURCE)  # from the faster memory back: the largest bound
    assert slower_ms[0] == pytest.approx(max(1.5, streamed_ms[0])) and slower_ms[2] == pytest.approx(2.0)


def test_a_compute_bound_op_on_the_fp32_units_names_them_not_the_tensor_cores():
    rows = pd.DataFrame({"group": ["conv"], "flops": [8e15], "bytes": [4e6], "waves": [1.0]})  # far above its roofs
    for unit, name in (("fp16", "tensor"), ("tf32", "tensor"), ("fp32", "fp32")):
        ms, bound = transfer(rows, pd.Series([1.0]).to_numpy(), SOURCE, replace(TARGET, unit=unit))
        assert ms[0] == pytest.approx(8e15 / (200e12 * TENSOR_EFFICIENCY) * 1e3) and list(bound) == [name]


def test_a_target_below_its_boost_clock_has_tensor_cores_as_slow_and_memory_at_its_technologys_share():
    held = replace(TARGET, clock_hz=1e9, boost_hz=2e9, memory_efficiency=0.5)  # half the clock, half the bandwidth
    rows = pd.DataFrame({"group": ["conv", "memory"], "flops": [8e12, 0.0], "bytes": [0.0, 4e9], "waves": [1.0, 0.0]})
    ms, _ = transfer(rows, pd.Series([0.001, 0.001]).to_numpy(), SOURCE, held)
    assert ms[0] == pytest.approx(8e12 / (100e12 * TENSOR_EFFICIENCY) * 1e3)  # 100 TFLOP/s at half the clock
    assert ms[1] == pytest.approx(4e9 / (1e12 * 0.5 * 0.5) * 1e3)  # its memory held down with its clock, too


def test_a_power_limited_gpu_sustains_the_clock_its_board_power_per_sm_feeds():
    from utilscope.hardware.specs import get_spec
    from utilscope.predict.sustained import sustained

    t4 = sustained(get_spec("t4"))
    # Turing's reference: the row with the most watts per SM and boost MHz, the RTX 2080 Ti (250 W, 68 SMs, 1545
    # MHz); the T4's 70 W over 40 SMs feed 1545 x ((70 / 40) / (250 / 68)) ^ (1/3) = 1206.3 MHz of its 1590
    assert t4.reference == "rtx_2080_ti" and t4.estimated
    assert t4.clock_mhz == pytest.approx(1545 * ((70 / 40) / (250 / 68)) ** (1 / 3))
    assert sustained(replace(get_spec("t4"), base_clock_mhz=1300)).clock_mhz == 1300  # never below the base clock
    a100 = sustained(get_spec("a100_pcie_40gb"))  # 250 W against the SXM4's 400 W on 108 SMs each
    assert a100.clock_mhz == pytest.approx(1410 * (250 / 400) ** (1 / 3)) and a100.memory_efficiency == 0.87
    for key in ("h200_sxm", "rtx_2080_ti", "gh200"):  # a reference, and a module whose power a CPU shares
        assert not sustained(get_spec(key)).estimated
    assert "sustained clock 1206 MHz estimated under its 70 W" in t4.describe(get_spec("t4"))


def test_an_op_at_the_launch_floor_stays_there():
    rows = pd.DataFrame({"group": ["memory"], "flops": [0.0], "bytes": [10.0]})
    ms, bound = transfer(rows, pd.Series([0.0005]).to_numpy(), SOURCE, TARGET)
    assert bound.tolist() == ["launch"] and ms[0] == pytest.approx(0.002)


class ConvNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)  # with a bias
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.norm(self.conv(x).permute(0, 2, 3, 1))
        return self.fc(x).softmax(-1)


def test_autocast_casts_the_inputs_of_convs_and_matmuls_down_and_of_norms_up():
    _, plain = count_traced(ConvNorm(), 2, 4, "fp16")
    counted, recorded = count_traced(ConvNorm(), 2, 4, "fp16", autocast=True)
    casts = [event for event in recorded.events if event.op == CAST_OP]
    assert not any(event.op == CAST_OP for event in plain.events)
    # conv: image, weight, bias down; norm: the conv's output up; linear: the norm's output, weight, bias down
    pixels = 2 * 4 * 4
    expected = [pixels * 3 * (4 + 2), 8 * 3 * 6, 8 * 6, pixels * 8 * (2 + 4), pixels * 8 * (4 + 2), 4 * 8 * 6, 4 * 6]
    assert sorted(event.bytes for event in casts) == sorted(expected)
    softmax = next(event for event in recorded.events if event.op == "aten._softmax")
    assert softmax.outputs[0].bytes == pixels * 4 * 4  # reads fp16, writes fp32 (half_to_float)
    assert counted.total.flops == count_traced(ConvNorm(), 2, 4, "fp16")[0].total.flops
    assert torch.get_default_dtype() == torch.float32


def test_a_network_under_autocast_carries_its_weight_casts_in_its_ops_rows_and_its_activation_casts_as_copies():
    from utilscope.predict.features import Gpu, fold_casts, kept_events
    from utilscope.predict.predictor import network_rows

    _, recorded = count_traced(ConvNorm(), 2, 4, "fp16", autocast=True)
    rows = network_rows(recorded, Gpu.of("NVIDIA H200", "fp16"))
    events = kept_events(recorded.events)
    conv = next(event for event in events if event.op == "aten.convolution")
    pixels = 2 * 4 * 4
    casts_bytes = 8 * 3 * 6 + 8 * 6  # the weight and the bias, fp32 to fp16, timed with the conv
    image_cast = pixels * 3 * (4 + 2)  # the image's cast down: a copy of its own, as the linear's input's
    assert rows.loc[rows["op"] == "aten.convolution", "bytes"].item() == conv.bytes + casts_bytes
    assert sorted(rows.loc[rows["op"] == CAST_OP, "bytes"]) == sorted([pixels * 8 * (4 + 2), image_cast])
    folded = fold_casts(events)
    assert next(casts for event, casts in folded if event is conv) == casts_bytes
    own = sum(event.bytes for event, _ in folded if event.op == CAST_OP)
    assert sum(casts for _, casts in folded) + own == sum(event.bytes for event in events if event.op == CAST_OP)
