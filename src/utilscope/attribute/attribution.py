"""``attribute``: measure one model at one batch size and attribute its device time to layers or fused regions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from utilscope import hardware
from utilscope.attribute.reconcile import reconcile, scaled_layers, scaled_points
from utilscope.attribute.records import Attribution, LayerTime, Point, Roofs
from utilscope.attribute.trace import eager_attribution, kernel_sequence, layer_points, region_points
from utilscope.counting import count
from utilscope.errors import UsageError
from utilscope.limits import check_batch
from utilscope.measure.backends import Backend, get_backend
from utilscope.measure.environment import device_label
from utilscope.measure.precision import Precision, math_mode
from utilscope.measure.settings import MeasureRequest, as_request
from utilscope.measure.sweep import Peaks, Sweep, make_input, prepare_sweep
from utilscope.measure.timing import CpuClock, CudaClock, TimingPlan, measure
from utilscope.models import zoo

END_TO_END_PLAN = TimingPlan(min_total_ms=300.0)


def make_roofs(device: torch.device, precision: Precision, peaks: Peaks, ceilings) -> tuple[Roofs | None, Roofs | None]:
    """Datasheet roofs (the bounds: never beaten) and measured-ceiling roofs, where each is known."""
    spec = hardware.device_spec(device)
    ceiling_roofs = None
    unit = precision.unit_among(ceilings.gemm_tflops if ceilings is not None else {})  # amp: fp16 tensor cores'
    if ceilings is not None and unit in ceilings.gemm_tflops:
        vector = ceilings.gemm_tflops.get("fp32", ceilings.gemm_tflops[unit])
        ceiling_roofs = Roofs(ceilings.gemm_tflops[unit], vector, ceilings.copy_gbs, "measured ceilings")
    if spec is not None and spec.memory_bandwidth_gbs and peaks.peak_tflops:
        vector = spec.peaks_tflops.get("fp32", peaks.peak_tflops)
        return Roofs(peaks.peak_tflops, vector, spec.memory_bandwidth_gbs, f"datasheet: {spec.name}"), ceiling_roofs
    return ceiling_roofs, ceiling_roofs  # CPU or unknown GPU: the measured ceilings are the only roofs


def end_to_end_ms(backend: Backend, module, x: torch.Tensor, plan: TimingPlan) -> tuple[float, object]:
    prepared = backend.prepare(module, x)
    clock = CudaClock(x.device) if x.device.type == "cuda" else CpuClock()
    return measure(prepared.run, clock, plan).median_ms, prepared


@dataclass
class ProfiledRun:
    """One attribution's measurements, before reconciling: per-layer (or per-region) times as profiled."""

    end_to_end_ms: float
    flops: int
    layers: list[LayerTime]
    points: list[Point]
    summed_ms: float  # device time per inference: the profiled times' sum
    busy_ms: float  # wall-clock time per inference with at least one kernel (op) running
    notes: list[str]
    kernel_sequence: list[tuple[str, float]]  # compiled runs: every kernel in order; [] otherwise


def profile_layers(sweep: Sweep, x: torch.Tensor, iters: int) -> ProfiledRun:
    """Time the backend end to end, then profile it: kernel regions (compiled backends) or the eager layers."""
    prec = sweep.precision
    with math_mode(prec), sweep.request.cudnn.applied(sweep.module, x):
        e2e_ms, prepared = end_to_end_ms(sweep.backend, sweep.module, x, sweep.plan)
        if sweep.backend.fuses_elementwise:
            counts = count(sweep.model_id, batch=x.shape[0], resolution=sweep.resolution, dtype=prec.count_dtype)
            kernels = kernel_sequence(prepared.run, x.device)
            points, region_of, notes = region_points(counts, kernels)
            layers = [
                LayerTime(layer, time_ms=None, region=region or None)
                for layer, region in zip(counts.layers, region_of, strict=True)
            ]
            summed_ms = sum(us for _, us in kernels) / 1e3
            return ProfiledRun(
                e2e_ms, counts.total.flops, layers, points, summed_ms, summed_ms, notes + list(prepared.notes), kernels
            )
        counts, layers, times = eager_attribution(sweep.module, x, sweep.model_id, prec.count_dtype, iters)
    return ProfiledRun(
        e2e_ms,
        counts.total.flops,
        layers,
        layer_points(layers),
        times.total_us / 1e3,
        times.busy_us / 1e3,
        list(prepared.notes),
        [],
    )


def attribute(request: MeasureRequest | str, batch: int = 1, iters: int = 3, **options) -> Attribution:
    """Per-layer (eager, graph) or per-region (compile, inference) device time of one inference of the request's
    model at ``batch``, measured with exactly the request's settings (precision, layout, cuDNN). A model string and
    ``MeasureRequest`` fields as keywords work too. The end-to-end time uses the request's timing plan (default:
    300 ms of timed samples)."""
    request = as_request(request, **options)
    if get_backend(request.backend).fuses_elementwise and hardware.resolve_device(request.device).type != "cuda":
        raise UsageError(f"per-region attribution of the {request.backend} backend needs a CUDA device (kernel names)")
    check_batch(batch)
    zoo.check_input(zoo.parse_spec(request.model), batch, request.resolution)  # a model file's fixed batch
    sweep = prepare_sweep(request.replace(plan=request.plan or END_TO_END_PLAN))
    dev, prec = sweep.device, sweep.precision
    roofs, ceiling_roofs = make_roofs(dev, prec, sweep.peaks, sweep.ceilings)
    x = make_input(batch, sweep.resolution, dev, prec, request.channels_last, channels=sweep.channels)
    run = profile_layers(sweep, x, iters)
    fit = reconcile(run.summed_ms, run.busy_ms, run.end_to_end_ms, dev.type)
    layers, points = scaled_layers(run.layers, fit.scale), scaled_points(run.points, fit.scale)
    spec_row = hardware.detect(sweep.environment["device_name"]) if dev.type == "cuda" else None
    return Attribution(
        model=sweep.model_id,
        device_name=device_label(sweep.environment),
        device_type=dev.type,
        backend=sweep.backend.name,
        precision=prec.value,
        batch=batch,
        resolution=sweep.resolution,
        layers=layers,
        points=points,
        kernel_time_ms=fit.device_ms,
        attributed_ms=attributed_ms(layers, points),
        end_to_end_ms=run.end_to_end_ms,
        flops=run.flops,
        peak_tflops=sweep.peaks.peak_tflops,
        roofs=roofs,
        ceiling_roofs=ceiling_roofs,
        sm_count=spec_row.sm_count if spec_row is not None else None,
        notes=sweep.notes + run.notes + list(fit.notes),
        kernel_sequence=run.kernel_sequence,
        profiled_ms=run.summed_ms,
        time_scale=fit.scale,
        idle_measurable=fit.idle_measurable,
        input_channels=sweep.channels,
    )


def attributed_ms(layers: list[LayerTime], points) -> float:
    """The device time mapped to layers (eager, graph) or to fused regions (compiled backends)."""
    if layers and all(layer.time_ms is None for layer in layers):
        return sum(point.time_ms for point in points)
    return sum(layer.time_ms or 0.0 for layer in layers)
