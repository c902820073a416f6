"""Per-layer attribution on the CPU: time per layer from the profiler, regions of compiled runs, kernel families."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import utilscope
from utilscope.attribute.attribution import attribute
from utilscope.attribute.kernels import kernel_family
from utilscope.attribute.summary import class_sentences, class_summary, points_frame
from utilscope.attribute.trace import region_points
from utilscope.errors import UsageError

TINY = """
import torch
import torch.nn as nn

RESOLUTION = 32

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.dw(self.bn(self.conv(x))) + x)  # the add runs in a non-leaf module

def make():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), Block(16), Block(16), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, 10))
"""


@pytest.fixture(scope="module")
def tiny(write_factory):
    return f"{write_factory(TINY, 'tiny_blocks')}:make"


@pytest.fixture(scope="module")
def attributed(tiny):
    return attribute(tiny, batch=4, backend="eager", device="cpu", ceilings="skip", peak_tflops=1.0, iters=3)


def test_layer_times_sum_to_the_profiled_total(attributed):
    layer_ms = sum(layer.time_ms for layer in attributed.layers)
    assert layer_ms == pytest.approx(attributed.attributed_ms)
    # everything the ops did is attributed to some layer, up to the composite wrappers' own dispatch time
    assert layer_ms == pytest.approx(attributed.kernel_time_ms, rel=0.10)
    assert attributed.end_to_end_ms > 0


def test_every_leaf_module_appears(attributed, tiny):
    names = {layer.name for layer in attributed.layers}
    model = utilscope.models.zoo.build_model(utilscope.models.zoo.parse_spec(tiny))
    leaves = {name for name, m in model.named_modules() if name and next(m.children(), None) is None}
    assert leaves <= names
    assert {"1.add", "2.add"} <= names  # ops issued by a non-leaf module are layers of their own
    timed = {layer.name for layer in attributed.layers if layer.time_ms > 0}
    assert {"0", "1.conv", "1.dw", "1.bn", "5"} <= timed


def test_counts_of_the_profiled_run_match_the_counting_engine(attributed, tiny):
    counted = utilscope.count(tiny, batch=4)
    measured = [(layer.name, layer.flops, layer.bytes) for layer in attributed.layers]
    assert measured == [(layer.name, layer.flops, layer.bytes) for layer in counted.layers]
    assert attributed.flops == counted.total.flops


def test_class_summary_shares(attributed):
    summary = class_summary(attributed)
    assert summary["time_share"].sum() == pytest.approx(1.0)
    assert summary["flop_share"].sum() == pytest.approx(1.0)
    assert any(sentence.startswith("dense_conv: ") for sentence in class_sentences(attributed, limit=10))
    frame = points_frame(attributed)
    assert len(frame) == len(attributed.points) and (frame["time_ms"] > 0).all()


def test_compiled_backends_need_a_gpu(tiny):
    with pytest.raises(UsageError, match="needs a CUDA device"):
        attribute(tiny, batch=1, backend="inference", device="cpu", ceilings="skip")


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "convolution"),
        ("void cudnn::cnn::conv2d_grouped_direct_kernel<...>", "convolution"),
        ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNN", "gemm"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "gemm"),
        ("triton_poi_fused_add_relu_3", "triton"),
        ("void at::native::batch_norm_transform_input_channels_last_kernel<...>", "batchnorm"),
        ("void at::native::vectorized_elementwise_kernel<4, ...>", "elementwise"),
        ("Memcpy DtoD (Device -> Device)", "other"),
    ],
)
def test_kernel_families(name, family):
    assert kernel_family(name) == family


def _counts():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.ReLU())
    return utilscope.count(model, batch=2, resolution=16)


def test_regions_cut_at_tensor_core_kernels():
    counts = _counts()
    kernels = [
        ("triton_poi_fused_convert_layout_0", 5.0),  # before the first convolution: a prologue region
        ("sm90_xmma_fprop_implicit_gemm_a", 100.0),
        ("triton_poi_fused_relu_1", 20.0),
        ("sm90_xmma_fprop_implicit_gemm_b", 50.0),
        ("triton_poi_fused_relu_2", 10.0),
    ]
    points, region_of, notes = region_points(counts, kernels)
    assert notes == []
    # the prologue kernel runs before any layer's convolution: a region of its own, not dropped
    assert [p.name for p in points] == ["(before 0)", "0", "3"]
    assert [p.time_ms for p in points] == pytest.approx([0.005, 0.12, 0.06])  # 5 us; 100 + 20 us; 50 + 10 us
    assert points[0].layers == [] and points[1].layers == ["0", "1", "2"] and points[2].layers == ["3", "4"]
    assert region_of == ["0", "0", "0", "3", "3"]
    assert points[1].bytes == sum(layer.bytes_fused for layer in counts.layers[:3])
    assert sum(p.flops for p in points) == counts.total.flops


def test_extra_kernels_join_the_region_before_them():
    counts = _counts()
    kernels = [
        ("sm90_xmma_fprop_a", 100.0),
        ("sm90_xmma_fprop_b", 1.0),
        ("triton_poi_fused_relu", 10.0),
        ("nvjet_gemm_c", 5.0),
    ]
    points, region_of, notes = region_points(counts, kernels)
    # 3 tensor-core launches for 2 layers with FLOPs: the last unmatched launch stays in the last region
    assert [p.name for p in points] == ["0", "3"]
    assert [p.time_ms for p in points] == pytest.approx([0.1, 0.016])  # 100 us; 1 + 10 + 5 us
    assert notes and "1 of 3 tensor-core kernel groups matched no layer" in notes[0]
    assert sum(p.flops for p in points) == counts.total.flops


def test_depthwise_layers_align_with_depthwise_kernel_pairs():
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(), nn.Conv2d(8, 8, 1))
    counts = utilscope.count(model, batch=2, resolution=16)
    kernels = [
        ("nvjet_sm90_hsh_pointwise", 10.0),
        ("sm90_xmma_depthwise_convolution_fprop_setup", 1.0),  # cuDNN launches depthwise convs as two kernels
        ("sm90_xmma_depthwise_convolution_fprop_main", 20.0),
        ("triton_poi_fused_relu_0", 4.0),
        ("nvjet_sm90_hsh_pointwise", 8.0),
    ]
    points, region_of, notes = region_points(counts, kernels)
    assert notes == []
    assert [(p.name, p.op_class) for p in points] == [
        ("0", "pointwise_conv"),
        ("1", "depthwise_conv"),
        ("3", "pointwise_conv"),
    ]
    assert [p.time_ms for p in points] == pytest.approx([0.01, 0.025, 0.008])
    assert region_of == ["0", "1", "1", "3"]


def test_alignment_prefers_kind_matches():
    from utilscope.attribute.trace import align

    # layers: dense, depthwise, dense; groups: dense, dense(extra), depthwise, dense
    assert align([False, True, False], [False, False, True, False]) == [(0, 0), (1, 2), (2, 3)]
    # a depthwise layer computed inside a fused kernel: no group for it
    assert align([False, True, False], [False, False]) == [(0, 0), (2, 1)]


def test_attribution_dict_round_trips_to_json(attributed):
    import json

    doc = json.loads(json.dumps(attributed.to_dict()))
    assert doc["backend"] == "eager" and len(doc["layers"]) == len(attributed.layers)
    assert doc["idle_share"] is None or 0.0 <= doc["idle_share"] <= 1.0  # None: not measurable (a loaded CPU)


@pytest.mark.parametrize("backend", ["graph"])
def test_graph_backend_on_cpu_times_plain_launches(tiny, backend):
    a = attribute(tiny, batch=2, backend=backend, device="cpu", ceilings="skip", peak_tflops=1.0, iters=1)
    assert any("CUDA graphs need a CUDA device" in note for note in a.notes)
    assert torch.isfinite(torch.tensor(a.end_to_end_ms))
    from utilscope.attribute.explain import explain
    from utilscope.present.layers_view import header_text

    assert " · eager (asked: graph) · " in header_text(explain(a))  # the header names what ran


@pytest.mark.skipif(not torch.backends.cudnn.is_available(), reason="cuDNN's benchmark_limit needs cuDNN")
def test_attribution_measures_with_the_requests_cudnn_settings(tiny, monkeypatch, cudnn_flags):
    """The end-to-end time and the profiled passes run with exactly the request's cuDNN settings."""
    from utilscope.attribute import attribution as module
    from utilscope.measure.settings import CudnnSettings

    seen, end_to_end = [], module.end_to_end_ms

    def recording(*args):
        seen.append((torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit))
        return end_to_end(*args)

    monkeypatch.setattr(module, "end_to_end_ms", recording)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit = True, 10
    for settings, expected in [(CudnnSettings(benchmark=False), (False, 10)), (CudnnSettings(True, 2), (True, 2))]:
        attribute(tiny, batch=1, backend="eager", device="cpu", ceilings="skip", iters=1, cudnn=settings)
        assert seen.pop() == expected
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit) == (True, 10)


def test_layers_cli_json_and_roofline(tiny, tmp_path, capsys):
    from utilscope.cli import main

    png = tmp_path / "roofline.png"
    argv = ["layers", tiny, "--device", "cpu", "--batch", "2", "--peak", "1", "--json", "--roofline", str(png)]
    assert main(argv) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert {"layers", "points", "classes", "roofline", "attainable", "findings", "idle_share"} <= doc.keys()
    gap = doc["attainable"]
    assert gap["fused_utilization"] >= gap["unfused_utilization"] > 0
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "inference"], "needs a CUDA device"),
        (["--top", "0"], "--top must be at least 1"),
        (["--batch", "0"], "batch size must be"),
        (["--precision", "fp16"], "not supported on cpu"),
    ],
)
def test_layers_cli_bad_input(tiny, argv, message, capsys):
    from utilscope.cli import main

    assert main(["layers", tiny, "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("utilscope: error: ") and message in err


def test_attribution_round_trips_through_its_dict(attributed):
    import json

    from utilscope.attribute.records import attribution_from_dict

    rebuilt = attribution_from_dict(json.loads(json.dumps(attributed.to_dict())))
    assert rebuilt == attributed


def test_layer_time_reads_its_count_and_writes_one_flat_record():
    from utilscope.attribute.records import LayerTime
    from utilscope.counting.counter import LayerCount

    counted = LayerCount("conv", "Conv2d", "dense_conv", 100, 10, 64, 48, 16, 8, [[1, 3, 4, 4]], [[1, 2, 4, 4]])
    layer = LayerTime(counted, time_ms=0.5, kernel_count=1, kernels=["k"])
    assert (layer.name, layer.op_class, layer.flops, layer.bytes_fused, layer.output_shapes) == (
        "conv",
        "dense_conv",
        100,
        48,
        [[1, 2, 4, 4]],
    )
    record = layer.to_dict()
    flat = "name type op_class flops other_flops bytes bytes_fused weight_bytes params input_shapes output_shapes"
    flat += " ops unsupported time_ms kernel_count kernels region"
    assert list(record) == flat.split() and LayerTime.from_dict(record) == layer
    # a record saved before it held weight_bytes, ops and unsupported
    old = {key: value for key, value in record.items() if key not in ("weight_bytes", "ops", "unsupported")}
    rebuilt = LayerTime.from_dict(old)
    assert rebuilt.count.weight_bytes is None and rebuilt.flops == 100 and rebuilt.time_ms == 0.5


# --- profiled times against the end-to-end time (CPU: nested ops, several threads, a loaded machine) ---------------


def test_profiled_time_above_the_end_to_end_time_is_scaled_to_it_and_said(tiny, monkeypatch):
    """A loaded CPU slows the profiled passes more than the timed ones: the per-layer times must still fit the
    end-to-end time (as shares they stay as profiled), and the idle share is not measurable, not 0%."""
    from utilscope.attribute import attribution as module
    from utilscope.attribute.explain import explain
    from utilscope.present.layers_view import header_text

    measured = module.end_to_end_ms
    monkeypatch.setattr(module, "end_to_end_ms", lambda *args: (measured(*args)[0] / 20, measured(*args)[1]))
    a = attribute(tiny, batch=2, backend="eager", device="cpu", ceilings="skip", peak_tflops=1.0, iters=2)
    layer_ms = sum(layer.time_ms for layer in a.layers)
    assert a.profiled_ms > a.end_to_end_ms
    assert layer_ms <= a.end_to_end_ms * (1 + 1e-9) and a.kernel_time_ms == pytest.approx(a.end_to_end_ms)
    assert sum(point.time_ms for point in a.points) <= a.end_to_end_ms * (1 + 1e-9)
    assert a.time_scale == pytest.approx(a.end_to_end_ms / a.profiled_ms)
    assert a.idle_share is None
    note = next(note for note in a.notes if "measured end to end" in note)
    assert f"scaled by {a.time_scale:.3g}" in note and "the idle share is not measurable" in note
    assert "not measurable" in header_text(explain(a))
    assert dg_rules(a, "launch_bound") == []  # no launch-bound hint from an unknown idle share


def dg_rules(attribution, pattern):
    from utilscope.attribute.diagnose import diagnose

    return diagnose(attribution, rules=pattern)


def test_ops_of_several_threads_at_once_are_not_counted_twice():
    """Two threads each run a 100 us op under the same layer at once: 200 us of op time in 100 us of wall time."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from utilscope.attribute.reconcile import reconcile
    from utilscope.attribute.trace import RANGE_PREFIX, device_times

    def event(name, start, end, parent=None, thread=1):
        return SimpleNamespace(
            name=name,
            device_type=DeviceType.CPU,
            self_cpu_time_total=end - start,
            cpu_parent=parent,
            kernels=[],
            thread=thread,
            time_range=SimpleNamespace(start=start, end=end),
        )

    main_range, worker_range = event(f"{RANGE_PREFIX}0", 0, 110), event(f"{RANGE_PREFIX}0", 5, 110, thread=2)
    events = [
        main_range,
        event("aten::mm", 10, 110, main_range),
        worker_range,
        event("aten::mm", 10, 110, worker_range, thread=2),
    ]
    times = device_times(events, torch.device("cpu"), iters=1)
    assert times.total_us == pytest.approx(200.0) and times.busy_us == pytest.approx(100.0)
    assert times.per_layer_us == {0: pytest.approx(200.0)}
    fit = reconcile(times.total_us / 1e3, times.busy_us / 1e3, end_to_end_ms=0.4, device_type="cpu")
    # scaled to the 0.1 ms of wall-clock time with an op running: 0.1 / 0.4 = 75% idle, measurable
    assert (fit.scale, fit.device_ms, fit.idle_measurable) == (pytest.approx(0.5), pytest.approx(0.1), True)
    assert "overlap" in fit.notes[0] and "sum to 0.200 ms" in fit.notes[0] and "during 0.100 ms" in fit.notes[0]
    # overlapping and longer than end to end: both scalings, 0.5 x (0.05 / 0.1)
    both = reconcile(0.2, 0.1, end_to_end_ms=0.05, device_type="cpu")
    assert both.scale == pytest.approx(0.25) and both.device_ms == pytest.approx(0.05) and not both.idle_measurable
    assert len(both.notes) == 2
    assert reconcile(0.1, 0.1, 0.2, "cuda") == reconcile(0.1, 0.12, 0.2, "cuda")  # nothing to say: no notes
    assert reconcile(0.1, 0.1, 0.2, "cuda").notes == () and reconcile(0.1, 0.1, 0.2, "cuda").scale == 1.0


def test_a_cpu_profile_prints_no_kineto_lines():
    """``layers`` on a CPU used to print kineto's "ERROR ... gpuGetDeviceCount failed" and its profiler_start/stop
    markers (from C++, on the process's standard error) beside the tables."""
    import os
    import subprocess
    import sys

    code = (
        "import torch\nfrom torch.profiler import ProfilerActivity\n"
        "from utilscope.attribute.trace import _profiled\n"
        "with _profiled([ProfilerActivity.CPU]):\n    torch.ones(4).add_(1)\nprint('profiled')\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout == "profiled\n" and done.stderr == ""
