"""Count a model's per-layer work: trace it once (meta device, CPU fallback) and aggregate the op events."""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from torch import nn

from utilscope.cache import source_digest
from utilscope.counting.autocast import autocast_tracer
from utilscope.counting.classify import OpClass, event_class
from utilscope.counting.formulas import FUSIBLE_KINDS, Kind
from utilscope.counting.tracer import OpEvent, Trace, Tracer, trace
from utilscope.errors import ModelError, describe
from utilscope.limits import check_batch
from utilscope.models import zoo
from utilscope.models.sources import DEFAULT_FILE_RESOLUTION
from utilscope.precision import COUNTED, check_counted
from utilscope.versions import installed_version

DTYPES = {p.value: p.dtype for p in COUNTED}  # --dtype name -> torch dtype
OP_LAYER_PREFIX = "aten."  # the type of an op-level layer is its op ("aten.add_"); a module's is its class


@dataclass
class LayerCount:
    name: str
    type: str
    op_class: str
    flops: int
    other_flops: int
    bytes: int
    bytes_fused: int  # with elementwise/norm ops fused into their producers (see fusion_savings)
    weight_bytes: int
    params: int
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    ops: dict[str, int] = field(default_factory=dict)
    unsupported: dict[str, int] = field(default_factory=dict)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: flops per byte of minimum DRAM traffic."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def is_empty_op(self) -> bool:
        """An op-level layer (an op issued outside any leaf module, typed by its op) that carries nothing: no
        FLOPs, no bytes, no parameters, no unsupported op; e.g. the ``aten.empty`` of timm's BatchNormAct2d."""
        carries = self.flops or self.other_flops or self.bytes or self.params or self.unsupported
        return self.type.startswith(OP_LAYER_PREFIX) and not carries

    def to_dict(self) -> dict:
        return {**asdict(self), "intensity": self.intensity}


@dataclass(frozen=True)
class Totals:
    flops: int
    other_flops: int
    bytes: int  # unfused: the sum over ops
    bytes_fused: int  # elementwise/norm ops fused into their producers
    weight_bytes: int
    activation_bytes: int
    params: int

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass
class CountResult:
    model: str
    batch: int
    resolution: int
    input_channels: int  # the input is batch x input_channels x resolution x resolution (``zoo.input_channels``)
    dtype: str
    total: Totals
    layers: list[LayerCount]
    unsupported: dict[str, int]
    traced_on: str  # "meta", or "cpu" when the model could not run on the meta device

    def to_dict(self) -> dict:
        """The ``count`` JSON contract (ARCHITECTURE.md), plus op-class shares and fused bytes. Layers that carry
        nothing (``LayerCount.is_empty_op``) are left out and counted per type under ``omitted_layers``."""
        return {
            "model": self.model,
            "batch": self.batch,
            "resolution": self.resolution,
            "input_channels": self.input_channels,
            "dtype": self.dtype,
            "total": {**asdict(self.total), "intensity": self.total.intensity},
            "layers": [layer.to_dict() for layer in self.shown_layers],
            "omitted_layers": self.omitted_layers,
            "op_classes": self.class_summary().to_dict(orient="records"),
            "unsupported": dict(self.unsupported),
            "traced_on": self.traced_on,
        }

    @property
    def shown_layers(self) -> list[LayerCount]:
        """The layers tables, CSV and JSON show: all but the op-level layers that carry nothing."""
        return [layer for layer in self.layers if not layer.is_empty_op]

    @property
    def omitted_layers(self) -> dict[str, int]:
        """How many layers of each type ``shown_layers`` leaves out (``{"aten.empty": 49}``)."""
        return dict(Counter(layer.type for layer in self.layers if layer.is_empty_op))

    def layers_frame(self) -> pd.DataFrame:
        """One row per shown layer (``shown_layers``), without the per-op breakdowns."""
        skipped = ("ops", "unsupported")
        return pd.DataFrame([{k: v for k, v in lay.to_dict().items() if k not in skipped} for lay in self.shown_layers])

    def to_frame(self) -> pd.DataFrame:
        """``layers_frame``: one row per shown layer (name, type, op_class, flops, other_flops, bytes, ...)."""
        return self.layers_frame()

    def class_summary(self) -> pd.DataFrame:
        """Per op class: layer count, flops, other_flops and bytes, each with its share of the network total."""
        frame = self.layers_frame()
        summary = frame.groupby("op_class", sort=False)[["flops", "other_flops", "bytes"]].sum()
        summary.insert(0, "layers", frame.groupby("op_class", sort=False).size())
        for column in ("flops", "other_flops", "bytes"):
            total = summary[column].sum()
            summary[f"{column}_share"] = summary[column] / total if total else 0.0
        return summary.sort_values(["flops", "bytes"], ascending=False).reset_index()


COUNTING_CODE = ("counting", "models")  # the code a count is a function of, beside the versions (``count_version``)


@functools.cache
def count_version() -> str:
    """What a count is a function of besides its model and arguments, as a cache's version text: utilscope's,
    torch's, torchvision's and timm's versions (the model zoos', imported as counting imports them, so that their
    own ``__version__`` is read) and the digest of the counting and model code (once per process)."""
    from utilscope._version import __version__

    for name in ("torchvision", "timm"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    zoo_versions = [installed_version(name) or "-" for name in ("torchvision", "timm")]
    return "|".join([__version__, torch.__version__, *zoo_versions, source_digest(*COUNTING_CODE)])


def check_dtype(dtype: str) -> torch.dtype:
    return DTYPES[check_counted(dtype)]


def count(model: str | nn.Module, batch: int = 1, resolution: int | None = None, dtype: str = "fp32") -> CountResult:
    """Count per-layer FLOPs, bytes and params of ``model`` (a zoo name or a module) for one forward pass."""
    return count_traced(model, batch, resolution, dtype)[0]


def count_traced(
    model: str | nn.Module,
    batch: int = 1,
    resolution: int | None = None,
    dtype: str = "fp32",
    channels_last: bool = False,
    autocast: bool = False,
) -> tuple[CountResult, Trace]:
    """``count``, and the trace it was aggregated from (every op event, for a model of the ops' times);
    ``channels_last``: model and input in that memory format, as ``profile`` runs them (the layouts the ops see,
    and the copies that layout makes, are a GPU's); ``autocast``: fp32 model and input under CUDA autocast to
    ``dtype`` (``counting.autocast``: its casts and fp32 ops are in the trace)."""
    check_batch(batch)
    torch_dtype = check_dtype(dtype)
    tracer_class = Tracer
    if autocast:
        tracer_class, torch_dtype = autocast_tracer(torch_dtype), torch.float32
    if isinstance(model, nn.Module):
        resolution = zoo.check_resolution(DEFAULT_FILE_RESOLUTION if resolution is None else resolution, minimum=1)
        name, module, spec = type(model).__name__, meta_copy(model), None
        rebuild = lambda: _cpu_copy(model)  # noqa: E731  (the caller's module is never changed)
    else:
        spec = zoo.parse_spec(model)
        resolution = zoo.resolve_resolution(spec, resolution)
        zoo.check_input(spec, batch, resolution)  # a model file whose input shape is fixed runs only at it
        name = spec.id
        module, _ = zoo.build_on_meta(spec, resolution)
        rebuild = lambda: zoo.build_uninitialized(spec, resolution)  # noqa: E731
    shape = (batch, zoo.input_channels(module, spec), resolution, resolution)
    recorded, traced_on = _trace_anywhere(module, rebuild, shape, torch_dtype, name, channels_last, tracer_class)
    params = sum(p.numel() for p in module.parameters())
    return aggregate(recorded, name, shape, dtype, params, traced_on), recorded


def meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose parameters and buffers live on the meta device (no tensor data is copied)."""
    memo: dict[int, torch.Tensor] = {}
    for param in model.parameters():
        memo[id(param)] = nn.Parameter(torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
    for buffer in model.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    return copy.deepcopy(model, memo)


def _cpu_copy(model: nn.Module) -> nn.Module:
    """A CPU copy of a user's module; a module on the meta device gets uninitialized CPU tensors."""
    duplicate = copy.deepcopy(model)
    on_meta = any(t.device.type == "meta" for t in (*duplicate.parameters(), *duplicate.buffers()))
    return duplicate.to_empty(device="cpu") if on_meta else duplicate


def trace_on_meta(
    module: nn.Module, shape: tuple[int, ...], dtype: torch.dtype, channels_last: bool = False, tracer_class=Tracer
) -> Trace:
    """The trace of a module on the meta device fed an input of ``shape``, as ``count_traced`` traces a network:
    module and input in ``dtype`` and (``channels_last``) that memory format (under autocast: an fp32 module and
    input, and ``counting.autocast``'s tracer)."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    example = torch.empty(shape, dtype=dtype, device="meta").contiguous(memory_format=layout)
    return trace(module.to(dtype=dtype, memory_format=layout).eval(), example, tracer_class)


def _trace_anywhere(module, rebuild, shape, dtype, name, channels_last=False, tracer_class=Tracer) -> tuple[Trace, str]:
    """Trace on the meta device, fed an input of ``shape`` (batch, channels, side, side); models that need real data
    (or fail on meta) are rebuilt and traced on the CPU. torch's own warnings while it runs them (a fused kernel it
    cannot dispatch to on the CPU under autocast's mixed dtypes) say nothing of the count, and are not shown."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        try:
            return trace_on_meta(module, shape, dtype, channels_last, tracer_class), "meta"
        except Exception:
            module = rebuild()  # the failure, if real, surfaces on the CPU below with its message
        try:
            module = module.to(device="cpu", dtype=dtype, memory_format=layout).eval()
            return trace(module, torch.randn(shape).to(dtype).contiguous(memory_format=layout), tracer_class), "cpu"
        except Exception as exc:
            raise ModelError(f"running {name} on a {'x'.join(map(str, shape))} input failed: {describe(exc)}") from exc


def aggregate(recorded: Trace, model: str, shape: tuple[int, ...], dtype: str, params: int, traced_on: str):
    """Fold op events into per-layer counts and network totals; ``shape``: the input's (batch, channels, side,
    side)."""
    per_layer: list[list[OpEvent]] = [[] for _ in recorded.layers]
    for event in recorded.events:
        per_layer[event.layer].append(event)
    savings = fusion_savings(recorded.events, recorded.output_keys)
    saved_per_layer = [0] * len(recorded.layers)
    for event, saved in zip(recorded.events, savings, strict=True):
        saved_per_layer[event.layer] += saved
    layers = [
        _layer(slot, events, saved)
        for slot, events, saved in zip(recorded.layers, per_layer, saved_per_layer, strict=True)
    ]
    unsupported = Counter(e.op for e in recorded.events if e.kind is None)
    unfused = sum(e.bytes for e in recorded.events)
    weight_bytes = sum(e.weight_bytes for e in recorded.events)
    totals = Totals(
        flops=sum(layer.flops for layer in layers),
        other_flops=sum(layer.other_flops for layer in layers),
        bytes=unfused,
        bytes_fused=unfused - sum(savings),
        weight_bytes=weight_bytes,
        activation_bytes=unfused - weight_bytes,
        params=params,
    )
    batch, channels, resolution = shape[:3]
    return CountResult(model, batch, resolution, channels, dtype, totals, layers, dict(unsupported), traced_on)


def _layer(slot, events: list[OpEvent], saved_bytes: int) -> LayerCount:
    dominant = max(events, key=lambda e: (e.cost.flops, e.cost.other_flops, e.bytes), default=None)
    if slot.in_se:
        op_class = OpClass.SE_GATE
    else:
        op_class = event_class(dominant.kind, dominant.call) if dominant is not None else OpClass.OTHER
    return LayerCount(
        name=slot.name,
        type=slot.type,
        op_class=op_class.value,
        flops=sum(e.cost.flops for e in events),
        other_flops=sum(e.cost.other_flops for e in events),
        bytes=sum(e.bytes for e in events),
        bytes_fused=sum(e.bytes for e in events) - saved_bytes,
        weight_bytes=sum(e.weight_bytes for e in events),
        params=slot.params,
        input_shapes=slot.input_shapes,
        output_shapes=slot.output_shapes,
        ops=dict(Counter(e.op for e in events)),
        unsupported=dict(Counter(e.op for e in events if e.kind is None)),
    )


def fusion_savings(events: list[OpEvent], output_keys: frozenset[int], fuses_into=None) -> list[int]:
    """Bytes an ideal runtime saves, per event, by fusing each elementwise/norm op into the producer of its main
    input.

    The main input is the largest non-weight input (the latest produced among equals). Fusing removes the op's
    read of it (saved by the fused op); the producer's write of it is removed too (saved by the producer) when the
    fused op is its only consumer and it is not a network output. ``fuses_into(event)``: whether a real runtime
    fuses into that producer at all (default: every producer, the ideal).
    """
    producer = {ref.key: index for index, e in enumerate(events) for ref in e.outputs}
    consumers = Counter(ref.key for e in events for ref in e.inputs)
    saved = [0] * len(events)
    for index, event in enumerate(events):
        if event.kind not in FUSIBLE_KINDS:
            continue
        activations = [ref for ref in event.inputs if not ref.is_weight]
        if not activations:
            continue
        # the largest input; among equals the most recently produced one (what a fusing compiler fuses into)
        main = max(activations, key=lambda ref: (ref.bytes, producer.get(ref.key, -1)))
        if main.key not in producer:
            continue  # the network input: nothing to fuse into
        if fuses_into is not None and not fuses_into(events[producer[main.key]]):
            continue
        saved[index] += main.bytes
        if consumers[main.key] == 1 and main.key not in output_keys:
            saved[producer[main.key]] += main.bytes
    return saved


__all__ = ["CountResult", "LayerCount", "Totals", "count", "Kind"]
