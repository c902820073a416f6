"""What the layer models see of one op: its analytic cost and its shape.

Every aten op of a traced forward pass (``counting.tracer.OpEvent``; views and tensor creation launch no work and
are left out) becomes one row: its group (``conv``, ``matmul`` or ``memory``), FLOPs, bytes read and written, a
roofline time on the GPU (max of FLOPs / peak and bytes / bandwidth, at least ``FLOOR_MS``), and the shape numbers
of its group: a conv's batch, channels, sizes, kernel, stride, groups and the implicit GEMM's M, N, K with its wave
quantization on the GPU's SMs; a GEMM's M, N, K; a memory-bound op's category (the calibrated op it is, or stands
for), its input and output bytes, channels, kernel and stride. Calibration configs are traced the same way, so the
models are fitted and used on the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from utilscope import hardware
from utilscope.counting.autocast import CAST_OP, autocast_tracer
from utilscope.counting.classify import OpClass, conv_class
from utilscope.counting.formulas import Kind
from utilscope.counting.tracer import OpEvent, Tracer, trace
from utilscope.errors import UsageError
from utilscope.hardware.alignment import channel_multiple, unaligned_sides
from utilscope.precision import Precision
from utilscope.predict.ops import OpConfig, build_op, input_dtypes, laid_out

FLOOR_MS = 0.002  # no kernel takes less: the reference time's floor
TILE = 128  # the GEMM tile side for the wave-quantization feature
SKIPPED_KINDS = (Kind.VIEW, Kind.CREATION)
# a memory-bound op's category: the calibrated op it is, or (by kind) the calibrated op it stands for
CATEGORIES = {
    "aten.native_batch_norm": "batch_norm",
    "aten._native_batch_norm_legit_no_training": "batch_norm",
    "aten.cudnn_batch_norm": "batch_norm",
    "aten.native_layer_norm": "layer_norm",
    "aten.native_group_norm": "group_norm",
    "aten.relu": "relu",
    "aten.relu_": "relu",
    "aten.silu": "silu",
    "aten.silu_": "silu",
    "aten.gelu": "gelu",
    "aten.hardswish": "hardswish",
    "aten.hardswish_": "hardswish",
    "aten.sigmoid": "sigmoid",
    "aten.sigmoid_": "sigmoid",
    "aten.hardsigmoid": "hardswish",
    "aten.hardsigmoid_": "hardswish",
    "aten.add": "add",
    "aten.add_": "add",
    "aten.sub": "add",
    "aten.mul": "mul",
    "aten.mul_": "mul",
    "aten.div": "mul",
    "aten.cat": "concat",
    "aten.clone": "copy",
    "aten.copy_": "copy",
    "aten._to_copy": "copy",
    "aten.max_pool2d_with_indices": "max_pool",
    "aten.max_pool2d": "max_pool",
    "aten.avg_pool2d": "avg_pool",
    "aten.mean": "mean",
    "aten._adaptive_avg_pool2d": "mean",
}
BY_KIND = {
    Kind.ACTIVATION: "relu",
    Kind.ELEMENTWISE: "add",
    Kind.NORM: "batch_norm",
    Kind.POOL: "avg_pool",
    Kind.REDUCE: "mean",
    Kind.MOVEMENT: "copy",
    Kind.SOFTMAX: "layer_norm",
}
# a conv's op class (``counting.classify.conv_class``) as the layer models' style feature
CONV_STYLE_CODES = {
    OpClass.DENSE_CONV: 0,
    OpClass.POINTWISE_CONV: 1,
    OpClass.GROUPED_CONV: 2,
    OpClass.DEPTHWISE_CONV: 3,
}
MULTIPLE_CAP = 256  # the largest channel multiple the layer models tell apart
# an NCHW image's copy to channels_last (``layout_copy_row``): a transposing copy, calibrated apart from the clones
LAYOUT_COPY = "layout_copy"
# a sum over dim 1 of a (B, radix, C, H, W) tensor (ResNeSt's and SKNet's split attention): a strided reduction
RADIX_SUM = "radix_sum"
# autocast's cast of an activation (``CAST_OP``) between fp32 and the 16-bit dtype, and a calibration cast config's
# op: a streaming copy, calibrated apart from the clones (gathering copies on channels_last)
CAST = "cast"
# the memory categories' codes; a category added later takes the next code, so that the others' stay as they were
# fitted (the trees of a profile without it are the same)
CATEGORY_CODES = {
    name: code for code, name in enumerate([*sorted({*CATEGORIES.values(), LAYOUT_COPY}), RADIX_SUM, CAST])
}


@dataclass(frozen=True)
class Gpu:
    """A GPU's datasheet figures the features and the transfer (``transfer``) read: dense peak FLOP/s of the
    precision's math unit (at the boost clock), memory bandwidth in bytes/s, SMs, its spec-table key, the SM clock
    it sustains under load (``predict.sustained``: the boost clock unless its board power holds it below), its
    boost clock, the share of its bandwidth a streaming op reaches, and the precision's math unit."""

    name: str
    peak_flops: float
    bandwidth_bytes: float
    sm_count: int
    key: str = ""
    clock_hz: float = 0.0  # sustained under load
    boost_hz: float = 0.0
    memory_efficiency: float = 0.85
    clock_note: str = ""  # ``Sustained.describe``: the clock assumed and why
    unit: str = "fp16"  # the precision's math unit here (``DeviceSpec.unit_for``): fp32 is the CUDA cores

    @classmethod
    def of(cls, device_name: str, precision: str) -> Gpu:
        """The figures of the spec-table row of a device name (as CUDA reports it), in the precision."""
        spec = hardware.detect(device_name)
        if spec is None:
            raise UsageError(f"the GPU table (specs.toml) has no peak, bandwidth and SM count for {device_name!r}")
        return cls.from_spec(spec, precision)

    @classmethod
    def from_spec(cls, spec: hardware.DeviceSpec, precision: str) -> Gpu:
        """A spec-table row's figures in the precision (its math unit's peak: amp is fp16's)."""
        from utilscope.predict.sustained import sustained

        missing = [name for name in ("sm_count", "boost_clock_mhz", "memory_bandwidth_gbs") if not getattr(spec, name)]
        if missing:
            raise UsageError(f"the GPU table (specs.toml) has no {', '.join(missing)} for {spec.name}")
        held = sustained(spec)
        return cls(
            spec.name,
            spec.peak_tflops(Precision(precision)) * 1e12,
            spec.memory_bandwidth_gbs * 1e9,
            int(spec.sm_count),
            spec.key,
            held.clock_mhz * 1e6,
            spec.boost_clock_mhz * 1e6,
            held.memory_efficiency,
            held.describe(spec),
            spec.unit_for(Precision(precision)),
        )

    @property
    def sm_hz(self) -> float:
        """SM cycles per second over all SMs, at the sustained clock."""
        return self.sm_count * self.clock_hz

    @property
    def streamed_bytes_per_s(self) -> float:
        """The bandwidth a streaming op reaches: the datasheet's times the memory efficiency, held down with the SM
        clock where the board's power holds that below its boost clock (the validation's power-limited RTX PRO 6000
        Max-Q streamed as much less than the RTX 5090, with the same memory, as its clock is lower)."""
        held = self.clock_hz / self.boost_hz if self.boost_hz else 1.0
        return self.bandwidth_bytes * self.memory_efficiency * held

    @property
    def sustained_peak_flops(self) -> float:
        """The dense peak at the sustained clock (the datasheet's is at the boost clock)."""
        return self.peak_flops * (self.clock_hz / self.boost_hz if self.boost_hz else 1.0)


def group_of(event: OpEvent) -> str:
    if event.kind is Kind.CONV:
        return "conv"
    return "matmul" if event.kind is Kind.MATMUL else "memory"


def op_row(event: OpEvent, gpu: Gpu, cast_bytes: int = 0) -> dict:
    """The features of one op (see the module's docstring); ``cast_bytes``: the bytes of autocast's casts folded
    into it (``fold_casts``), read and written besides its own."""
    inputs = [ref.bytes for ref in event.inputs if not ref.is_weight]
    out_bytes = sum(ref.bytes for ref in (event.outputs[:1] if event.first_output_only else event.outputs))
    flops = event.cost.flops + event.cost.other_flops
    moved = event.bytes + cast_bytes
    roofline_ms = max(flops / gpu.peak_flops, moved / gpu.bandwidth_bytes) * 1e3
    row = {
        "op": event.op,
        "group": group_of(event),
        "flops": event.cost.flops,
        "bytes": moved,
        "in_bytes": sum(inputs) + cast_bytes,
        "out_bytes": out_bytes,
        "ref_ms": max(roofline_ms, FLOOR_MS),
    }
    if row["group"] == "conv":
        row.update(conv_shape(event, gpu))
    elif row["group"] == "matmul":
        row.update(matmul_shape(event, gpu))
    else:
        row.update(memory_shape(event, inputs))
    return row


def layout_copy_row(event: OpEvent, gpu: Gpu) -> dict | None:
    """The copy a conv's input gets on the GPU when it arrives NCHW while the weight is channels_last (after a
    GroupNorm, which makes its input contiguous on CUDA): ATen converts the input to channels_last before cuDNN
    runs, a memory-bound op of its own that the trace does not record. Its row is a copy (read and write the
    input once), of the category the calibration's layout copies train (a profile without them: the clones');
    None when the conv needs none."""
    if event.kind is not Kind.CONV or event.layouts[:2] != ("contiguous", "channels_last"):
        return None
    x = event.call.args[0]
    if int(x[2]) * int(x[3]) == 1:
        return None  # a (B, C, 1, 1) tensor is channels_last already
    size = event.inputs[0].bytes
    return _unrecorded_row("layout_copy", LAYOUT_COPY, size, size, x, 0, gpu)


def bias_add_row(event: OpEvent, gpu: Gpu) -> dict | None:
    """The add a conv's bias gets on the GPU: cuDNN convolutions do not take a bias, so ATen adds the (1, C, 1, 1)
    bias to the output in place after cuDNN ran (its note "Convolution design"; inductor peels the bias off the
    same way, "cudnn is slower with it"), a memory-bound kernel over the whole output that the trace, which sees
    one aten.convolution, does not record. Its row stands for the calibrated channel-broadcast multiply (the same
    broadcasting elementwise kernel over a channels_last tensor): read the output and the bias, write the output.
    None when the conv has no bias, or when it is a depthwise conv on NCHW tensors (ATen's own depthwise kernel
    adds the bias itself)."""
    if event.kind is not Kind.CONV or event.call.arg(2, "bias", None) is None:
        return None
    x, weight, out = event.call.args[0], event.call.args[1], event.call.outputs[0]
    depthwise = conv_class(x, weight, _pair(event.call.arg(8, "groups", 1))) is OpClass.DEPTHWISE_CONV
    if depthwise and set(event.layouts[:2]) == {"contiguous"}:
        return None
    out_bytes = event.outputs[0].bytes
    return _unrecorded_row("bias_add", "mul", out_bytes + event.inputs[2].bytes, out_bytes, out, 1, gpu)


def _unrecorded_row(op: str, category: str, in_bytes: int, out_bytes: int, shape, broadcast: int, gpu: Gpu) -> dict:
    """The row of a memory-bound kernel the GPU runs and the trace does not record, over a (B, C, H, W) tensor."""
    moved = in_bytes + out_bytes
    return {
        "op": op,
        "group": "memory",
        "flops": 0,
        "bytes": moved,
        "in_bytes": in_bytes,
        "out_bytes": out_bytes,
        "ref_ms": max(moved / gpu.bandwidth_bytes * 1e3, FLOOR_MS),
        "category": category,
        "batch": int(shape[0]),
        "channels": int(shape[1]),
        "size": int(shape[-1]),
        "kernel": 1,
        "stride": 1,
        "broadcast": broadcast,
        "norm_rows": 0,
        "aligned": 1,
        "strided": 0,
    }


def _pair(value, default: int = 1) -> int:
    if isinstance(value, (list, tuple)):
        return int(value[0]) if value else default
    return default if value is None else int(value)


def _multiples(inputs: int, outputs: int) -> dict:
    """The largest power of two (up to 256) dividing a GEMM's reduction width and its output width (a conv's per
    group). On the H200 grouped convs whose group widths are multiples of 8 but not of 32 (RegNet's 56, 112, 120)
    ran at a tenth of the roofline, those of 64 or more at half of it: a multiple of 8 is not enough."""
    return {"in_multiple": math.gcd(inputs, MULTIPLE_CAP), "out_multiple": math.gcd(outputs, MULTIPLE_CAP)}


def _aligned(inputs: int, outputs: int, multiple: int) -> dict:
    """Whether a GEMM's reduction width and output width (a conv's per group, as the caller passes them) are
    multiples of ``multiple``, by ``hardware.alignment.unaligned_sides`` on those widths (``groups=1``): a depthwise
    conv's features keep its one channel per group, as the predictor was fitted with."""
    unaligned = unaligned_sides(inputs, outputs, multiple)
    return {"aligned_in": int("input" not in unaligned), "aligned_out": int("output" not in unaligned)}


def _waves(m: int, n: int, groups: int, sm_count: int) -> dict:
    tiles = math.ceil(m / TILE) * math.ceil(n / TILE) * groups
    waves = tiles / sm_count
    return {"waves": waves, "wave_efficiency": tiles / (math.ceil(waves) * sm_count)}


ELEMENT_PRECISIONS = {1: "int8", 2: "fp16", 4: "fp32"}  # an op's output bytes per element -> the alignment rule's key


def tensor_multiple(event: OpEvent) -> int:
    """The channel multiple (``hardware.alignment.channel_multiple``) for the element size an op writes: 8 for
    2-byte (fp16/bf16) tensors, 4 for fp32, 16 for int8."""
    elements = math.prod(int(d) for d in event.call.outputs[0]) or 1
    size = round(event.outputs[0].bytes / elements) if event.outputs else 2
    return channel_multiple(ELEMENT_PRECISIONS.get(size, "fp16"))


def conv_shape(event: OpEvent, gpu: Gpu) -> dict:
    x, weight, out = event.call.args[0], event.call.args[1], event.call.outputs[0]
    groups = _pair(event.call.arg(8, "groups", 1))
    batch, channels, size = int(x[0]), int(x[1]), int(x[-1])
    out_channels, per_group, kernel, kernel_w = int(weight[0]), int(weight[1]), int(weight[-2]), int(weight[-1])
    m, n, k = batch * math.prod(out[2:]), out_channels // groups, per_group * math.prod(weight[2:])
    style = CONV_STYLE_CODES[conv_class(x, weight, groups)]
    return {
        "style": style,
        "batch": batch,
        "channels": channels,
        "out_channels": out_channels,
        "size": size,
        "out_size": int(out[-1]),
        "kernel": kernel,
        "kernel_w": kernel_w,
        "stride": _pair(event.call.arg(3, "stride", 1)),
        "dilation": _pair(event.call.arg(5, "dilation", 1)),
        "groups": groups,
        "per_group": per_group,
        "m": m,
        "n": n,
        "k": k,
        **_aligned(per_group, n, tensor_multiple(event)),
        **_multiples(per_group, n),
        **_waves(m, n, groups, gpu.sm_count),
        "strided": int(event.strided),  # its input a channel slice: ATen copies it dense before cuDNN runs
    }


def matmul_shape(event: OpEvent, gpu: Gpu) -> dict:
    a, b = (
        (event.call.args[1], event.call.args[2])
        if event.op in ("aten.addmm", "aten.baddbmm")
        else (event.call.args[0], event.call.args[1])
    )
    batches = math.prod(a[:-2]) if len(a) > 2 else 1
    m, k, n = batches * int(a[-2]) if len(a) > 1 else 1, int(a[-1]), int(b[-1])
    return {
        "m": m,
        "n": n,
        "k": k,
        **_aligned(k, n, tensor_multiple(event)),
        **_multiples(k, n),
        **_waves(m, n, 1, gpu.sm_count),
    }


def _is_radix_sum(event: OpEvent, shape: torch.Size) -> bool:
    """A sum over dim 1 of a 5-D tensor (``shape``, its input's): a split-attention block's over its (B, radix, C,
    H, W) branches."""
    return event.op == "aten.sum" and len(shape) == 5 and list(event.call.arg(1, "dim", None) or ()) == [1]


def memory_shape(event: OpEvent, inputs: list[int]) -> dict:
    category = CAST if event.op == CAST_OP else CATEGORIES.get(event.op) or BY_KIND.get(event.kind, "add")
    first = event.call.args[0] if event.call.args else None
    shape = first if isinstance(first, torch.Size) and len(first) else torch.Size((1,))
    batch, channels = int(shape[0]), int(shape[1]) if len(shape) > 1 else 1
    size = int(shape[-1]) if len(shape) == 4 else 1
    pooling = category in ("max_pool", "avg_pool")
    kernel = _pair(event.call.arg(1, "kernel_size", 1)) if pooling else 1
    if _is_radix_sum(event, shape):  # a branch's channels and size; the radix as the reduction's window
        category, channels, size, kernel = RADIX_SUM, int(shape[2]), int(shape[-1]), int(shape[1])
    stride = _pair(event.call.arg(2, "stride", kernel), kernel) if pooling else 1
    broadcast = int(len(inputs) > 1 and min(inputs) < max(inputs))
    # a group norm's rows (batch x groups), the units its kernel works in parallel: in the H200 calibration those of
    # a few rows ran at up to 240x their roofline, those of 512 or more at about 13x
    norm_rows = batch * int(event.call.arg(6, "group", 1)) if category == "group_norm" else 0
    if event.op == "aten.native_layer_norm":  # its rows: the pixels, each as long as the normalized (channel) size
        channels = math.prod(int(side) for side in event.call.arg(1, "normalized_shape", [channels]))
        norm_rows = math.prod(shape) // max(channels, 1)
        # ATen's vectorized layer norm needs rows of a multiple of 8: in the H200 calibration unaligned rows took
        # about 4x as long as aligned ones of the same length (41 channels: 150x their roofline, 40: 31x). Other
        # ops are 1: a flag for all of them would put the one-group GroupNorms, calibrated at odd widths only,
        # apart from the aligned ones of networks
        aligned = int(channels % 8 == 0)
    else:
        aligned = 1
    return {
        "category": category,
        "batch": batch,
        "channels": channels,
        "size": size,
        "kernel": kernel,
        "stride": stride,
        "broadcast": broadcast,
        "norm_rows": norm_rows,
        "aligned": aligned,
        "strided": int(event.strided),
    }


def config_events(
    config: OpConfig, precision: Precision = Precision.FP16, channels_last: bool = False
) -> list[OpEvent]:
    """The ops of a calibration config, traced on the meta device as a network's are, in the dtypes ``calibrate``
    times it in (``calibrate.op_inputs``): the module in the precision's dtype, its inputs in the precision's
    autocast dtype or its own (fp32 tensors are 4 bytes an element, fp16 and bf16 ones 2), and under autocast
    (amp, amp_bf16) its casts recorded (``counting.autocast``). Its weights and inputs are laid out as ``calibrate``
    timed them (``channels_last``: the profile's layout; ``ops.laid_out``), which decides, for one, whether a
    ``channel_slice``'s slice is strided (``OpEvent.strided``: always on channels_last; on NCHW, at batch 2 and
    more)."""
    with torch.device("meta"):  # no weights to initialize: a 25,088 x 4,096 head would take a second on a CPU
        module, shapes = build_op(config)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    module = module.to(dtype=precision.dtype, memory_format=layout).eval()
    lower = precision.autocast_dtype
    dtypes = input_dtypes(config, shapes, lower or precision.dtype)
    empty = [torch.empty(shape, device="meta", dtype=dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    tensors = laid_out(config, empty, channels_last)

    class Call(torch.nn.Module):  # one input for the tracer; a binary op's second operand rides along
        def __init__(self):
            super().__init__()
            self.op = module

        def forward(self, x):
            return self.op(x, *tensors[1:])

    return kept_events(trace(Call(), tensors[0], autocast_tracer(lower) if lower else Tracer).events)


def kept_events(events: list[OpEvent]) -> list[OpEvent]:
    """The ops that launch work: views and tensor creation are left out."""
    return [e for e in events if e.kind not in SKIPPED_KINDS]


def fold_casts(events: list[OpEvent]) -> list[tuple[OpEvent, int]]:
    """Each op with the bytes of the autocast casts (``counting.autocast.CAST_OP``) its layer ran just before it
    that a calibration under autocast times with the op (its inputs fp16, as between a network's layers): a conv's
    or linear's casts of its weights, a norm's cast up of its input. A cast down of an activation (the fp32 image,
    the fp32 output of a layer norm or of a layer scale) is a row of its own, a copy, as is a cast left with no op
    after it in its layer. A trace without autocast's casts: every op with 0."""
    folded, pending = [], {}
    for event in events:
        if event.op == CAST_OP:
            if _widens(event) or all(ref.is_weight for ref in event.inputs):
                pending.setdefault(event.layer, []).append(event)
            else:  # an activation's cast down: a copy of its own, before the casts its op folds
                folded.append((event, 0))
            continue
        casts = pending.pop(event.layer, [])
        folded.append((event, sum(cast.bytes for cast in casts)))
    leftover = [cast for casts in pending.values() for cast in casts]
    return folded + [(cast, 0) for cast in leftover]


def _widens(cast: OpEvent) -> bool:
    """Whether a cast writes more bytes than it reads (fp16 up to fp32)."""
    return sum(ref.bytes for ref in cast.outputs) > sum(ref.bytes for ref in cast.inputs)
