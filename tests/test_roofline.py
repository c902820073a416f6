"""Roofline classification, efficiency and the attainable-utilization bounds: closed-form values with the
arithmetic in comments, the bounds on real zoo models, a real CPU measurement, and the plot.

Unless stated, the roofs are 100 TFLOP/s tensor, 10 TFLOP/s vector and 1000 GB/s: the tensor ridge is
100e12 / 1000e9 = 100 FLOP/B, the vector ridge 10e12 / 1000e9 = 10 FLOP/B.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
import torch
from matplotlib.image import imread
from torch import nn

import utilscope
from utilscope.attribute.records import LayerTime, Point, Roofs
from utilscope.attribute.roofline import (
    Bound,
    Bounds,
    attainable_bounds,
    attainable_ms,
    class_gaps,
    classify,
    gap_split,
    roofline,
)
from utilscope.counting.counter import LayerCount
from utilscope.present.roofline_plot import plot_roofline

ROOFS = Roofs(tensor_tflops=100.0, vector_tflops=10.0, bandwidth_gbs=1000.0, label="synthetic")
CEILINGS = Roofs(tensor_tflops=70.0, vector_tflops=8.0, bandwidth_gbs=800.0, label="measured ceilings")


def point(name: str, flops: int, bytes: int, time_ms: float, other_flops: int = 0, op_class: str = "dense_conv"):
    return Point(name=name, op_class=op_class, flops=flops, other_flops=other_flops, bytes=bytes, time_ms=time_ms)


def test_ridge_of_the_synthetic_roofs():
    assert ROOFS.ridge_intensity == pytest.approx(100.0)  # 100e12 FLOP/s / 1000e9 B/s


def test_compute_bound_point():
    # 1e12 flops / 100e12 FLOP/s = 10 ms; 1e9 B / 1000e9 B/s = 1 ms; intensity 1000 FLOP/B > ridge 100
    assert attainable_ms(10**12, 0, 10**9, ROOFS) == pytest.approx(10.0)
    assert classify(10**12, 0, 10**9, ROOFS) is Bound.COMPUTE


def test_memory_bound_point():
    # 1e9 flops / 100e12 = 0.01 ms; 1e9 B / 1000e9 B/s = 1 ms; intensity 1 FLOP/B < ridge 100
    assert attainable_ms(10**9, 0, 10**9, ROOFS) == pytest.approx(1.0)
    assert classify(10**9, 0, 10**9, ROOFS) is Bound.MEMORY


def test_just_either_side_of_the_ridge():
    # 1e9 B take 1 ms; at the ridge (100 FLOP/B) 1e11 flops take 1 ms too: a tie counts as memory-bound
    assert classify(10**11, 0, 10**9, ROOFS) is Bound.MEMORY
    assert classify(10**11 + 10**9, 0, 10**9, ROOFS) is Bound.COMPUTE  # 101 FLOP/B
    assert classify(10**11 - 10**9, 0, 10**9, ROOFS) is Bound.MEMORY  # 99 FLOP/B


def test_vector_work_runs_at_the_vector_peak():
    # 5e9 other_flops / 10e12 = 0.5 ms, 1e9 B = 1 ms: memory-bound; 2e10 other_flops = 2 ms: compute-bound,
    # although 20 FLOP/B is far below the tensor ridge (100): the vector ridge is 10 FLOP/B
    assert attainable_ms(0, 5 * 10**9, 10**9, ROOFS) == pytest.approx(1.0)
    assert classify(0, 2 * 10**10, 10**9, ROOFS) is Bound.COMPUTE
    assert attainable_ms(0, 2 * 10**10, 10**9, ROOFS) == pytest.approx(2.0)
    # both units add: 5e11 / 100e12 = 5 ms + 3e10 / 10e12 = 3 ms = 8 ms > 1 ms of memory
    assert attainable_ms(5 * 10**11, 3 * 10**10, 10**9, ROOFS) == pytest.approx(8.0)


def test_no_work_is_memory_bound_and_free():
    assert attainable_ms(0, 0, 0, ROOFS) == 0.0
    assert classify(0, 0, 0, ROOFS) is Bound.MEMORY


def test_roofline_rows():
    points = [
        point("conv", 10**12, 10**9, time_ms=20.0),  # attainable 10 ms
        point("relu", 0, 10**9, time_ms=4.0, other_flops=10**8, op_class="activation"),  # attainable 1 ms
        point("view", 0, 0, time_ms=0.0, op_class="other"),
    ]
    conv, relu, view = roofline(points, ROOFS)
    # conv: intensity 1e12 / 1e9 = 1000 FLOP/B; achieved 1e12 / 0.020 s = 50 TFLOP/s; efficiency 10 / 20
    assert conv.intensity == pytest.approx(1000.0)
    assert conv.achieved_tflops == pytest.approx(50.0)
    assert (conv.attainable_ms, conv.measured_ms, conv.efficiency) == pytest.approx((10.0, 20.0, 0.5))
    assert conv.bound is Bound.COMPUTE
    # relu: 1e8 / 1e9 = 0.1 FLOP/B; achieved 1e8 / 0.004 s = 0.025 TFLOP/s; efficiency 1 / 4
    assert relu.intensity == pytest.approx(0.1)
    assert relu.achieved_tflops == pytest.approx(0.025)
    assert (relu.attainable_ms, relu.efficiency) == pytest.approx((1.0, 0.25))
    assert relu.bound is Bound.MEMORY
    assert relu.op_class == "activation"
    # time shares: 20 / 24 and 4 / 24
    assert (conv.time_share, relu.time_share, view.time_share) == pytest.approx((20 / 24, 4 / 24, 0.0))
    assert (view.intensity, view.achieved_tflops, view.efficiency) == (0.0, 0.0, None)


def test_roofline_rejects_bad_input():
    with pytest.raises(ValueError, match="measured time"):
        roofline([point("conv", 1, 1, time_ms=-1.0)], ROOFS)
    with pytest.raises(ValueError, match="positive"):
        roofline([], Roofs(tensor_tflops=0.0, vector_tflops=1.0, bandwidth_gbs=1.0, label="broken"))
    with pytest.raises(ValueError, match="non-negative"):
        attainable_ms(-1, 0, 0, ROOFS)


class Layer:
    def __init__(self, name: str, flops: int, other_flops: int, bytes: int, bytes_fused: int):
        self.name, self.flops, self.other_flops, self.bytes, self.bytes_fused = (
            name,
            flops,
            other_flops,
            bytes,
            bytes_fused,
        )


def test_bounds_closed_form():
    layers = [
        Layer("conv", 10**12, 0, 10**9, 5 * 10**8),  # unfused max(10, 1) = 10 ms; fused max(10, 0.5) = 10 ms
        Layer("bn", 0, 2 * 10**9, 4 * 10**9, 10**9),  # unfused max(0.2, 4) = 4 ms; fused max(0.2, 1) = 1 ms
        Layer("relu", 0, 10**9, 2 * 10**9, 0),  # unfused max(0.1, 2) = 2 ms; fused max(0.1, 0) = 0.1 ms
    ]
    bounds = attainable_bounds(layers, ROOFS)
    assert bounds.unfused_ms == pytest.approx(16.0)  # 10 + 4 + 2
    assert bounds.fused_ms == pytest.approx(11.1)  # 10 + 1 + 0.1
    # utilization = 1e12 flops / time / 100e12 FLOP/s: 1e12 / 0.016 / 1e14 = 0.625; 1e12 / 0.0111 / 1e14 = 0.9009
    assert bounds.unfused_utilization == pytest.approx(0.625)
    assert bounds.fused_utilization == pytest.approx(1 / 1.11)


def test_bounds_reject_bad_layers():
    with pytest.raises(ValueError, match="at least one"):
        attainable_bounds([], ROOFS)
    with pytest.raises(ValueError, match="exceeds bytes"):
        attainable_bounds([Layer("odd", 1, 0, 10, 20)], ROOFS)


def test_gap_split_closed_form():
    bounds = Bounds(unfused_utilization=0.5, fused_utilization=0.8, unfused_ms=2.0, fused_ms=1.25)
    split = gap_split(0.3, bounds)
    # architecture-limited: 1 - 0.8 = 0.2; runtime-limited: 0.8 - 0.3 = 0.5; fusion alone: 0.8 - 0.5 = 0.3
    assert split["architecture_limited"] == pytest.approx(0.2)
    assert split["runtime_limited"] == pytest.approx(0.5)
    assert split["fusion_gain"] == pytest.approx(0.3)
    assert split["measured_utilization"] + split["runtime_limited"] + split["architecture_limited"] == pytest.approx(1)
    assert split["bound_exceeded"] is False
    beaten = gap_split(0.9, bounds)  # measured above the fused bound: reported, never clipped
    assert beaten["bound_exceeded"] is True
    assert beaten["runtime_limited"] == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="non-negative"):
        gap_split(-0.1, bounds)


def test_class_gaps():
    points = [
        point("conv1", 10**12, 10**9, time_ms=12.0),  # attainable 10 ms, gap 2 ms
        point("conv2", 10**12, 10**9, time_ms=11.0),  # attainable 10 ms, gap 1 ms
        point("relu", 0, 10**9, time_ms=7.0, other_flops=10**8, op_class="activation"),  # attainable 1, gap 6
    ]
    frame = class_gaps(points, ROOFS)
    assert list(frame["op_class"]) == ["activation", "dense_conv"]  # largest gap first
    activation, conv = frame.to_dict(orient="records")
    assert (conv["points"], conv["measured_ms"], conv["attainable_ms"], conv["gap_ms"]) == pytest.approx(
        (2, 23.0, 20.0, 3.0)
    )
    assert (activation["gap_ms"], activation["gap_share"], conv["gap_share"]) == pytest.approx((6.0, 6 / 9, 3 / 9))
    assert (activation["time_share"], conv["time_share"]) == pytest.approx((7 / 30, 23 / 30))


def test_class_gaps_fused_bytes():
    counted = LayerCount(
        name="relu",
        type="ReLU",
        op_class="activation",
        flops=0,
        other_flops=10**8,
        bytes=2 * 10**9,
        bytes_fused=0,
        weight_bytes=0,
        params=0,
        input_shapes=[],
        output_shapes=[],
    )
    layer = LayerTime(counted, time_ms=3.0)
    # unfused: max(0.01, 2) = 2 ms attainable, gap 1 ms; fused: max(0.01, 0) = 0.01 ms, gap 2.99 ms
    assert class_gaps([layer], ROOFS)["gap_ms"].item() == pytest.approx(1.0)
    assert class_gaps([layer], ROOFS, fused=True)["gap_ms"].item() == pytest.approx(2.99)
    with pytest.raises(ValueError, match="bytes_fused"):
        class_gaps([point("relu", 0, 1, time_ms=1.0)], ROOFS, fused=True)
    assert class_gaps([], ROOFS).empty


def measured_utilization(flops: int, time_ms: float, roofs: Roofs) -> float:
    return flops / (time_ms / 1e3) / (roofs.tensor_tflops * 1e12)


@pytest.fixture(scope="module", params=["torchvision:resnet18", "torchvision:mobilenet_v3_small"])
def zoo_layers(request):
    return utilscope.count(request.param, resolution=64).layers


def test_fused_bound_at_least_unfused_on_zoo_models(zoo_layers):
    for roofs in (ROOFS, CEILINGS, Roofs(989.0, 67.0, 4800.0, "H200-like")):
        bounds = attainable_bounds(zoo_layers, roofs)
        assert 0 < bounds.unfused_utilization <= bounds.fused_utilization <= 1
        assert bounds.fused_ms <= bounds.unfused_ms
    assert sum(layer.bytes_fused for layer in zoo_layers) < sum(layer.bytes for layer in zoo_layers)


def test_bounds_above_any_measurement_slower_than_the_roofs(zoo_layers):
    # a fake measurement: every layer takes its attainable time x a factor in [1, 3), plus idle time between
    rng = np.random.default_rng(seed=20240611)
    attainable = np.array([attainable_ms(lay.flops, lay.other_flops, lay.bytes, ROOFS) for lay in zoo_layers])
    layer_ms = attainable * rng.uniform(1.0, 3.0, size=len(attainable))
    end_to_end_ms = layer_ms.sum() + 0.05
    flops = sum(layer.flops for layer in zoo_layers)
    measured = measured_utilization(flops, end_to_end_ms, ROOFS)
    bounds = attainable_bounds(zoo_layers, ROOFS)
    assert measured <= bounds.unfused_utilization <= bounds.fused_utilization
    split = gap_split(measured, bounds)
    assert split["runtime_limited"] >= 0 and not split["bound_exceeded"]
    points = [
        Point(lay.name, lay.op_class, lay.flops, lay.other_flops, lay.bytes, float(ms))
        for lay, ms in zip(zoo_layers, layer_ms, strict=True)
    ]
    rows = roofline(points, ROOFS)
    assert all(row.efficiency is None or row.efficiency <= 1 + 1e-12 for row in rows)
    gaps = class_gaps(points, ROOFS)
    assert (gaps["gap_ms"] >= -1e-12).all()
    assert gaps["gap_share"].sum() == pytest.approx(1.0)


def tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def median_ms(model: nn.Module, x: torch.Tensor, repeats: int = 7, calls: int = 5) -> float:
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                model(x)
            samples.append((time.perf_counter() - start) * 1e3 / calls)
    return statistics.median(samples)


def test_real_cpu_measurement_below_both_bounds():
    torch.manual_seed(0)
    model = tiny_cnn().eval()
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    layers = utilscope.count(model, resolution=32).layers
    # generous upper bounds for a couple of CPU cores: far above what any CPU core reaches, data from any cache
    roofs = Roofs(tensor_tflops=10.0, vector_tflops=10.0, bandwidth_gbs=10_000.0, label="generous CPU bound")
    flops = sum(layer.flops for layer in layers)
    measured = measured_utilization(flops, median_ms(model, x), roofs)
    bounds = attainable_bounds(layers, roofs)
    assert 0 < measured <= bounds.unfused_utilization <= bounds.fused_utilization


def synthetic_points() -> list[Point]:
    classes = ["dense_conv", "pointwise_conv", "depthwise_conv", "norm", "activation", "elementwise", "linear"]
    rng = np.random.default_rng(seed=7)
    points = []
    for index in range(40):
        op_class = classes[index % len(classes)]
        heavy = op_class in ("dense_conv", "pointwise_conv", "linear")
        flops = int(10 ** rng.uniform(9, 11)) if heavy else 0
        other = 0 if heavy else int(10 ** rng.uniform(6, 8))
        moved = int(10 ** rng.uniform(6, 8.5))
        ideal = attainable_ms(flops, other, moved, ROOFS)
        points.append(Point(f"layer{index}", op_class, flops, other, moved, ideal * float(rng.uniform(1.2, 20))))
    points.append(Point("flatten", "other", 0, 0, 0, 0.001))  # no work, no bytes: skipped, in the footnote
    return points


def test_plot_roofline(tmp_path):
    path = plot_roofline(synthetic_points(), ROOFS, CEILINGS, tmp_path / "roofline.png", title="synthetic layers")
    assert path == tmp_path / "roofline.png"
    assert path.stat().st_size > 10_000
    height, width, _ = imread(path).shape
    assert 400 <= height <= 2000 and 600 <= width <= 3000


def test_plot_roofline_without_ceilings_or_points(tmp_path):
    path = plot_roofline([], ROOFS, None, tmp_path / "empty.png")
    assert path.exists() and imread(path).shape[0] > 400
