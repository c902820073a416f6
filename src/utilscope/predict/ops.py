"""The layer configurations a GPU is calibrated on: what CNNs contain, one op (or one small block) each.

An ``OpConfig`` names a kind and its shape: convolutions (kernel, stride, dilation, groups: dense, grouped,
depthwise, pointwise), linear layers, and the memory-bound ops between them (batch/layer norm, activations,
elementwise add and multiply, pooling, a squeeze-excite gate, concatenation, channel shuffle). ``build_op`` makes
the module and its inputs; ``sample_configs`` draws a seeded, stratified sample of them.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

import torch
from torch import nn

from utilscope.errors import UsageError

CONV_STYLES = ("dense", "pointwise", "grouped", "depthwise")
ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU, "hardswish": nn.Hardswish, "sigmoid": nn.Sigmoid}
POOLS = ("max", "avg", "global")
# kind: share of the sample (convolutions are half of it, a quarter per style)
KIND_SHARES = {"conv": 0.5, "linear": 0.08, "batch_norm": 0.07, "layer_norm": 0.04, "activation": 0.09, "add": 0.05,
               "mul": 0.03, "pool": 0.05, "se_gate": 0.04, "concat": 0.03, "shuffle": 0.02}  # fmt: skip
KINDS = tuple(KIND_SHARES)
CHANNELS = (8, 2048)  # the calibrated range, per kind's channel axis
SIZES = (7, 320)  # spatial size (square)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_ACTIVATION_ELEMENTS = 1 << 28  # per tensor: keeps a config within memory and a timed call short
MAX_CONV_FLOPS = 4e12


@dataclass(frozen=True)
class OpConfig:
    kind: str
    batch: int
    channels: int  # input channels (features of a linear layer)
    out_channels: int  # = channels for the kinds that keep them
    size: int = 1  # square spatial size of the input (1 for a linear layer)
    kernel: int = 1
    stride: int = 1
    groups: int = 1
    dilation: int = 1
    variant: str = ""  # the activation or pool

    @property
    def key(self) -> str:
        return "|".join(f"{k}={v}" for k, v in asdict(self).items())

    @property
    def out_size(self) -> int:
        if self.kind not in ("conv", "pool") or self.variant == "global":
            return 1 if self.variant == "global" else self.size
        reach = self.dilation * (self.kernel - 1) + 1
        return (self.size + 2 * (reach // 2) - reach) // self.stride + 1


def _conv(config: OpConfig) -> nn.Module:
    padding = config.dilation * (config.kernel - 1) // 2
    return nn.Conv2d(config.channels, config.out_channels, config.kernel, config.stride, padding, config.dilation,
                     config.groups, bias=False)  # fmt: skip


class SqueezeExcite(nn.Module):
    """Global pool, 1x1 reduce (to a quarter), ReLU, 1x1 expand, sigmoid, and the gate's multiply."""

    def __init__(self, channels: int):
        super().__init__()
        hidden = max(8, channels // 4)
        self.reduce, self.expand = nn.Conv2d(channels, hidden, 1), nn.Conv2d(hidden, channels, 1)

    def forward(self, x):
        gate = self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


class Binary(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, a, b):
        if self.kind == "add":
            return a + b
        if self.kind == "mul":
            return a * b
        return torch.cat((a, b), dim=1)


class Shuffle(nn.Module):
    def forward(self, x):
        b, c, h, w = x.shape
        return x.view(b, 2, c // 2, h, w).transpose(1, 2).reshape(b, c, h, w)


def _pool(config: OpConfig) -> nn.Module:
    if config.variant == "global":
        return nn.AdaptiveAvgPool2d(1)
    cls = nn.MaxPool2d if config.variant == "max" else nn.AvgPool2d
    return cls(config.kernel, config.stride, config.kernel // 2)


def build_op(config: OpConfig) -> tuple[nn.Module, tuple[torch.Size, ...]]:
    """The module of a config and the shapes of its inputs (channels first)."""
    image = torch.Size((config.batch, config.channels, config.size, config.size))
    builders = {
        "conv": lambda: _conv(config), "linear": lambda: nn.Linear(config.channels, config.out_channels),
        "batch_norm": lambda: nn.BatchNorm2d(config.channels), "layer_norm": lambda: nn.GroupNorm(1, config.channels),
        "activation": lambda: ACTIVATIONS[config.variant](), "pool": lambda: _pool(config),
        "se_gate": lambda: SqueezeExcite(config.channels), "shuffle": Shuffle,
    }  # fmt: skip
    if config.kind in ("add", "mul", "concat"):
        return Binary(config.kind), (image, image)
    if config.kind == "linear":
        return builders["linear"](), (torch.Size((config.batch, config.channels)),)
    if config.kind not in builders:
        raise UsageError(f"unknown op kind {config.kind!r}; use one of: {', '.join(KINDS)}")
    return builders[config.kind](), (image,)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def _channels(rng: random.Random) -> int:
    """Log-uniform over CHANNELS; a third of them unaligned (not a multiple of 8), as pruned or odd widths are."""
    value = _log_uniform(rng, *CHANNELS)
    return value if rng.random() < 1 / 3 else max(8, value // 8 * 8)


def _conv_config(rng: random.Random, batch: int, size: int) -> OpConfig:
    style = rng.choice(CONV_STYLES)
    cin = _channels(rng)
    kernel = 1 if style == "pointwise" else rng.choice((3, 3, 3, 5, 7))
    stride = rng.choice((1, 1, 1, 2))
    dilation = rng.choice((1,) * 9 + (2,)) if kernel > 1 else 1
    if style == "depthwise":
        return OpConfig("conv", batch, cin, cin, size, kernel, stride, cin, dilation)
    groups = rng.choice((2, 4, 8, 16, 32)) if style == "grouped" else 1
    cin = max(groups, cin // groups * groups)
    cout = max(groups, _channels(rng) // groups * groups)
    return OpConfig("conv", batch, cin, cout, size, kernel, stride, groups, dilation)


def draw_config(rng: random.Random) -> OpConfig:
    """One config: a kind by KIND_SHARES, then its shape."""
    kind = rng.choices(KINDS, weights=list(KIND_SHARES.values()))[0]
    batch, size, channels = rng.choice(BATCHES), _log_uniform(rng, *SIZES), _channels(rng)
    if kind == "conv":
        return _conv_config(rng, batch, size)
    if kind == "linear":
        return OpConfig("linear", batch, channels, _channels(rng))
    if kind == "activation":
        return OpConfig(kind, batch, channels, channels, size, variant=rng.choice(list(ACTIVATIONS)))
    if kind == "pool":
        variant = rng.choice(POOLS)
        return OpConfig(kind, batch, channels, channels, size, 3, rng.choice((1, 2)), variant=variant)
    if kind == "shuffle":
        channels += channels % 2
    return OpConfig(kind, batch, channels, channels, size)


def fits(config: OpConfig) -> bool:
    """Within memory and time bounds: no tensor over MAX_ACTIVATION_ELEMENTS, no conv over MAX_CONV_FLOPS."""
    elements = config.batch * max(config.channels, config.out_channels) * config.size**2
    if config.kind == "conv":
        flops = 2 * config.batch * config.out_channels * config.out_size**2 * config.kernel**2 * (
            config.channels // config.groups)  # fmt: skip
        return elements <= MAX_ACTIVATION_ELEMENTS and flops <= MAX_CONV_FLOPS and config.out_size >= 1
    return elements <= MAX_ACTIVATION_ELEMENTS


def sample_configs(count: int, seed: int = 0) -> list[OpConfig]:
    """``count`` distinct configs that fit, drawn in a fixed order from ``seed``: the same call, the same sample."""
    if count < 1:
        raise UsageError(f"the sample needs at least 1 config, got {count}")
    rng, seen = random.Random(seed), {}
    while len(seen) < count:
        config = draw_config(rng)
        if fits(config):
            seen.setdefault(config.key, config)
    return list(seen.values())
