"""``profile``: a batch-size sweep of one model on one backend and precision, turned into utilization rows.

utilization            = flops per sample x samples/s / the datasheet dense peak of the precision's math unit
utilization_vs_ceiling = the same against the measured large-GEMM ceiling of this device
achieved_gbs           = minimum DRAM bytes per batch / latency (fused bytes for backends that fuse)
nvml_util              = NVIDIA's time-based utilization sampled during the timed samples
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from torch import nn

from utilscope import hardware
from utilscope.counting import CountResult, count
from utilscope.errors import UsageError
from utilscope.hardware import USER_PEAK, Ceilings, check_peak_tflops
from utilscope.hardware.utilization import utilization
from utilscope.limits import FIT_RULES, check_batches
from utilscope.measure.backends import BACKENDS, Backend, get_backend
from utilscope.measure.environment import device_label, environment
from utilscope.measure.nvml import NvmlSampler
from utilscope.measure.precision import Precision, check_precision, math_mode, parse_precision
from utilscope.measure.settings import MeasureRequest, apply_threads, as_request
from utilscope.measure.timing import Clock, CpuClock, CudaClock, TimingPlan, TimingStats, measure
from utilscope.models import zoo

# On a GPU the timed samples cover at least 1 s so that NVML's utilization readings (which look back up to 1 s)
# mostly see the timed run; on a CPU 200 ms.
GPU_PLAN = TimingPlan(min_total_ms=1000.0)
CPU_PLAN = TimingPlan(min_total_ms=200.0)
DEFAULT_GPU_BATCHES = (1, 8, 32, 128, 256)
DEFAULT_CPU_BATCHES = (1, 8)
INPUT_SEED = 0
# what torch's CPU allocator says when an allocation fails (a RuntimeError, not an OutOfMemoryError)
UNSTEADY_CEILING = 1.25  # a ceiling whose best repetition is this many times its worst was measured under load
CPU_ALLOCATION_FAILURE = re.compile(r"DefaultCPUAllocator: (can't allocate memory|not enough memory)")


@dataclass(frozen=True)
class Peaks:
    """What utilization is measured against, for one device and precision."""

    peak_tflops: float | None  # dense datasheet peak of the precision's math unit (or --peak, or the ceiling)
    peak_source: str
    ceiling_tflops: float | None  # measured large-GEMM ceiling
    bandwidth_gbs: float | None  # datasheet memory bandwidth
    copy_gbs: float | None  # measured device copy bandwidth


@dataclass
class ProfileRow:
    batch: int
    status: str  # ok | oom | error: ...
    latency_ms: float | None = None
    samples_per_s: float | None = None
    achieved_tflops: float | None = None
    utilization: float | None = None
    utilization_vs_ceiling: float | None = None
    peak_tflops: float | None = None
    peak_source: str = ""
    achieved_gbs: float | None = None
    bandwidth_utilization: float | None = None
    bytes_model: str = ""  # which byte count achieved_gbs uses: unfused | fused
    nvml_util: float | None = None
    cv: float | None = None
    unstable: bool = False  # cv above 3%
    iters_per_sample: int | None = None
    cuda_graph: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class ProfileResult:
    model: str
    resolution: int
    input_channels: int  # the input is batch x input_channels x resolution x resolution
    device: str
    backend: str
    precision: str
    channels_last: bool
    flops_per_sample: int
    environment: dict
    rows: list[ProfileRow]
    ceilings: dict | None = None  # the measured ceilings utilization_vs_ceiling used (``Ceilings.to_dict``)

    @property
    def backend_ran(self) -> str:
        """The backend as it ran: a CUDA-graph backend none of whose rows replayed a graph (on a CPU, or where
        capture failed) ran plain launches: ``graph`` is then ``eager``, ``inference`` inductor without graphs."""
        backend = BACKENDS.get(self.backend, None)
        ok = [row for row in self.rows if row.status == "ok"]
        if backend is None or not backend.cuda_graphs or not ok or any(row.cuda_graph for row in ok):
            return self.backend
        return f"{self.backend} without CUDA graphs" if backend.fuses_elementwise else "eager"

    def to_dict(self) -> dict:
        return {**asdict(self), "backend_ran": self.backend_ran}

    def to_frame(self) -> pd.DataFrame:
        """One row per batch size (``ProfileRow``'s fields), with the model, device, backend and precision."""
        key = {
            "model": self.model,
            "resolution": self.resolution,
            "device": self.device,
            "backend": self.backend,
            "precision": self.precision,
        }
        return pd.DataFrame([{**key, **asdict(row)} for row in self.rows])


def resolve_peaks(
    device: torch.device, precision: Precision, peak_override_tflops: float | None, ceilings
) -> tuple[Peaks, list[str]]:
    """Datasheet peak of the device (or the user's --peak); the measured ceiling where no datasheet applies."""
    notes: list[str] = []
    ceiling = ceilings.gemm_tflops.get(precision.unit_among(ceilings.gemm_tflops)) if ceilings is not None else None
    copy_gbs = ceilings.copy_gbs if ceilings is not None else None
    spec = hardware.device_spec(device)
    bandwidth = spec.memory_bandwidth_gbs if spec is not None else None
    if peak_override_tflops is not None:
        return Peaks(check_peak_tflops(peak_override_tflops), USER_PEAK, ceiling, bandwidth, copy_gbs), notes
    if spec is not None:
        return Peaks(spec.peak_tflops(precision), f"datasheet: {spec.name}", ceiling, bandwidth, copy_gbs), notes
    if device.type == "cuda":
        notes.append(f"unknown GPU '{hardware.device_name(device)}': utilization is against the measured ceiling")
        return Peaks(ceiling, "measured ceiling (unknown GPU)", ceiling, None, copy_gbs), notes
    return Peaks(ceiling, "measured ceiling (CPU: no datasheet peak)", ceiling, None, copy_gbs), notes


def prepare_module(model: nn.Module, device: torch.device, precision: Precision, channels_last: bool) -> nn.Module:
    model = model.to(device=device, dtype=precision.dtype).eval()
    return model.to(memory_format=torch.channels_last) if channels_last else model


def make_input(
    batch: int, resolution: int, device, precision: Precision, channels_last: bool, *, channels: int
) -> torch.Tensor:
    """Random normal input (never zeros) of ``batch`` x ``channels`` x ``resolution`` x ``resolution`` (the model's
    ``zoo.input_channels``, as its count has them), seeded, drawn on the device, in the model's dtype and memory
    format."""
    generator = torch.Generator(device=device).manual_seed(INPUT_SEED)
    shape = (batch, channels, resolution, resolution)
    x = torch.randn(shape, generator=generator, device=device).to(dtype=precision.dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def utilization_row(
    batch: int, stats: TimingStats, work: CountResult, fuses: bool, peaks: Peaks, nvml: float | None
) -> ProfileRow:
    """Turn a timing into the row's throughput, FLOP utilization and bandwidth figures."""
    latency_s = stats.median_ms / 1e3
    samples_per_s = batch / latency_s
    achieved_tflops = work.total.flops * samples_per_s / 1e12
    activation_bytes = (work.total.bytes_fused if fuses else work.total.bytes) - work.total.weight_bytes
    batch_bytes = work.total.weight_bytes + batch * activation_bytes
    achieved_gbs = batch_bytes / latency_s / 1e9
    return ProfileRow(
        batch=batch,
        status="ok",
        latency_ms=stats.median_ms,
        samples_per_s=samples_per_s,
        achieved_tflops=achieved_tflops,
        utilization=utilization(achieved_tflops, peaks.peak_tflops),
        utilization_vs_ceiling=utilization(achieved_tflops, peaks.ceiling_tflops),
        peak_tflops=peaks.peak_tflops,
        peak_source=peaks.peak_source,
        achieved_gbs=achieved_gbs,
        bandwidth_utilization=utilization(achieved_gbs, peaks.bandwidth_gbs),
        bytes_model="fused" if fuses else "unfused",
        nvml_util=nvml,
        cv=stats.cv,
        unstable=stats.unstable,
        iters_per_sample=stats.iters_per_sample,
    )


@dataclass
class Sweep:
    """Everything one batch measurement needs, fixed for the sweep: the request and what it resolved to."""

    request: MeasureRequest
    module: nn.Module
    work: CountResult
    backend: Backend
    precision: Precision
    device: torch.device
    resolution: int
    peaks: Peaks
    clock: Clock
    plan: TimingPlan
    model_id: str
    environment: dict
    ceilings: Ceilings | None  # None when skipped
    notes: list[str] = field(default_factory=list)  # device-level notes (an unknown GPU), given to every row

    @property
    def channels(self) -> int:
        """The input's channels: the count's (``zoo.input_channels``)."""
        return self.work.input_channels


def measure_batch(sweep: Sweep, batch: int) -> ProfileRow:
    """Prepare the backend for this batch size, time it, sample NVML during the timed samples. Raises."""
    x = make_input(
        batch, sweep.resolution, sweep.device, sweep.precision, sweep.request.channels_last, channels=sweep.channels
    )
    with math_mode(sweep.precision), sweep.request.cudnn.applied(sweep.module, x):
        prepared = sweep.backend.prepare(sweep.module, x)
        sampler = NvmlSampler(sweep.device)
        stats = measure(prepared.run, sweep.clock, sweep.plan, during_samples=sampler)
    row = utilization_row(batch, stats, sweep.work, sweep.backend.fuses_elementwise, sweep.peaks, sampler.mean_percent)
    row.cuda_graph = prepared.graph
    row.notes = list(prepared.notes)
    if row.utilization_vs_ceiling is not None and row.utilization_vs_ceiling > 1:
        unit = sweep.precision.unit_among(sweep.ceilings.gemm_tflops)
        row.notes.append(
            f"batch {batch} ran at {row.utilization_vs_ceiling:.0%} of the measured {unit} GEMM "
            "ceiling: it was measured when the machine was busier than now (or this model's kernels beat a large "
            f"GEMM); `utilscope ceilings --device {sweep.device.type} --refresh` re-measures it"
        )
    return row


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's RuntimeError."""
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and CPU_ALLOCATION_FAILURE.search(str(exc)) is not None


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, at most ``limit`` characters ("" for none)."""
    return (str(exc).splitlines() or [""])[0][:limit]


def measured_or_recorded(sweep: Sweep, batch: int) -> ProfileRow:
    """The row of one batch size; an OOM or a failure is recorded as the row's status, not raised."""
    try:
        row = measure_batch(sweep, batch)
        row.notes = sweep.notes + row.notes
    except Exception as exc:  # the sweep is a runner: record the failure as a row and continue
        message = first_line(exc)
        if is_out_of_memory(exc):
            row = ProfileRow(batch=batch, status="oom", notes=[*sweep.notes, f"out of memory: {message}"])
        else:
            row = ProfileRow(batch=batch, status=f"error: {type(exc).__name__}: {message}", notes=list(sweep.notes))
    finally:
        if sweep.device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def smaller_batch(batch: int, rule: str) -> int:
    """The next batch size to try below ``batch`` (0: none): ``halve``, or ``timm`` (timm's benchmark: powers of two
    with a step between, 1024 -> 768 -> 512 -> 384 -> 256 ...; timm's own ``decay_batch_step``)."""
    if rule not in FIT_RULES:
        raise UsageError(f"unknown batch-fitting rule {rule!r}; use one of: {', '.join(FIT_RULES)}")
    if rule == "timm":
        from timm.utils import decay_batch_step

        return decay_batch_step(batch)
    return batch // 2


def fit_batch(sweep: Sweep, too_big: int, floor: int, rule: str = "halve") -> ProfileRow | None:
    """After an out-of-memory at ``too_big``: the row of the largest batch the ``rule`` reaches from it
    (``smaller_batch``) above ``floor`` that runs, or None when none does (or one fails for another reason)."""
    batch = smaller_batch(too_big, rule)
    while batch > floor:
        row = measured_or_recorded(sweep, batch)
        if row.status != "oom":
            if row.status == "ok":
                row.notes.append(f"the largest batch that fits below {too_big}, which ran out of memory")
                return row
            return None
        batch = smaller_batch(batch, rule)
    return None


def run_sweep(
    sweep: Sweep,
    batches: list[int],
    on_row: Callable[[ProfileRow], None] | None = None,
    on_fitted: Callable[[ProfileRow], None] | None = None,
    fit_rule: str = "halve",
) -> list[ProfileRow]:
    """One row per batch size. An OOM or a failure at one batch size is recorded and the sweep goes on.
    ``on_row`` sees each row as soon as it is measured (a survey stores it at once). With ``on_fitted``, a batch
    size that runs out of memory is followed by the largest batch ``fit_rule`` reaches that fits (``fit_batch``),
    given to ``on_fitted`` before the out-of-memory row goes to ``on_row``."""
    rows = []
    for batch in batches:
        row = measured_or_recorded(sweep, batch)
        if row.status == "oom" and on_fitted is not None:
            floor = max((b for b in batches if b < batch), default=0)
            fitted = fit_batch(sweep, batch, floor, fit_rule)
            if fitted is not None:
                on_fitted(fitted)
                row.notes.append(f"largest batch that fits: {fitted.batch}")
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def default_batches(device: torch.device) -> tuple[int, ...]:
    return DEFAULT_GPU_BATCHES if device.type == "cuda" else DEFAULT_CPU_BATCHES


def default_precision(device: torch.device) -> str:
    return "fp16" if device.type == "cuda" else "fp32"


def resolve_ceilings(request: MeasureRequest, device: torch.device) -> Ceilings | None:
    """The request's ceilings: given, skipped, or measured once per device and cached (a CPU's too: measured afresh
    each run it swung with the machine's load from run to run; its spread over repetitions is recorded instead, and
    ``utilscope ceilings --refresh`` re-measures)."""
    if request.ceilings == "skip":
        return None
    if request.ceilings == "measure":
        return hardware.get_ceilings(device)
    return request.ceilings


def ceiling_notes(ceilings, precision: Precision) -> list[str]:
    """A measured ceiling whose repetitions disagree was measured on a busy machine: say so, and how to redo it."""
    unit = precision.unit_among(getattr(ceilings, "gemm_tflops", {}))
    spread = getattr(ceilings, "gemm_spread_tflops", {}).get(unit)
    if not spread or spread["min"] <= 0 or spread["max"] / spread["min"] < UNSTEADY_CEILING:
        return []
    return [
        f"the {unit} GEMM ceiling varied {spread['max'] / spread['min']:.1f}x over its "
        f"{spread['reps']} repetitions ({spread['min']:.3g}-{spread['max']:.3g} TFLOP/s): it was measured on a busy "
        f"machine; `utilscope ceilings --device {ceilings.device_kind} --refresh` re-measures it"
    ]


def check_one_sample(spec: zoo.ModelSpec, resolution: int) -> None:
    """A measurement counts one sample (batch 1) for its utilization: a model file whose batch is fixed at another
    size can be counted and predicted at that batch, not measured (a one-line UsageError saying so)."""
    fixed = zoo.fixed_batch(spec)
    if fixed is not None and fixed != 1:
        raise UsageError(
            f"{spec.name.rpartition('#')[0] or spec.id} runs only at batch {fixed} (its input's batch is fixed in "
            "the file), and measuring counts one sample at batch 1: export it with a dynamic batch (or at batch 1) "
            "to profile it; count and predict take --batch " + str(fixed)
        )
    zoo.check_input(spec, None, resolution)


def prepare_sweep(
    request: MeasureRequest | str,
    clock: Clock | None = None,
    built: nn.Module | None = None,
    counted: CountResult | None = None,
    **options,
) -> Sweep:
    """Resolve the request on its device (precision supported there, native resolution, peaks, ceilings), set
    torch's thread count when the request gives one, count the model and build it on the device. ``built`` /
    ``counted``: the model already built (on the CPU) and counted, so neither is done again. Raises on bad input. A
    model string and ``MeasureRequest`` fields as keywords work too."""
    request = as_request(request, **options)
    dev = hardware.resolve_device(request.device)
    prec = check_precision(parse_precision(request.precision or default_precision(dev)), dev)
    backend = get_backend(request.backend)
    apply_threads(request.threads)  # before the ceilings (a CPU's depend on it) and the environment that records it
    spec = zoo.parse_spec(request.model)
    res = zoo.resolve_resolution(spec, request.resolution)
    check_one_sample(spec, res)
    work = counted or count(spec.id, batch=1, resolution=res, dtype=prec.count_dtype)
    ceilings = resolve_ceilings(request, dev)
    peaks, notes = resolve_peaks(dev, prec, request.peak_tflops, ceilings)
    notes += ceiling_notes(ceilings, prec)
    return Sweep(
        request=request,
        module=prepare_module(zoo.build_model(spec, res) if built is None else built, dev, prec, request.channels_last),
        work=work,
        backend=backend,
        precision=prec,
        device=dev,
        resolution=res,
        peaks=peaks,
        clock=clock or (CudaClock(dev) if dev.type == "cuda" else CpuClock()),
        plan=request.plan or (GPU_PLAN if dev.type == "cuda" else CPU_PLAN),
        model_id=spec.id,
        environment=environment(dev, prec.value, backend.name, request.channels_last, request.cudnn),
        ceilings=ceilings,
        notes=notes,
    )


def profile(request: MeasureRequest | str, batches=None, clock: Clock | None = None, **options) -> ProfileResult:
    """Measure a model's inference over batch sizes and report throughput and utilization per batch size.
    ``profile("torchvision:resnet18", [1, 8], backend="eager")`` is ``profile(MeasureRequest(...), [1, 8])``."""
    request = as_request(request, **options)
    spec = zoo.parse_spec(request.model)
    fixed = zoo.fixed_batch(spec)
    defaults = (fixed,) if fixed is not None else default_batches(hardware.resolve_device(request.device))
    batch_list = check_batches(batches if batches is not None else defaults)
    for batch in batch_list:  # a model file whose batch is fixed: any other is refused before measuring
        zoo.check_input(spec, batch, request.resolution)
    sweep = prepare_sweep(request, clock)
    rows = run_sweep(sweep, batch_list)
    env = sweep.environment
    ceilings = sweep.ceilings.to_dict() if sweep.ceilings is not None else None
    return ProfileResult(
        sweep.model_id,
        sweep.resolution,
        sweep.channels,
        device_label(env),
        sweep.backend.name,
        sweep.precision.value,
        request.channels_last,
        sweep.work.total.flops,
        env,
        rows,
        ceilings,
    )
