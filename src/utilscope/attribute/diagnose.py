"""Diagnosis: rules that name a likely cause of low utilization, with the numbers behind it and what would change it.

Each rule is a pure function ``(attribution, context) -> list[Finding]`` kept in a decorator registry (``RULES``).
The findings are advice, not verdicts: every one carries its evidence and what would move it.

Time shares are shares of the measured end-to-end time (``Context.total_ms``: the larger of the end-to-end and the
kernel time), so a finding's share is what it costs in latency and idle time is a share like any other. A layer
inside a fused region (compiled backends: ``LayerTime.time_ms`` is None) is charged its region's time, an upper
bound that the evidence says it is. Every threshold lives in ``Thresholds``; the rules hold no numbers of their own.

Rules (thresholds in ``Thresholds``):

* ``memory_bound_low_intensity`` — depthwise / pointwise / grouped conv points whose FLOP per byte is below the
  roofs' ridge and that take >= ``min_layer_share`` of the time.
* ``unaligned_channels`` — conv / linear layers whose input or output channels are not a multiple of
  ``alignment[precision]`` (the network input's channels are left out: the data fixes them).
* ``too_little_work`` — conv / linear layers whose output tiles (``tile_m`` x ``tile_n``) are fewer than the SMs.
* ``unfused_elementwise`` — norm / activation / elementwise layers run as their own kernels, together taking
  >= ``min_class_share``; one network-level finding, plus the ``max_layer_findings`` biggest layers.
* ``squeeze_excite`` — SE blocks taking >= ``min_class_share`` of the time and ``se_time_over_flops`` times their
  FLOP share; one network-level finding, plus the biggest blocks.
* ``launch_bound`` — idle share (no kernel running) >= ``idle_share``.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from utilscope.attribute.records import Attribution, LayerTime, Point
from utilscope.hardware.alignment import channel_multiple, penalty_for, round_up, unaligned_sides
from utilscope.measure.backends import BACKENDS
from utilscope.units import si

LOW_INTENSITY_CLASSES = ("depthwise_conv", "pointwise_conv", "grouped_conv")
CONV_CLASSES = ("dense_conv", "pointwise_conv", "grouped_conv")
GEMM_CLASSES = ("dense_conv", "pointwise_conv", "linear")  # grouped: its groups are not in the records
UNFUSED_CLASSES = ("norm", "activation", "elementwise")
SE_CLASS = "se_gate"
SIXTEEN_BIT = ("fp16", "bf16")
SUMMARY_COLUMNS = ["rule", "op_class", "scope", "layers", "time_share"]


@dataclass(frozen=True)
class Thresholds:
    """When a rule speaks. Defaults are deliberately loose: a finding is a hint worth a look."""

    min_layer_share: float = 0.01  # a per-layer (per-block) finding needs >= 1% of the end-to-end time
    min_class_share: float = 0.05  # a network-level class finding (unfused ops, SE blocks) needs >= 5%
    idle_share: float = 0.20  # launch-bound when >= 20% of the end-to-end time has no kernel running
    # channel multiple per precision that overrides hardware.alignment.channel_multiple (empty: the rule's own)
    alignment: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    tile_m: int = 128  # thread-block tile of the GEMM estimate: rows (batch x output pixels)
    tile_n: int = 128  # ... and columns (output channels)
    se_time_over_flops: float = 2.0  # SE blocks are flagged when their time share is >= 2x their FLOP share
    max_layer_findings: int = 5  # per-layer findings that accompany a network-level one (the biggest)

    def __post_init__(self) -> None:
        for name in ("min_layer_share", "min_class_share", "idle_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a share of time: between 0 and 1, got {getattr(self, name)!r}")
        for name in ("tile_m", "tile_n", "max_layer_findings"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.se_time_over_flops < 0:
            raise ValueError(f"se_time_over_flops must be >= 0, got {self.se_time_over_flops!r}")
        if any(multiple < 1 for multiple in self.alignment.values()):
            raise ValueError(f"alignment multiples must be positive, got {dict(self.alignment)}")
        object.__setattr__(self, "alignment", MappingProxyType(dict(self.alignment)))

    def alignment_for(self, precision: str, architecture: str = "*") -> int:
        """The channel multiple for ``precision``: an override of ``alignment``, else the hardware rule."""
        return self.alignment.get(precision) or channel_multiple(precision, architecture)


@dataclass
class Finding:
    rule: str
    layer: str | None  # a layer, a fused region or an SE block; None: the whole network
    op_class: str | None
    evidence: str  # the numbers behind it
    advice: str  # what would change it (for this run's device, backend and precision)
    time_share: float  # of the end-to-end time
    covers: list[str] = field(default_factory=list)  # network-level findings: the layers (SE blocks) they cover


@dataclass(frozen=True)
class Setting:
    """What the run was, so that advice fits it: never recommend what is already in use, or what this device
    lacks."""

    device_type: str  # cuda | cpu
    device_name: str
    backend: str
    precision: str
    fuses: bool  # the backend fuses elementwise ops (compile, inference)
    cuda_graphs: bool  # the backend replays CUDA graphs on this device

    @classmethod
    def of(cls, attribution: Attribution) -> Setting:
        backend = BACKENDS.get(attribution.backend, None)
        cuda = attribution.device_type == "cuda"
        fuses, graphs = (backend.fuses_elementwise, backend.cuda_graphs) if backend is not None else (False, False)
        return cls(
            attribution.device_type,
            attribution.device_name,
            attribution.backend,
            attribution.precision,
            fuses,
            cuda and graphs,
        )

    @property
    def unit(self) -> str:
        """What the device runs: kernels on a GPU, ops on a CPU."""
        return "kernel" if self.device_type == "cuda" else "op"

    def fusing_backend(self) -> str:
        """The registered backend that fuses elementwise ops, in words for this device."""
        graphs = ", CUDA graphs" if self.device_type == "cuda" else ""
        return f"the `inference` backend (BN folded, inductor fusion{graphs})"

    def halving_precision(self) -> str:
        """A 16-bit precision that would halve the bytes an fp32/tf32 layer moves ("" when already 16-bit)."""
        if self.precision in SIXTEEN_BIT or self.precision == "int8":
            return ""
        return "fp16 or bf16" if self.device_type == "cuda" else "bf16 (where this CPU has native bf16 kernels)"


@dataclass(frozen=True)
class Context:
    """What every rule reads beside the attribution: the thresholds and the time each layer is charged."""

    thresholds: Thresholds
    total_ms: float  # the denominator of every time share
    layer_ms: Mapping[str, float] = field(hash=False)  # a layer's time (its region's when fused)
    region_of: Mapping[str, str] = field(hash=False)  # fused layers: the region whose time they are charged
    setting: Setting  # the run's device, backend and precision: the advice fits it

    @classmethod
    def build(cls, attribution: Attribution, thresholds: Thresholds | None = None) -> Context:
        covering = {name: point for point in attribution.points for name in point.layers}
        layer_ms, region_of = {}, {}
        for layer in attribution.layers:
            if layer.time_ms is not None:
                layer_ms[layer.name] = layer.time_ms
            elif layer.name in covering:
                layer_ms[layer.name] = covering[layer.name].time_ms
                region_of[layer.name] = covering[layer.name].name
            else:
                layer_ms[layer.name] = 0.0
        total = max(attribution.end_to_end_ms, attribution.kernel_time_ms)
        if total <= 0:
            total = sum(point.time_ms for point in attribution.points)
        return cls(
            thresholds or Thresholds(),
            total,
            MappingProxyType(layer_ms),
            MappingProxyType(region_of),
            Setting.of(attribution),
        )

    def share(self, time_ms: float) -> float:
        return time_ms / self.total_ms if self.total_ms > 0 else 0.0

    def layer_share(self, layer: LayerTime) -> float:
        return self.share(self.layer_ms[layer.name])

    def group_share(self, layers: list[LayerTime]) -> float:
        """Share of a group of layers. A fused region counts once, and only when it starts at one of the group's
        layers: a region that merely absorbed the group's first op (an SE block's pool fused into the depthwise
        convolution before it) belongs to the layer it starts at."""
        names = {layer.name for layer in layers}
        own = sum(self.layer_ms[layer.name] for layer in layers if layer.name not in self.region_of)
        regions = {
            self.region_of[layer.name]: self.layer_ms[layer.name]
            for layer in layers
            if self.region_of.get(layer.name) in names
        }
        return self.share(own + sum(regions.values()))

    def charged(self, layer: LayerTime) -> str:
        """The evidence's words for a layer's time: its own, or its fused region's."""
        share = pct(self.layer_share(layer))
        region = self.region_of.get(layer.name)
        return f"{share} of time" if region is None else f"{share} of time (its fused region {region}, an upper bound)"


Rule = Callable[[Attribution, Context], list[Finding]]
RULES: dict[str, Rule] = {}


def register_rule(name: str) -> Callable[[Rule], Rule]:
    """Register a diagnosis rule under ``name``; registering a name twice is an error."""

    def decorate(rule: Rule) -> Rule:
        if name in RULES:
            raise ValueError(f"diagnosis rule {name!r} registered twice")
        RULES[name] = rule
        return rule

    return decorate


def list_rules(pattern: str = "*") -> list[str]:
    """Rule names matching a glob, in registration order."""
    return [name for name in RULES if fnmatch.fnmatchcase(name, pattern)]


def diagnose(attribution: Attribution, thresholds: Thresholds | None = None, rules: str = "*") -> list[Finding]:
    """Run the rules matching the glob ``rules``; findings sorted by time share, biggest first."""
    names = list_rules(rules)
    if not names:
        raise ValueError(f"no diagnosis rule matches {rules!r}; rules: {', '.join(RULES)}")
    context = Context.build(attribution, thresholds)
    findings = [finding for name in names for finding in RULES[name](attribution, context)]
    return sorted(findings, key=lambda f: (-f.time_share, f.rule, f.layer or ""))


def summarize(findings: list[Finding]) -> pd.DataFrame:
    """Per rule and op class: the number of layers flagged and their total time share.

    Per-layer findings (``scope`` "layer") are summed; network-level findings are rows of their own (``scope``
    "network", op class "all" when they span classes), never added to the layers they summarize.
    """
    if not findings:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    frame = pd.DataFrame(
        {
            "rule": [f.rule for f in findings],
            "op_class": [f.op_class or "all" for f in findings],
            "scope": ["network" if f.layer is None else "layer" for f in findings],
            "layers": [0 if f.layer is None else 1 for f in findings],
            "time_share": [f.time_share for f in findings],
        }
    )
    summary = frame.groupby(["rule", "op_class", "scope"], sort=False, as_index=False)[["layers", "time_share"]].sum()
    return summary.sort_values("time_share", ascending=False, kind="stable").reset_index(drop=True)[SUMMARY_COLUMNS]


# --- formatting -------------------------------------------------------------------------------------------------


def pct(share: float) -> str:
    """A share as a percentage, with two significant digits below 0.1%."""
    return f"{100 * share:.2g}%" if 0 < abs(share) < 1e-3 else f"{100 * share:.1f}%"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def flop_share(attribution: Attribution, flops: int) -> float:
    return flops / attribution.flops if attribution.flops else 0.0


# --- rules --------------------------------------------------------------------------------------------------------


@register_rule("memory_bound_low_intensity")
def memory_bound_low_intensity(attribution: Attribution, context: Context) -> list[Finding]:
    """Depthwise / pointwise / grouped convs (points) below the ridge: memory, not math, sets their time."""
    roofs = attribution.roofs
    if roofs is None:
        return []
    ridge = roofs.ridge_intensity
    findings = []
    for point in attribution.points:
        share = context.share(point.time_ms)
        if point.op_class not in LOW_INTENSITY_CLASSES or share < context.thresholds.min_layer_share:
            continue
        if point.intensity >= ridge:
            continue
        findings.append(_low_intensity_finding(attribution, point, share, ridge, context.setting))
    return findings


def _memory_bound_advice(setting: Setting, batch_norms: bool) -> str:
    """Fuse (unless the backend does), halve the bytes (unless 16-bit already), widen, or accept. ``batch_norms``:
    the network has BatchNorm layers (a file whose exporter folded them, as ONNX exporters do, has none to fuse)."""
    options = []
    if setting.fuses:
        lead = f"memory-bound even with its elementwise neighbours fused (the `{setting.backend}` backend fuses them)"
    else:
        lead = "memory-bound"
        neighbours = "its BatchNorm and activation" if batch_norms else "the activation and elementwise ops after it"
        options.append(f"fuse {neighbours} into it, as {setting.fusing_backend()} does")
    if setting.halving_precision():
        options.append(f"run it in {setting.halving_precision()} (half the bytes of {setting.precision})")
    options.append("make the layer wider (more FLOPs per byte moved), or accept it as the price of a cheap layer")
    return f"{lead}: " + "; ".join(options)


def _low_intensity_finding(
    attribution: Attribution, point: Point, share: float, ridge: float, setting: Setting
) -> Finding:
    roofs = attribution.roofs
    bound_tflops = min(roofs.tensor_tflops, point.intensity * roofs.bandwidth_gbs / 1e3)
    evidence = (
        f"intensity {point.intensity:.1f} FLOP/B < ridge {ridge:.1f} FLOP/B ({roofs.label}); "
        f"{pct(share)} of time for {pct(flop_share(attribution, point.flops))} of FLOPs; "
        f"the memory roof allows {bound_tflops:.1f} TFLOP/s here, achieved {point.achieved_tflops:.2f} TFLOP/s"
    )
    advice = _memory_bound_advice(setting, any(_batch_norm(layer) for layer in attribution.layers))
    return Finding("memory_bound_low_intensity", point.name, point.op_class, evidence, advice, share)


def channels(layer: LayerTime, shapes: list[list[int]]) -> int | None:
    """Channels of a conv (dim 1 of N, C, spatial...) or a linear layer (last dim); None when not known."""
    if not shapes or not shapes[0]:
        return None
    shape = shapes[0]
    if layer.op_class == "linear":
        return shape[-1]
    return shape[1] if layer.op_class in CONV_CLASSES and len(shape) >= 3 else None


@register_rule("unaligned_channels")
def unaligned_channels(attribution: Attribution, context: Context) -> list[Finding]:
    """Conv / linear layers whose channel counts are not a multiple of what the GPU's kernels want (16 bytes of the
    precision: tensor-core tiles, vector loads), by the one rule (``hardware.alignment.unaligned_sides``); skipped
    off the GPU, whose kernels block channels differently. Depthwise convs are not diagnosed (CONV_CLASSES): they run
    no tensor cores, and the penalty the advice cites was measured on dense convs. An attribution's shapes do not
    hold a conv's groups, so a grouped conv is judged by its total channels (``groups=1``), where the rule would
    judge its channels per group."""
    multiple = context.thresholds.alignment_for(attribution.precision)
    if attribution.device_type != "cuda":
        return []
    network_input = attribution.layers[0].input_shapes[:1] if attribution.layers else []
    findings = []
    for layer in attribution.layers:
        share = context.layer_share(layer)
        if layer.op_class not in (*CONV_CLASSES, "linear") or share < context.thresholds.min_layer_share:
            continue
        channels_in, channels_out = channels(layer, layer.input_shapes), channels(layer, layer.output_shapes)
        if channels_out is None:
            continue
        image = channels_in is None or layer.input_shapes[:1] == network_input  # the data fixes the input's channels
        bad = unaligned_sides(channels_in or 1, channels_out, multiple, groups=1, image_input=image)
        if not bad:
            continue
        padded = ", ".join(f"{side} channels {c} (next multiple {round_up(c, multiple)})" for side, c in bad.items())
        evidence = (
            f"{padded}: not a multiple of {multiple} for {attribution.precision}; {context.charged(layer)}, "
            f"{pct(flop_share(attribution, layer.flops))} of FLOPs"
        )
        advice = alignment_advice(attribution, layer, multiple)
        findings.append(Finding("unaligned_channels", layer.name, layer.op_class, evidence, advice, share))
    return findings


def alignment_advice(attribution: Attribution, layer: LayerTime, multiple: int) -> str:
    """Pad to the multiple, with the penalty measured on this GPU and precision when the hardware data has it
    (``hardware.alignment``: the nearest kernel size and batch timed), else why it matters; `advise` measures it."""
    kernel = 1 if layer.op_class in ("pointwise_conv", "linear") else 3
    penalty = penalty_for(attribution.device_name, attribution.precision, kernel, attribution.batch)
    units = "" if attribution.precision == "fp32" else "tensor-core "
    why = (
        penalty.describe()
        if penalty is not None
        else f"{attribution.precision} {units}kernels on the {attribution.device_name} want 16-byte-aligned shapes and "
        "otherwise pad or mask tiles, or fall back to slower kernels (no penalty measured for this GPU and "
        "precision: benchmarks/alignment_penalty.py)"
    )
    return (
        f"pad channels to a multiple of {multiple} (round the width up; exact with zero weights): {why}; "
        "`utilscope advise` pads this model and measures the gain"
    )


def gemm_shape(layer: LayerTime) -> tuple[int, int] | None:
    """(M, N) of the implicit GEMM: M = batch x output pixels (rows for a linear layer), N = output channels."""
    if not layer.output_shapes or not layer.output_shapes[0]:
        return None
    out = layer.output_shapes[0]
    if layer.op_class == "linear":
        return math.prod(out[:-1]), out[-1]
    if len(out) < 3:
        return None
    return out[0] * math.prod(out[2:]), out[1]


@register_rule("too_little_work")
def too_little_work(attribution: Attribution, context: Context) -> list[Finding]:
    """Conv / linear layers with fewer output tiles (~ thread blocks) than the GPU has SMs; skipped off the GPU."""
    sm_count = attribution.sm_count
    if sm_count is None:
        return []
    t = context.thresholds
    findings = []
    for layer in attribution.layers:
        share = context.layer_share(layer)
        shape = gemm_shape(layer) if layer.op_class in GEMM_CLASSES else None
        if shape is None or share < t.min_layer_share:
            continue
        m, n = shape
        rows, columns = (
            ("rows", "outputs") if layer.op_class == "linear" else ("rows (batch x output pixels)", "channels")
        )
        blocks = math.ceil(m / t.tile_m) * math.ceil(n / t.tile_n)
        if blocks >= sm_count:
            continue
        evidence = (
            f"M = {m} {rows} x N = {n} {columns} -> ~{blocks} thread "
            f"block(s) of {t.tile_m}x{t.tile_n} for {sm_count} SMs ({pct(blocks / sm_count)} busy) of the "
            f"{attribution.device_name}; a batch of ~{attribution.batch * math.ceil(sm_count / blocks)} would give "
            f"every SM a block; {context.charged(layer)}"
        )
        advice = (
            "too little parallel work to fill the GPU: a larger batch (each layer's evidence says how large), or "
            "fewer, wider layers (more output channels per launch)"
        )
        findings.append(Finding("too_little_work", layer.name, layer.op_class, evidence, advice, share))
    return findings


@register_rule("unfused_elementwise")
def unfused_elementwise(attribution: Attribution, context: Context) -> list[Finding]:
    """Norm / activation / elementwise layers launched as kernels of their own (not part of a fused region)."""
    unfused = [
        layer
        for layer in attribution.layers
        if layer.op_class in UNFUSED_CLASSES and layer.kernel_count > 0 and layer.region is None
    ]
    total = sum(context.layer_share(layer) for layer in unfused)
    if not unfused or total < context.thresholds.min_class_share:
        return []
    by_class = []
    for op_class in UNFUSED_CLASSES:
        members = [layer for layer in unfused if layer.op_class == op_class]
        if members:
            class_share = sum(context.layer_share(layer) for layer in members)
            by_class.append(f"{op_class} {pct(class_share)} ({plural(len(members), 'layer')})")
    open_layers = [layer for layer in attribution.layers if layer.region is None]
    traffic = sum(layer.bytes for layer in open_layers)
    saved = sum(layer.bytes - layer.bytes_fused for layer in open_layers)
    unit = f"separate {context.setting.unit}"
    evidence = (
        f"{pct(total)} of time in {plural(sum(layer.kernel_count for layer in unfused), unit)}: "
        f"{', '.join(by_class)}; fusing would cut memory traffic by {si(saved, 'B')} of {si(traffic, 'B')} "
        f"({pct(saved / traffic if traffic else 0.0)})"
    )
    fold = (
        "fold BatchNorm into the preceding convolutions (exact at inference) and "
        if any(map(_batch_norm, unfused))
        else ""
    )
    advice = (
        f"{fold}fuse activations and adds into their producers, as {context.setting.fusing_backend()} does "
        "(`utilscope profile --backend inference` measures what it gains)"
    )
    biggest = sorted(unfused, key=lambda layer: -context.layer_ms[layer.name])
    covers = [layer.name for layer in biggest]
    findings = [Finding("unfused_elementwise", None, None, evidence, advice, total, covers)]
    for layer in biggest[: context.thresholds.max_layer_findings]:
        if context.layer_share(layer) >= context.thresholds.min_layer_share:
            findings.append(_unfused_layer_finding(layer, context))
    return findings


def _unfused_layer_finding(layer: LayerTime, context: Context) -> Finding:
    evidence = (
        f"{layer.type}: {context.charged(layer)} in {layer.kernel_count} {context.setting.unit}(s) for 0 tensor "
        "FLOPs; moves "
        f"{si(layer.bytes, 'B')} ({si(layer.bytes_fused, 'B')} if fused into its producer)"
    )
    if _batch_norm(layer):
        advice = "fold this BatchNorm into the preceding convolution (exact at inference, free)"
    elif layer.op_class == "norm":
        advice = "fuse this normalization with its neighbours (a compiled backend)"
    else:
        advice = f"fuse this {layer.op_class} into the producing kernel's epilogue (a compiled backend)"
    return Finding("unfused_elementwise", layer.name, layer.op_class, evidence, advice, context.layer_share(layer))


def _batch_norm(layer: LayerTime) -> bool:
    """A BatchNorm layer: the one norm that folds into the conv before it (a file whose exporter folded its
    BatchNorms, as ONNX exporters do, has none left to fold)."""
    return layer.op_class == "norm" and "batchnorm" in layer.type.lower()


def se_blocks(layers: list[LayerTime]) -> list[tuple[str, list[LayerTime]]]:
    """Runs of consecutive SE layers, each named by its layers' longest common module path."""
    blocks: list[list[LayerTime]] = []
    for index, layer in enumerate(layers):
        if layer.op_class != SE_CLASS:
            continue
        if blocks and index > 0 and layers[index - 1].op_class == SE_CLASS:
            blocks[-1].append(layer)
        else:
            blocks.append([layer])
    return [(_common_path([layer.name for layer in block]), block) for block in blocks]


def _common_path(names: list[str]) -> str:
    """The module path shared by a block's layers; a block of one layer is a leaf SE module: its own name."""
    if len(names) == 1:
        return names[0]
    common = []
    for pieces in zip(*(name.split("#")[0].split(".") for name in names), strict=False):
        if len(set(pieces)) > 1:
            break
        common.append(pieces[0])
    return ".".join(common) or names[0]


@register_rule("squeeze_excite")
def squeeze_excite(attribution: Attribution, context: Context) -> list[Finding]:
    """Squeeze-excite blocks: a pool over the whole map, two GEMMs with M = batch, a scale; time far above FLOPs."""
    t = context.thresholds
    blocks = [
        (name, context.group_share(block), sum(layer.flops for layer in block), block)
        for name, block in se_blocks(attribution.layers)
    ]
    total_share = sum(share for _, share, _, _ in blocks)
    total_flops = flop_share(attribution, sum(flops for _, _, flops, _ in blocks))
    if not blocks or total_share < t.min_class_share or total_share < t.se_time_over_flops * total_flops:
        return []
    evidence = (
        f"{plural(len(blocks), 'SE block')}: {pct(total_share)} of time for {pct(total_flops)} of FLOPs; "
        f"their GEMMs have M = batch = {attribution.batch} rows"
    )
    advice = (
        "SE's pooled tiny GEMMs run at low utilization and its pool and scale each read the whole feature map: "
        "consider fewer SE blocks (e.g. only in late stages) or a fused SE kernel"
    )
    ranked = sorted(blocks, key=lambda b: -b[1])
    findings = [Finding("squeeze_excite", None, SE_CLASS, evidence, advice, total_share, [b[0] for b in ranked])]
    for name, share, flops, block in ranked[: t.max_layer_findings]:
        if share < t.min_layer_share or share < t.se_time_over_flops * flop_share(attribution, flops):
            continue
        block_evidence = (
            f"{plural(len(block), 'layer')}: {pct(share)} of time for {pct(flop_share(attribution, flops))} of FLOPs "
            f"({', '.join(layer.name for layer in block)})"
        )
        findings.append(Finding("squeeze_excite", name, SE_CLASS, block_evidence, advice, share))
    return findings


@register_rule("launch_bound")
def launch_bound(attribution: Attribution, context: Context) -> list[Finding]:
    """A large share of the end-to-end time with no kernel running: launch overhead, gaps, host work."""
    idle = attribution.idle_share
    if idle is None or idle < context.thresholds.idle_share:  # None: not measurable (the notes say why)
        return []
    kernels = sum(layer.kernel_count for layer in attribution.layers)
    mean_us = attribution.kernel_time_ms / kernels * 1e3 if kernels else 0.0
    unit = context.setting.unit
    evidence = (
        f"idle {pct(idle)} of the {attribution.end_to_end_ms:.3f} ms end-to-end: {unit}s run "
        f"{attribution.kernel_time_ms:.3f} ms; {plural(kernels, unit)} (mean {mean_us:.1f} us); "
        f"batch {attribution.batch}"
    )
    return [Finding("launch_bound", None, None, evidence, _launch_advice(context.setting), idle)]


def _launch_advice(setting: Setting) -> str:
    """CPU: Python and dispatch between ops; GPU: CUDA graphs, unless this run replays them already."""
    if setting.device_type != "cuda":
        return (
            "time between ops (Python, framework dispatch): a larger batch (more work per op), or a compiled "
            "backend (`compile`, `inference`: fewer, larger ops and no Python between them)"
        )
    if setting.cuda_graphs:
        return (
            f"CUDA graphs are already in use (the `{setting.backend}` backend): a larger batch (more work per "
            "kernel) or fewer, larger layers"
        )
    graphed = [BACKENDS[name] for name in BACKENDS if BACKENDS[name].cuda_graphs]
    names = " or ".join(f"`{b.name}`" for b in graphed if b.fuses_elementwise or not setting.fuses)
    return f"replay CUDA graphs (the {names} backend) or use a larger batch (more work per launch)"


__all__ = [
    "RULES",
    "Context",
    "Finding",
    "Rule",
    "Setting",
    "Thresholds",
    "diagnose",
    "list_rules",
    "register_rule",
    "summarize",
]
