"""``mbv3``: the once-for-all MobileNetV3 search space (OFA-MobileNetV3, width multiplier 1.0).

Layout (Cai et al., "Once-for-All", ICLR 2020; ``ofa/imagenet_classification/elastic_nn/networks/ofa_mbv3.py``):

- stem: 3x3 conv 3->16, stride 2, BN, hardswish;
- a fixed first block: depthwise 3x3 conv 16, BN, ReLU, then 1x1 conv 16->16, BN, with a residual connection;
- 5 searchable stages of inverted-residual blocks, widths (24, 40, 80, 112, 160), strides (2, 2, 2, 1, 2),
  activations (relu, relu, hswish, hswish, hswish), squeeze-excite in the 40-, 112- and 160-channel stages. A block
  is 1x1 expand conv in->mid (mid = make_divisible(in x expand ratio, 8)), BN, act; depthwise kxk conv (stride on
  the first block of a stage only), BN, act; SE (1x1 conv mid->make_divisible(mid // 4, 8) with bias, ReLU, 1x1
  conv back with bias, hard-sigmoid gate); 1x1 project conv mid->out, BN; residual when stride 1 and in == out;
- head: 1x1 conv 160->960, BN, hardswish; global average pool; 1x1 conv 960->1280 (no bias, no BN), hardswish;
  linear 1280->1000.

The record (JSON lists only)::

    {"space": "mbv3", "resolution": 224, "depths": [2, 3, 4, 2, 3],
     "kernel_sizes": [[3, 5], [7, 3, 5], [3, 3, 5, 7], [5, 5], [3, 7, 7]],
     "expand_ratios": [[3, 4], [6, 6, 3], [4, 4, 3, 6], [6, 3], [4, 4, 6]]}

Input resolutions: 128 to 224 in steps of 4, OFA's 25 (its elastic resolution). The H200 dataset under
``data/h200/`` was sampled when the space held 5 of them (160 to 224 in steps of 16); its records, and so their
``arch_id``s, are unchanged by the widening (``sample`` now draws from all 25, so a seed draws other networks).

Canonical form: each stage's lists hold its *active* blocks only (``len(kernel_sizes[i]) == depths[i]``).
``validate`` also takes OFA-style max-depth stage lists (4 entries whatever the depth) and drops the entries past
the depth, so two records of the same network normalize to the same record and the same ``arch_id``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from torch import nn
from torchvision.ops.misc import Conv2dNormActivation, SqueezeExcitation

from utilscope.counting.formulas import conv_output_size
from utilscope.errors import UsageError
from utilscope.nas.costs import conv_cost, linear_cost
from utilscope.nas.space import (
    Arch,
    ArchSummary,
    Complexity,
    FunctionSpace,
    Layer,
    LayerCost,
    Networks,
    check_fields,
    field_error,
    int_choice,
    networks_of,
    register_space,
)

NAME = "mbv3"
RESOLUTIONS = tuple(range(128, 225, 4))  # OFA's 25 input sizes (``ofa_mbv3``'s image_size list)
DEPTHS = (2, 3, 4)
KERNEL_SIZES = (3, 5, 7)
EXPAND_RATIOS = (3, 4, 6)
MAX_DEPTH = max(DEPTHS)

STEM_WIDTH = 16
STAGE_WIDTHS = (24, 40, 80, 112, 160)
STAGE_STRIDES = (2, 2, 2, 1, 2)
STAGE_ACTIVATIONS = ("relu", "relu", "hswish", "hswish", "hswish")
STAGE_SE = (False, True, False, True, True)
NUM_STAGES = len(STAGE_WIDTHS)
FINAL_EXPAND_WIDTH = 960
FEATURE_MIX_WIDTH = 1280
NUM_CLASSES = 1000
CHANNEL_DIVISOR = 8
SE_REDUCTION = 4

FIELDS = ("space", "resolution", "depths", "kernel_sizes", "expand_ratios")
ACTIVATIONS = {"relu": nn.ReLU, "hswish": nn.Hardswish}


def make_divisible(value: float, divisor: int = CHANNEL_DIVISOR) -> int:
    """The nearest multiple of ``divisor`` at least ``divisor`` and not below 90% of ``value`` (OFA, torchvision)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


# --- the record ----------------------------------------------------------------------------------------------


def _fail(field: str, expected: str, got) -> UsageError:
    return field_error(NAME, field, expected, got)


def _choice(value, field: str, choices: tuple[int, ...]) -> int:
    return int_choice(NAME, value, field, choices)


def _list(value, field: str, lengths: tuple[int, ...]) -> list:
    if not isinstance(value, list) or len(value) not in lengths:
        raise _fail(field, f"a list of {' or '.join(map(str, sorted(set(lengths))))} entries", value)
    return value


def _per_stage(value, field: str, depths: list[int], choices: tuple[int, ...]) -> list[list[int]]:
    """Per-stage lists of the active blocks' choices; a stage list may also hold MAX_DEPTH entries (truncated)."""
    stages = _list(value, field, (NUM_STAGES,))
    normalized = []
    for i, (stage, depth) in enumerate(zip(stages, depths, strict=True)):
        entries = (
            stage if type(stage) is list and len(stage) == depth else _list(stage, f"{field}[{i}]", (depth, MAX_DEPTH))
        )
        if not all(type(entry) is int and entry in choices for entry in entries):  # else name the bad entry
            entries = [_choice(entry, f"{field}[{i}][{j}]", choices) for j, entry in enumerate(entries)]
        normalized.append(list(entries[:depth]))
    return normalized


def validate(arch: Arch) -> Arch:
    """The canonical record (active blocks only, plain ints); UsageError naming the bad field otherwise."""
    check_fields(NAME, arch, FIELDS)
    resolution = _choice(arch["resolution"], "resolution", RESOLUTIONS)
    depths_list = _list(arch["depths"], "depths", (NUM_STAGES,))
    depths = [_choice(depth, f"depths[{i}]", DEPTHS) for i, depth in enumerate(depths_list)]
    return {
        "space": NAME,
        "resolution": resolution,
        "depths": depths,
        "kernel_sizes": _per_stage(arch["kernel_sizes"], "kernel_sizes", depths, KERNEL_SIZES),
        "expand_ratios": _per_stage(arch["expand_ratios"], "expand_ratios", depths, EXPAND_RATIOS),
    }


def uniform_arch(resolution: int, depth: int, kernel_size: int, expand_ratio: int) -> Arch:
    """The architecture with the same choice in every stage and block (e.g. the smallest and largest)."""
    return validate(
        {
            "space": NAME,
            "resolution": resolution,
            "depths": [depth] * NUM_STAGES,
            "kernel_sizes": [[kernel_size] * depth for _ in range(NUM_STAGES)],
            "expand_ratios": [[expand_ratio] * depth for _ in range(NUM_STAGES)],
        }
    )


# --- the layers an architecture implies (one source of truth for build and complexity) ------------------------


@dataclass(frozen=True)
class Block:
    """One inverted-residual block; ``expand_ratio`` 1 means no expand conv (the fixed first block)."""

    in_channels: int
    out_channels: int
    kernel_size: int
    expand_ratio: int
    stride: int
    activation: str
    use_se: bool

    @property
    def mid_channels(self) -> int:
        return make_divisible(round(self.in_channels * self.expand_ratio))

    @property
    def se_channels(self) -> int:
        return make_divisible(self.mid_channels // SE_REDUCTION)

    @property
    def residual(self) -> bool:
        return self.stride == 1 and self.in_channels == self.out_channels


def blocks(arch: Arch) -> list[Block]:
    """The fixed first block, then the active blocks of the 5 stages of a validated record."""
    layers = [Block(STEM_WIDTH, STEM_WIDTH, 3, 1, 1, "relu", False)]
    in_channels = STEM_WIDTH
    for stage in range(NUM_STAGES):
        for i in range(arch["depths"][stage]):
            kernel, expand = arch["kernel_sizes"][stage][i], arch["expand_ratios"][stage][i]
            stride = STAGE_STRIDES[stage] if i == 0 else 1
            width = STAGE_WIDTHS[stage]
            layers.append(Block(in_channels, width, kernel, expand, stride, STAGE_ACTIVATIONS[stage], STAGE_SE[stage]))
            in_channels = width
    return layers


# --- analytic complexity (pure arithmetic) --------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)  # a pure function of a few ints; networks of a space share most blocks
def block_cost(block: Block, size: int) -> tuple[int, int, int]:
    """(output size, flops, params) of one inverted-residual block on a ``size`` x ``size`` input."""
    mid, flops, params = block.mid_channels, 0, 0
    if block.expand_ratio != 1:
        size, f, p = conv_cost(size, block.in_channels, mid, 1, bn=True)
        flops, params = flops + f, params + p
    size, f, p = conv_cost(size, mid, mid, block.kernel_size, block.stride, groups=mid, bn=True)
    flops, params = flops + f, params + p
    if block.use_se:  # two 1x1 convs with bias on the pooled 1x1 map
        for c_in, c_out in ((mid, block.se_channels), (block.se_channels, mid)):
            _, f, p = conv_cost(1, c_in, c_out, 1, bias=True)
            flops, params = flops + f, params + p
    size, f, p = conv_cost(size, mid, block.out_channels, 1, bn=True)
    return size, flops + f, params + p


def complexity(arch: Arch) -> Complexity:
    """FLOPs (2 x MACs of convs and linears, batch 1) and params of the network a record describes."""
    return _complexity(validate(arch))


def _complexity(arch: Arch, arch_blocks: list[Block] | None = None) -> Complexity:
    size, flops, params = conv_cost(arch["resolution"], 3, STEM_WIDTH, 3, stride=2, bn=True)
    for block in blocks(arch) if arch_blocks is None else arch_blocks:
        size, f, p = block_cost(block, size)
        flops, params = flops + f, params + p
    f, p = head_cost(size)
    return Complexity(flops=flops + f, params=params + p)


@functools.lru_cache(maxsize=64)  # one per input size: every network has a head
def head_cost(size: int) -> tuple[int, int]:
    """(flops, params) of the head on a ``size`` x ``size`` input: final expand conv with BN, global average pool,
    feature mix conv on the pooled 1x1 map (no bias, no BN), classifier."""
    _, flops, params = conv_cost(size, STAGE_WIDTHS[-1], FINAL_EXPAND_WIDTH, 1, bn=True)
    _, mix_flops, mix_params = conv_cost(1, FINAL_EXPAND_WIDTH, FEATURE_MIX_WIDTH, 1)
    classifier_flops, classifier_params = linear_cost(FEATURE_MIX_WIDTH, NUM_CLASSES)
    return flops + mix_flops + classifier_flops, params + mix_params + classifier_params


# --- the network -------------------------------------------------------------------------------------------------


class InvertedResidual(nn.Module):
    def __init__(self, block: Block):
        super().__init__()
        act, mid = ACTIVATIONS[block.activation], block.mid_channels
        layers: list[nn.Module] = []
        if block.expand_ratio != 1:
            layers.append(Conv2dNormActivation(block.in_channels, mid, 1, activation_layer=act))
        layers.append(Conv2dNormActivation(mid, mid, block.kernel_size, block.stride, groups=mid, activation_layer=act))
        if block.use_se:
            layers.append(SqueezeExcitation(mid, block.se_channels, scale_activation=nn.Hardsigmoid))
        layers.append(Conv2dNormActivation(mid, block.out_channels, 1, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.residual = block.residual

    def forward(self, x):
        out = self.block(x)
        return x + out if self.residual else out


def _stem() -> nn.Module:
    return Conv2dNormActivation(3, STEM_WIDTH, 3, stride=2, activation_layer=nn.Hardswish)


def _final_expand() -> nn.Module:
    return Conv2dNormActivation(STAGE_WIDTHS[-1], FINAL_EXPAND_WIDTH, 1, activation_layer=nn.Hardswish)


def _feature_mix() -> nn.Module:
    return Conv2dNormActivation(
        FINAL_EXPAND_WIDTH, FEATURE_MIX_WIDTH, 1, norm_layer=None, activation_layer=nn.Hardswish, bias=False
    )


class MobileNetV3Subnet(nn.Module):
    def __init__(self, arch: Arch):
        super().__init__()
        self.features = nn.Sequential(_stem(), *(InvertedResidual(block) for block in blocks(arch)), _final_expand())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.feature_mix = _feature_mix()
        self.classifier = nn.Linear(FEATURE_MIX_WIDTH, NUM_CLASSES)

    def forward(self, x):
        x = self.feature_mix(self.avgpool(self.features(x)))
        return self.classifier(x.flatten(1))


class Head(nn.Module):
    """The layers after the last stage: final expand conv, pooling, feature mix, classifier."""

    def __init__(self):
        super().__init__()
        self.final_expand, self.avgpool = _final_expand(), nn.AdaptiveAvgPool2d(1)
        self.feature_mix, self.classifier = _feature_mix(), nn.Linear(FEATURE_MIX_WIDTH, NUM_CLASSES)

    def forward(self, x):
        return self.classifier(self.feature_mix(self.avgpool(self.final_expand(x))).flatten(1))


# --- the layers of the latency table -------------------------------------------------------------------------


def _layers(arch: Arch, arch_blocks: list[Block] | None = None) -> list[Layer]:
    """Stem, the blocks (with their input size) and head of a validated record."""
    resolution = arch["resolution"]
    size = conv_output_size(resolution, 3, stride=2, padding=1)
    result = [Layer("stem", (resolution,), 3, resolution)]
    for block in blocks(arch) if arch_blocks is None else arch_blocks:
        config = (
            block.in_channels,
            block.out_channels,
            block.kernel_size,
            block.expand_ratio,
            block.stride,
            block.activation,
            int(block.use_se),
            size,
        )
        result.append(Layer("block", config, block.in_channels, size))
        size = conv_output_size(size, block.kernel_size, block.stride, padding=block.kernel_size // 2)
    result.append(Layer("head", (size,), STAGE_WIDTHS[-1], size))
    return result


def layer_cost(kind: str, config: tuple) -> LayerCost:
    """FLOPs, params and activation elements (inputs and outputs of its convolutions) of a layer at batch 1."""
    if kind == "stem":
        out, flops, params = conv_cost(config[0], 3, STEM_WIDTH, 3, stride=2, bn=True)
        return LayerCost(flops, params, 3 * config[0] ** 2 + STEM_WIDTH * out**2)
    if kind == "head":
        size = config[0]
        flops, params = head_cost(size)
        return LayerCost(flops, params, (STAGE_WIDTHS[-1] + FINAL_EXPAND_WIDTH) * size**2 + FEATURE_MIX_WIDTH)
    c_in, c_out, kernel, expand, stride, activation, use_se, size = config
    block = Block(c_in, c_out, kernel, expand, stride, activation, bool(use_se))
    out, flops, params = block_cost(block, size)
    expanded = block.mid_channels * size**2 if expand != 1 else 0
    return LayerCost(flops, params, c_in * size**2 + expanded + block.mid_channels * out**2 + c_out * out**2)


def build_layer(layer: Layer) -> nn.Module:
    if layer.kind == "stem":
        return _stem()
    if layer.kind == "head":
        return Head()
    if layer.kind == "block":
        c_in, c_out, kernel, expand, stride, activation, use_se, _ = layer.config
        return InvertedResidual(Block(c_in, c_out, kernel, expand, stride, activation, bool(use_se)))
    raise UsageError(f"{NAME} has no layer kind {layer.kind!r}")


# --- the space -----------------------------------------------------------------------------------------------


def sample(rng: np.random.Generator) -> Arch:
    """Uniform choices drawn from ``rng`` in a fixed order: resolution, 5 depths, 5x4 kernel sizes, 5x4 expand ratios
    (max-depth draws, truncated to each depth: every active block's choice is uniform, as in OFA)."""
    resolution = RESOLUTIONS[int(rng.integers(len(RESOLUTIONS)))]
    depths = [DEPTHS[int(i)] for i in rng.integers(len(DEPTHS), size=NUM_STAGES)]
    kernels = rng.integers(len(KERNEL_SIZES), size=(NUM_STAGES, MAX_DEPTH))
    expands = rng.integers(len(EXPAND_RATIOS), size=(NUM_STAGES, MAX_DEPTH))
    return {
        "space": NAME,
        "resolution": resolution,
        "depths": depths,
        "kernel_sizes": [[KERNEL_SIZES[int(i)] for i in row[:d]] for row, d in zip(kernels, depths, strict=True)],
        "expand_ratios": [[EXPAND_RATIOS[int(i)] for i in row[:d]] for row, d in zip(expands, depths, strict=True)],
    }


def build(arch: Arch) -> nn.Module:
    return MobileNetV3Subnet(validate(arch))


def layers(arch: Arch) -> list[Layer]:
    return _layers(validate(arch))


def covering_archs() -> list[Arch]:
    """Depth 2 everywhere with one kernel size and expand ratio per network, at each resolution: the first and the
    second block of every stage take every (kernel, expand) pair, so these 225 networks (9 per resolution) hold all
    layers."""
    return [uniform_arch(r, 2, k, e) for r in RESOLUTIONS for k in KERNEL_SIZES for e in EXPAND_RATIOS]


def features(arch: Arch) -> dict[str, float]:
    record = validate(arch)
    return _features(record, _complexity(record))


def networks(archs: list[Arch]) -> Networks:
    return networks_of(layer_cost, [summary(arch) for arch in archs])


def summary(arch: Arch) -> ArchSummary:
    """Layers, complexity and features of a record, validated once."""
    record = validate(arch)
    arch_blocks = blocks(record)
    cost = _complexity(record, arch_blocks)
    return ArchSummary(_layers(record, arch_blocks), cost, _features(record, cost))


def _mean(values) -> float:
    return sum(values) / len(values)


def _features(arch: Arch, cost: Complexity) -> dict[str, float]:
    """Resolution, total depth, mean kernel size and expand ratio (network and per stage), GFLOPs, Mparams."""
    kernels = [k for stage in arch["kernel_sizes"] for k in stage]
    expands = [e for stage in arch["expand_ratios"] for e in stage]
    features = {
        "resolution": float(arch["resolution"]),
        "depth": float(sum(arch["depths"])),
        "kernel_size_mean": _mean(kernels),
        "expand_ratio_mean": _mean(expands),
    }
    for i in range(NUM_STAGES):
        features[f"stage{i + 1}_depth"] = float(arch["depths"][i])
        features[f"stage{i + 1}_kernel_size_mean"] = _mean(arch["kernel_sizes"][i])
        features[f"stage{i + 1}_expand_ratio_mean"] = _mean(arch["expand_ratios"][i])
    features["gflops"] = cost.flops / 1e9
    features["mparams"] = cost.params / 1e6
    return features


# OFA-MobileNetV3: per block kernel size and expand ratio, per stage depth, per network resolution
SPACE = register_space(FunctionSpace.of_module(NAME, globals()))
