"""``attribute``: measure one model at one batch size and attribute its device time to layers or fused regions."""

from __future__ import annotations

import torch

from utilscope import hardware, zoo
from utilscope.attribute.records import Attribution, LayerTime, Roofs
from utilscope.attribute.trace import eager_attribution, kernel_sequence, layer_points, region_points
from utilscope.counting import count
from utilscope.counting.counter import check_batch
from utilscope.errors import UsageError
from utilscope.measure.backends import Backend, get_backend
from utilscope.measure.precision import Precision, check_precision, math_mode, parse_precision
from utilscope.measure.profile import Peaks, default_precision, make_input, prepare_module, resolve_peaks
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


def attribute(
    model: str,
    batch: int = 1,
    precision: str | None = None,
    backend: str = "graph",
    device: str | None = None,
    resolution: int | None = None,
    channels_last: bool = True,
    peak_tflops: float | None = None,
    ceilings=None,
    iters: int = 3,
    plan: TimingPlan | None = None,
) -> Attribution:
    """Per-layer (eager, graph) or per-region (compile, inference) device time of one inference of ``model``."""
    dev = hardware.resolve_device(device)
    prec = check_precision(parse_precision(precision or default_precision(dev)), dev)
    chosen = get_backend(backend)
    if chosen.fuses_elementwise and dev.type != "cuda":
        raise UsageError(f"per-region attribution of the {chosen.name} backend needs a CUDA device (kernel names)")
    check_batch(batch)
    spec = zoo.parse_spec(model)
    res = zoo.resolve_resolution(spec, resolution)
    if ceilings is None:
        ceilings = hardware.get_ceilings(dev, refresh=dev.type == "cpu")
    peaks, notes = resolve_peaks(dev, prec, peak_tflops, ceilings or None)
    roofs, ceiling_roofs = make_roofs(dev, prec, peaks, ceilings or None)
    module = prepare_module(zoo.build_model(spec, res), dev, prec, channels_last)
    x = make_input(batch, res, dev, prec, channels_last)
    with math_mode(prec):
        e2e_ms, prepared = end_to_end_ms(chosen, module, x, plan or END_TO_END_PLAN)
        if chosen.fuses_elementwise:
            counts = count(spec.id, batch=batch, resolution=res, dtype=prec.count_dtype)
            kernels = kernel_sequence(prepared.run, dev)
            points, region_of, region_notes = region_points(counts, kernels)
            layers = [_unmeasured(layer, region) for layer, region in zip(counts.layers, region_of, strict=True)]
            kernel_ms = sum(us for _, us in kernels) / 1e3
            attributed_ms, notes = sum(p.time_ms for p in points), notes + region_notes
        else:
            counts, layers, kernel_ms, attributed_ms = eager_attribution(module, x, spec.id, prec.count_dtype, iters)
            points = layer_points(layers)
    spec_row = hardware.detect(hardware.device_name(dev)) if dev.type == "cuda" else None
    return Attribution(
        model=spec.id,
        device_name=hardware.device_name(dev),
        device_type=dev.type,
        backend=chosen.name,
        precision=prec.value,
        batch=batch,
        resolution=res,
        layers=layers,
        points=points,
        kernel_time_ms=kernel_ms,
        attributed_ms=attributed_ms,
        end_to_end_ms=e2e_ms,
        flops=counts.total.flops,
        peak_tflops=peaks.peak_tflops,
        roofs=roofs,
        ceiling_roofs=ceiling_roofs,
        sm_count=spec_row.sm_count if spec_row is not None else None,
        notes=notes + list(prepared.notes),
        kernel_sequence=kernels if chosen.fuses_elementwise else [],
    )


def _unmeasured(layer, region: str) -> LayerTime:
    """A layer of a compiled run: its time is its fused region's."""
    return LayerTime(
        name=layer.name,
        type=layer.type,
        op_class=layer.op_class,
        flops=layer.flops,
        other_flops=layer.other_flops,
        bytes=layer.bytes,
        bytes_fused=layer.bytes_fused,
        params=layer.params,
        input_shapes=layer.input_shapes,
        output_shapes=layer.output_shapes,
        time_ms=None,
        region=region or None,
    )
