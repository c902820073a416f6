"""Measurement on the CPU: harness statistics on a fake clock, utilization arithmetic, sweep rows, bad input."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

import pytest
import torch
from conftest import QUICK, TINY_FLOPS
from torch import nn

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.hardware import Ceilings
from utilscope.measure import backends, profile
from utilscope.measure.precision import Precision, check_precision, parse_precision
from utilscope.measure.sweep import Peaks, utilization_row
from utilscope.measure.timing import CpuClock, TimingPlan, TimingStats, iters_per_sample, measure, summarize


class FakeClock:
    """Each call of ``fn`` 'takes' the next duration of a script; ``time_ms`` adds them up."""

    def __init__(self, per_call_ms):
        self.per_call_ms = list(per_call_ms)
        self.calls = 0

    def time_ms(self, fn, iters: int) -> float:
        total = 0.0
        for _ in range(iters):
            fn()
            total += self.per_call_ms[min(self.calls, len(self.per_call_ms) - 1)]
            self.calls += 1
        return total


def test_warmup_is_excluded_and_iterations_adapt_to_the_work():
    # 3 warm-up calls of 500 ms (autotuning), then 2 ms calls: warm-up also needs >= 100 ms, which 3 calls give.
    clock = FakeClock([500, 500, 500] + [2.0] * 10_000)
    plan = TimingPlan(warmup_iters=3, warmup_ms=100, samples=10, min_total_ms=200)
    stats = measure(lambda: None, clock, plan)
    assert stats.warmup_iters == 3
    # the last warm-up call took 500 ms -> 200 ms / 10 samples = 20 ms per sample -> ceil(20 / 500) = 1 call
    assert stats.iters_per_sample == 1
    assert stats.median_ms == 2.0 and stats.cv == 0.0


def test_fast_function_gets_many_iterations_per_sample():
    clock = FakeClock([0.05] * 100_000)
    stats = measure(lambda: None, clock, TimingPlan(warmup_iters=3, warmup_ms=1, samples=10, min_total_ms=200))
    # 200 ms / 10 samples = 20 ms per sample; 20 / 0.05 = 400 calls per sample; total 10 * 400 * 0.05 = 200 ms
    assert stats.iters_per_sample == 400
    assert stats.total_ms == pytest.approx(200.0)
    assert stats.median_ms == pytest.approx(0.05)


def test_iters_per_sample_bounds():
    plan = TimingPlan(samples=10, min_total_ms=200, max_iters_per_sample=1000)
    assert iters_per_sample(100.0, plan) == 1  # one call already exceeds 20 ms
    assert iters_per_sample(3.0, plan) == 7  # ceil(20 / 3)
    assert iters_per_sample(0.0, plan) == 1000  # an unmeasurably fast call is capped


def test_median_and_cv_of_samples():
    samples = [10.0, 10.0, 11.0, 9.0, 10.0]
    stats = summarize(samples, iters=4, warmup_iters=3)
    assert stats.median_ms == 10.0
    # population std of (0, 0, 1, -1, 0) = sqrt(2/5) = 0.632; / mean 10 = 0.0632
    assert stats.cv == pytest.approx(statistics.pstdev(samples) / 10.0) == pytest.approx(0.0632, abs=1e-4)
    assert stats.unstable  # above 3%
    assert not summarize([10.0, 10.1, 9.9], 1, 1).unstable  # cv 0.8%


def test_cpu_clock_times_real_work():
    elapsed_ms = CpuClock().time_ms(lambda: sum(range(10_000)), iters=5)
    assert elapsed_ms > 0


@dataclass
class _Work:
    """A stand-in CountResult: 4 GFLOP per sample, 10 MB of weights, 30 MB of activations unfused, 12 MB fused."""

    class total:  # noqa: N801
        flops = 4_000_000_000
        bytes = 40_000_000
        bytes_fused = 22_000_000
        weight_bytes = 10_000_000


def test_utilization_arithmetic():
    stats = TimingStats(median_ms=8.0, cv=0.01, samples_ms=(8.0,), iters_per_sample=5, warmup_iters=3)
    peaks = Peaks(
        peak_tflops=1000.0, peak_source="datasheet: test", ceiling_tflops=800.0, bandwidth_gbs=4000.0, copy_gbs=3500.0
    )
    row = utilization_row(256, stats, _Work(), fuses=False, peaks=peaks, nvml=97.0)
    # 256 samples / 8 ms = 32000 samples/s; x 4 GFLOP = 128 TFLOP/s; / 1000 = 12.8%; / 800 = 16%
    assert row.samples_per_s == pytest.approx(32_000)
    assert row.achieved_tflops == pytest.approx(128.0)
    assert row.utilization == pytest.approx(0.128)
    assert row.utilization_vs_ceiling == pytest.approx(0.16)
    # unfused bytes per batch: 10 MB weights + 256 x 30 MB activations = 7690 MB in 8 ms = 961.25 GB/s
    assert row.achieved_gbs == pytest.approx(961.25)
    assert row.bandwidth_utilization == pytest.approx(961.25 / 4000)
    assert (row.nvml_util, row.cv, row.unstable, row.status) == (97.0, 0.01, False, "ok")
    fused = utilization_row(256, stats, _Work(), fuses=True, peaks=peaks, nvml=None)
    # fused: 10 MB + 256 x 12 MB = 3082 MB in 8 ms = 385.25 GB/s
    assert fused.achieved_gbs == pytest.approx(385.25) and fused.bytes_model == "fused"


NO_CEILINGS = "skip"  # the CPU ceiling measurement is tested in test_hardware


@pytest.mark.parametrize("backend", ["eager", "graph"])
def test_profile_rows_on_cpu(tiny, backend):
    result = profile(
        tiny, batches=[1, 4], backend=backend, device="cpu", ceilings=NO_CEILINGS, peak_tflops=1.0, plan=QUICK
    )
    assert [row.status for row in result.rows] == ["ok", "ok"]
    for row in result.rows:
        assert row.latency_ms > 0 and row.samples_per_s == pytest.approx(row.batch / row.latency_ms * 1e3)
        assert row.achieved_tflops == pytest.approx(result.flops_per_sample * row.samples_per_s / 1e12)
        assert row.utilization == pytest.approx(row.achieved_tflops / 1.0)
        assert row.peak_source == "user --peak" and row.nvml_util is None
    if backend == "graph":
        assert "CUDA graphs need a CUDA device: plain launches" in result.rows[0].notes
    assert result.environment["device_type"] == "cpu" and result.environment["memory_format"] == "channels_last"
    assert result.environment["device_uuid"] is None  # a GPU's names which of the machine's GPUs measured
    assert result.flops_per_sample == TINY_FLOPS


def test_cpu_peak_is_the_measured_ceiling(tiny):
    ceilings = Ceilings("cpu", "cpu", {"fp32": 0.5}, 20.0, "2026-01-01T00:00:00+00:00", torch.__version__, "test")
    result = profile(tiny, batches=[1], device="cpu", ceilings=ceilings, plan=QUICK)
    row = result.rows[0]
    assert row.peak_tflops == 0.5 and row.peak_source.startswith("measured ceiling (CPU")
    assert row.utilization == pytest.approx(row.utilization_vs_ceiling)


@pytest.fixture()
def failing_backend():
    """A backend that runs out of GPU memory at batch 2, fails otherwise at batch 3, fails a real CPU allocation
    (4 EiB: torch's allocator raises a RuntimeError) at batch 5 and raises Python's MemoryError at batch 6."""

    def prepare(model: nn.Module, x: torch.Tensor):
        if x.shape[0] == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 99 GiB")
        if x.shape[0] == 3:
            raise RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nsecond line")
        if x.shape[0] == 5:
            torch.empty(1 << 62, dtype=torch.uint8)
        if x.shape[0] == 6:
            raise MemoryError()
        return backends.eager(model, x)

    backends.register_backend("test-failing", fuses_elementwise=False, description="test only")(prepare)
    yield "test-failing"
    del backends.BACKENDS["test-failing"]


def test_oom_and_error_rows_and_the_sweep_goes_on(tiny, failing_backend):
    result = profile(
        tiny,
        batches=[1, 2, 3, 4, 5, 6],
        backend=failing_backend,
        device="cpu",
        ceilings=NO_CEILINGS,
        peak_tflops=1.0,
        plan=QUICK,
    )
    statuses = [row.status for row in result.rows]
    assert statuses == ["ok", "oom", "error: RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", "ok", "oom", "oom"]
    assert result.rows[1].latency_ms is None and result.rows[1].utilization is None
    # a failed CPU allocation is an oom row, as on the GPU, and the row says what was asked for
    assert any("DefaultCPUAllocator: can't allocate memory" in note for note in result.rows[4].notes)
    assert "out of memory: CUDA out of memory. Tried to allocate 99 GiB" in result.rows[1].notes


def test_profile_cli_json(tiny, capsys):
    assert main(["profile", tiny, "--device", "cpu", "--batch", "1", "--peak", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"model", "device", "backend", "precision", "rows"} <= doc.keys()
    row_keys = {
        "batch",
        "latency_ms",
        "samples_per_s",
        "achieved_tflops",
        "utilization",
        "utilization_vs_ceiling",
        "peak_tflops",
        "peak_source",
        "nvml_util",
        "cv",
        "status",
    }
    assert row_keys <= doc["rows"][0].keys()
    assert doc["backend"] == "graph" and doc["precision"] == "fp32" and doc["rows"][0]["status"] == "ok"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch", "-3"], "batch size must be"),
        (["--batch", "0,8"], "batch size must be"),
        (["--batch", "1,x"], "batch sizes must be comma-separated integers"),
        (["--backend", "tensorrt"], "unknown backend 'tensorrt'; use one of: eager, graph, compile, inference"),
        (["--precision", "fp8"], "unknown precision 'fp8'"),
        (["--precision", "fp16"], "precision fp16 is not supported on cpu"),
        (["--precision", "tf32"], "precision tf32 is not supported on cpu"),
        (["--peak", "-5"], "--peak must be a positive, finite number"),
        (["--peak", "nan"], "--peak must be a positive, finite number"),
        (["--peak", "inf"], "--peak must be a positive, finite number"),
        (["--peak", "0"], "--peak must be a positive, finite number"),
        (["--cudnn-benchmark-limit", "-1"], "must be 0 (all algorithms) or more"),
        (["--backend", "inference", "--cudnn-depthwise-heuristic"], "not inference"),
        (["--device", "tpu"], ""),
    ],
)
def test_profile_bad_input_exit_2(tiny, argv, message, capsys):
    assert main(["profile", tiny, "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("utilscope: error: ") and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("peak", ["nan", "inf", "0", "-1"])
@pytest.mark.parametrize("verb", ["profile", "layers", "survey"])
def test_a_bad_peak_is_one_line_and_exit_2_on_every_verb(tiny, tmp_path, verb, peak, capsys):
    db = tmp_path / "r.sqlite"
    argv = ["--models", tiny, "--db", str(db)] if verb == "survey" else [tiny]
    assert main([verb, *argv, "--device", "cpu", "--batch", "1", "--peak", peak]) == 2
    err = capsys.readouterr().err
    assert err.startswith("utilscope: error: --peak must be a positive, finite number") and err.count("\n") == 1
    assert not db.exists()  # a usage error never creates the store


def test_precisions():
    assert parse_precision("bf16") is Precision.BF16 and Precision.FP16.dtype is torch.float16
    assert Precision.TF32.dtype is torch.float32 and Precision.TF32.count_dtype == "fp32"
    with pytest.raises(UsageError):
        check_precision(Precision.FP16, torch.device("cpu"))


def test_backend_registry():
    assert list(backends.BACKENDS)[:4] == ["eager", "graph", "compile", "inference"]
    with pytest.raises(ValueError, match="registered twice"):
        backends.register_backend("eager", False, "again")(backends.eager)
    with pytest.raises(UsageError, match="unknown backend"):
        backends.get_backend("nope")


def test_inference_backend_folds_batchnorm_in_fp32():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    folded, notes = backends.fold_batchnorm(model, x)
    assert notes == () and not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert isinstance(model[1], nn.BatchNorm2d)  # the original is untouched
    with torch.no_grad():
        torch.testing.assert_close(folded(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("gpu_name", "source", "peak"),
    [
        ("NVIDIA H200", "datasheet: NVIDIA H200 SXM", 989.4),
        ("NVIDIA H100 80GB HBM3", "datasheet: NVIDIA H100 SXM", 989.4),
        ("Some Future GPU", "measured ceiling (unknown GPU)", 700.0),
    ],
)
def test_peaks_on_gpus(monkeypatch, gpu_name, source, peak):
    """Detection from the CUDA device name; an unknown GPU falls back to the measured ceiling and says so."""
    from utilscope import hardware
    from utilscope.hardware import ceilings
    from utilscope.measure.sweep import resolve_peaks

    for module in (hardware, ceilings):  # the name the note gives, and the one device_spec detects
        monkeypatch.setattr(module, "device_name", lambda device: gpu_name)

    @dataclass
    class FakeCeilings:
        gemm_tflops: dict
        copy_gbs: float

    peaks, notes = resolve_peaks(torch.device("cuda"), Precision.FP16, None, FakeCeilings({"fp16": 700.0}, 4000.0))
    assert (peaks.peak_source, peaks.peak_tflops, peaks.ceiling_tflops) == (source, peak, 700.0)
    assert bool(notes) == source.startswith("measured")
    override, _ = resolve_peaks(torch.device("cuda"), Precision.FP16, 500.0, None)
    assert (override.peak_tflops, override.peak_source) == (500.0, "user --peak")


def test_nvml_handle_is_found_by_the_devices_uuid(monkeypatch):
    """NVML numbers every GPU of the machine; torch only the visible ones: cuda:0 of a worker given the second GPU
    (CUDA_VISIBLE_DEVICES=1) must be sampled as that GPU, which its UUID names, not as NVML's device 0."""
    from utilscope.measure.nvml import nvml_handle

    class Properties:
        uuid = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"

    class FakeNvml:
        def nvmlDeviceGetHandleByUUID(self, uuid):
            return ("by-uuid", uuid)

        def nvmlDeviceGetHandleByIndex(self, index):
            raise AssertionError("an index names another GPU under CUDA_VISIBLE_DEVICES")

    looked_up = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: looked_up.append(index) or Properties())
    handle = nvml_handle(FakeNvml(), torch.device("cuda", 0))
    assert handle == ("by-uuid", "GPU-0f1e2d3c-aaaa-bbbb-cccc-000000000001") and looked_up == [0]


def test_an_out_of_memory_batch_shrinks_by_halves_or_by_timms_steps():
    from utilscope.measure.sweep import smaller_batch

    def chain(rule: str) -> list[int]:
        batches = [1024]
        while batches[-1]:
            batches.append(smaller_batch(batches[-1], rule))
        return batches[1:-1]

    assert chain("halve") == [512, 256, 128, 64, 32, 16, 8, 4, 2, 1]
    assert chain("timm") == [768, 512, 384, 256, 192, 128, 96, 64, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2, 1]
    with pytest.raises(UsageError, match="unknown batch-fitting rule 'thirds'"):
        smaller_batch(8, "thirds")
