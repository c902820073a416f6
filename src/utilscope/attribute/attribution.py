"""``attribute``: measure one model at one batch size and attribute its device time to layers or fused regions."""

from __future__ import annotations

import torch

from utilscope import hardware
from utilscope.attribute.records import Attribution, LayerTime, Roofs
from utilscope.attribute.trace import eager_attribution, kernel_sequence, layer_points, region_points
from utilscope.counting import count
from utilscope.counting.counter import check_batch
from utilscope.errors import UsageError
from utilscope.measure.backends import Backend, get_backend
from utilscope.measure.precision import Precision, math_mode
from utilscope.measure.settings import MeasureRequest, as_request
from utilscope.measure.sweep import Peaks, make_input, prepare_sweep
from utilscope.measure.timing import CpuClock, CudaClock, TimingPlan, measure

END_TO_END_PLAN = TimingPlan(min_total_ms=300.0)


def make_roofs(device: torch.device, precision: Precision, peaks: Peaks, ceilings) -> tuple[Roofs | None, Roofs | None]:
    """Datasheet roofs (the bounds: never beaten) and measured-ceiling roofs, where each is known."""
    spec = hardware.detect(hardware.device_name(device)) if device.type == "cuda" else None
    ceiling_roofs = None
    if ceilings is not None and precision.value in ceilings.gemm_tflops:
        vector = ceilings.gemm_tflops.get("fp32", ceilings.gemm_tflops[precision.value])
        ceiling_roofs = Roofs(ceilings.gemm_tflops[precision.value], vector, ceilings.copy_gbs, "measured ceilings")
    if spec is not None and spec.memory_bandwidth_gbs and peaks.peak_tflops:
        vector = spec.peaks_tflops.get("fp32", peaks.peak_tflops)
        return Roofs(peaks.peak_tflops, vector, spec.memory_bandwidth_gbs, f"datasheet: {spec.name}"), ceiling_roofs
    return ceiling_roofs, ceiling_roofs  # CPU or unknown GPU: the measured ceilings are the only roofs


def end_to_end_ms(backend: Backend, module, x: torch.Tensor, plan: TimingPlan) -> tuple[float, object]:
    prepared = backend.prepare(module, x)
    clock = CudaClock(x.device) if x.device.type == "cuda" else CpuClock()
    return measure(prepared.run, clock, plan).median_ms, prepared


def attribute(request: MeasureRequest | str, batch: int = 1, iters: int = 3, **options) -> Attribution:
    """Per-layer (eager, graph) or per-region (compile, inference) device time of one inference of the request's
    model at ``batch``, measured with exactly the request's settings (precision, layout, cuDNN). A model string and
    ``MeasureRequest`` fields as keywords work too. The end-to-end time uses the request's timing plan (default:
    300 ms of timed samples)."""
    request = as_request(request, **options)
    if get_backend(request.backend).fuses_elementwise and hardware.resolve_device(request.device).type != "cuda":
        raise UsageError(f"per-region attribution of the {request.backend} backend needs a CUDA device (kernel names)")
    check_batch(batch)
    sweep = prepare_sweep(request.replace(plan=request.plan or END_TO_END_PLAN))
    dev, prec = sweep.device, sweep.precision
    roofs, ceiling_roofs = make_roofs(dev, prec, sweep.peaks, sweep.ceilings)
    x = make_input(batch, sweep.resolution, dev, prec, request.channels_last)
    with math_mode(prec), request.cudnn.applied(sweep.module, x):
        e2e_ms, prepared = end_to_end_ms(sweep.backend, sweep.module, x, sweep.plan)
        if sweep.backend.fuses_elementwise:
            counts = count(sweep.model_id, batch=batch, resolution=sweep.resolution, dtype=prec.count_dtype)
            kernels = kernel_sequence(prepared.run, dev)
            points, region_of, region_notes = region_points(counts, kernels)
            layers = [
                LayerTime(layer, time_ms=None, region=region or None)
                for layer, region in zip(counts.layers, region_of, strict=True)
            ]
            kernel_ms, attributed_ms = sum(us for _, us in kernels) / 1e3, sum(p.time_ms for p in points)
        else:
            counts, layers, kernel_ms, attributed_ms = eager_attribution(
                sweep.module, x, sweep.model_id, prec.count_dtype, iters
            )
            points, region_notes = layer_points(layers), []
    spec_row = hardware.detect(sweep.environment["device_name"]) if dev.type == "cuda" else None
    return Attribution(
        model=sweep.model_id,
        device_name=sweep.environment["device_name"],
        device_type=dev.type,
        backend=sweep.backend.name,
        precision=prec.value,
        batch=batch,
        resolution=sweep.resolution,
        layers=layers,
        points=points,
        kernel_time_ms=kernel_ms,
        attributed_ms=attributed_ms,
        end_to_end_ms=e2e_ms,
        flops=counts.total.flops,
        peak_tflops=sweep.peaks.peak_tflops,
        roofs=roofs,
        ceiling_roofs=ceiling_roofs,
        sm_count=spec_row.sm_count if spec_row is not None else None,
        notes=sweep.notes + region_notes + list(prepared.notes),
        kernel_sequence=kernels if sweep.backend.fuses_elementwise else [],
    )
