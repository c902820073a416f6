"""The layer configurations a GPU is calibrated on: what CNNs contain, one op (or one small block) each.

An ``OpConfig`` names a kind and its shape: convolutions (kernel, stride, dilation, groups: dense, grouped,
depthwise, pointwise), linear layers, the memory-bound ops between them (batch, layer and group norm, activations,
elementwise add and multiply, pooling, a squeeze-excite gate, concatenation, channel shuffle), and a residual
``chain`` of them (conv, norm, activation, pointwise conv, norm, add) on which the composition of a network from its
layers is fitted. ``build_op`` makes the module and its inputs; ``sample_configs`` draws a seeded, stratified
sample of them. Convolutions and chains are drawn half "CNN-like" (the sizes of a resolution pyramid, widths that
grow with depth and are mostly multiples of 8, the group widths, kernels and strides CNNs use, stems on 3 channels)
and half "broad" (log-uniform channels and sizes) so that the sample covers what networks contain and around it.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn

from utilscope.counting import formulas
from utilscope.errors import UsageError
from utilscope.limits import MAX_CONFIGS, MAX_CONFIGS_WHY, check_count

CONV_STYLES = ("dense", "pointwise", "grouped", "depthwise")
ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU, "hardswish": nn.Hardswish, "sigmoid": nn.Sigmoid}
POOLS = ("max", "avg", "global")
SAMPLE_VERSION = 13  # the sampler's version (a profile keeps every config it timed, of any version)
# kind: share of the sample (convolutions are half of it, a quarter per style); each kind is drawn from a seeded
# stream of its own, so that its configs do not depend on the other kinds' draws. Version 4 added the last two
# (classifier heads wider than CHANNELS, and 9x9 / 11x11 dense convs such as AlexNet's stem): the others' shares
# shrank by 3%, so their configs are a prefix of what version 3 timed. Version 5 added memory-bound ops on tensors
# of 2^28 to 2^30 elements (batch and group norms, activations, adds: the early stages of BiT at 448 px or
# EfficientNet-L2 at 800 px, which no smaller config's efficiency told), the same way. Version 6 added classifier
# heads as a conv over the whole input (timm's VGG ConvMlp: 7x7 over 7x7, no padding, one output pixel), which
# every padded conv of the sample was unlike. Version 7 added the copy of an NCHW image to channels_last (ATen's,
# before a conv whose input arrives NCHW, after a GroupNorm or a channel shuffle), which cost 0.22 ms on the H200
# at 256 x 64 x 56 x 56 where the shuffles' and clones' copy model said 0.29 ms (scripts/layout_probe.py), and
# depthwise convs with a channel multiplier (groups = input channels, 2 or 4 outputs per group: FastViT's
# downsampling), for which cuDNN ran a generic engine (convolve_common_engine_float_NHWC) at a quarter of what the
# multiplier-1 depthwise convs of the sample predicted. Version 8 added 3x3 grouped convs at any multiple-of-8 group
# width, half at stride 2 (RegNets' 56, 120, 232 ...: RegNetX-8GF's stride-2 grouped convs took 3.3-4.2x and its
# stride-1 ones 1.8x what the sample's power-of-two group widths predicted), and the sum over the radix of a
# split-attention block (ResNeSt's and SKNet's (B, radix, C, H, W) -> (B, C, H, W): a strided reduction at about a
# tenth of the bandwidth, 0.2x as fast as the global means it was predicted as), and doubled the multiplier convs'
# share (their first 46 took FastViT's from 0.04-0.15 to 0.23-0.50 of measured). Version 9 added casts between
# fp32 and the activations' 16-bit dtype, up and down (autocast's: a norm's input cast up, a layer's fp32 output cast
# down): streaming copies at about 2 TB/s on the H100, which the shuffles' clones, gathering copies at 0.5 TB/s on
# channels_last, predicted about 4x slow (PoolFormer's casts: 9.5 ms predicted, 3.2 ms measured). Version 10 added
# 3x3 grouped convs of 2 or 3 channels a group at a stage's size and width, half at stride 2 (the RegNet NAS space's
# group width 2: the general model gave its blocks a median 0.82 of their measured H200 times at batch 256, and
# every other width 1.03-1.10; the sample's grouped convs had 4 or more channels a group, but for a few broad ones
# at 8-64 channels). Version 11 gave grouped_stage 4% of a sample instead of 1.5% (the H200 fp16 profile had 67 of
# them, 3 at batch 256: RegNetX-8GF's 120-channel groups at 6 groups, 14x14, batch 256 took 0.77 ms on the H200
# where 0.41 was predicted, and RegNet-Y-16GF and RegNet-X-8GF were the H100 fp16 validation's worst networks at
# batch 256), and added token_linear, a channels-last MLP's linear layer on a stage's tokens at its width, 4x up or
# down (ConvNeXt's: at batch 256 its first stage's GEMMs have 802,816 rows, beyond the sample's 331,776, and were
# predicted 1.6-2.3x slow). Version 12 added band_depthwise, 1xk and kx1 depthwise convs (k 3-7) at a stage's size
# and width: GhostNetV2's DFC attention runs 1x5 and 5x1 ones, which cuDNN ran with its generic grouped kernel
# (conv2d_grouped_direct_kernel, 0.75 ms for 77 MB on the H100) at 4-8x what the square depthwise convs and the
# sample's few 1x7 / 1x11 band kernels predicted. Version 13 added pointwise_depthwise, 1x1 depthwise convs at a
# stage's size and width, stride 1 or 2 (MobileOne's, FastViT's and RepViT's scale branches): the sample had none,
# and with version 12's 1xk bands the trees priced them as bands, MobileOne-S3's at 4.9x what version 11 predicted;
# on the H100, MobileOne-S0's took 0.055 ms at stride 1 (its 3x3 depthwise convs on the same tensor 0.061) and
# 0.81 ms at stride 2 (0.145); and grouped_entry, a stage's first grouped conv: 3x3 at stride 2 on one of the first
# three stages' inputs, at batch 64-256 (RegNetY-16GF's at 112 channels a group, 224 channels, 112 -> 56 px, batch
# 256 took 8.5 ms on the H100 where 3.5 ms was predicted, its other stages' entries 0.41-0.72 of measured: the sample's
# grouped_stage convs at stride 2 and batch 64 or more had 24 configs, two of them above 36 px); and channel_slice,
# an op on a channel slice of a channels_last tensor, a strided view (``torch.split``'s parts: InceptionNeXt's band
# convs, FocalNet's gates, MambaOut's activation, 0.25-0.45 of their H200 time predicted as the dense op of their
# shape; the trace flags such inputs, ``OpEvent.strided``, and the rows carry the flag).
KIND_SHARES = {
    "conv": 0.5,
    "linear": 0.05,
    "batch_norm": 0.06,
    "layer_norm": 0.03,
    "group_norm": 0.02,
    "activation": 0.08,
    "add": 0.04,
    "mul": 0.03,
    "pool": 0.04,
    "se_gate": 0.03,
    "concat": 0.02,
    "shuffle": 0.02,
    "chain": 0.08,
    "head": 0.02,
    "large_conv": 0.01,
    "large_memory": 0.02,
    "conv_head": 0.01,
    "layout_copy": 0.02,
    "multiplier_conv": 0.02,
    "grouped_stage": 0.04,
    "radix_sum": 0.01,
    "cast": 0.04,
    "narrow_grouped": 0.01,
    "token_linear": 0.01,
    "band_depthwise": 0.01,
    "pointwise_depthwise": 0.01,
    "grouped_entry": 0.01,
    "channel_slice": 0.02,
}
KINDS = tuple(KIND_SHARES)
CONV_KINDS = (  # one conv
    "conv",
    "large_conv",
    "multiplier_conv",
    "grouped_stage",
    "narrow_grouped",
    "band_depthwise",
    "pointwise_depthwise",
    "grouped_entry",
)
LINEAR_KINDS = ("linear", "token_linear")  # an nn.Linear on (B, C) or, size > 1, on (B, size, size, C) tokens
GROUP_WIDTHS = (4, 8, 16, 24, 32, 48, 64, 128, 256)  # channels per group of the grouped convs of CNNs
DEPTHWISE_EXPANSIONS = (1, 1, 3, 4, 6)  # a depthwise conv's channels over its stage's width (inverted residuals)
BAND_SIDES = (3, 5, 5, 7)  # a band_depthwise conv's long side (GhostNetV2's DFC attention: 5)
NARROW_GROUP_WIDTHS = (2, 2, 3)  # a narrow_grouped conv's channels per group (RegNet NAS spaces' 2 most often)
CHANNELS = (8, 2048)  # the calibrated range, per kind's channel axis
SIZES = (7, 320)  # spatial size (square)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
RESOLUTIONS = (96, 640)  # input sizes of the CNN-like pyramid (log-uniform)
MAX_ACTIVATION_ELEMENTS = 1 << 28  # per tensor: keeps a config within memory and a timed call short
LARGE_ELEMENTS = (1 << 28, 1 << 30)  # a large_memory config's tensor (2 GB in fp16 at most)
LARGE_MEMORY_OPS = ("batch_norm", "group_norm", "relu", "silu", "gelu", "add")  # its variants
MAX_CONV_FLOPS = 4e12
CONV_HEAD_CHANNELS = (256, 384, 512, 768, 1024, 1280, 2048)  # a conv_head's input channels
HEAD_FEATURES = (512, 768, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 4096, 9216, 25088)  # up to VGG's 512x7x7
MULTIPLIERS = (2, 4)  # a multiplier_conv's outputs per input channel
GROUPED_STAGE_CHANNELS = 4096  # a grouped_stage conv's most channels (RegNetY-128GF's last stage: 2,904 ... 3,712)
RADICES = (2, 2, 2, 4)  # a radix_sum's branches (ResNeSt's and SKNet's 2; ResNeSt-269's 4 is not timm's, kept rare)
SLICE_OPS = ("gelu", "add", "mul", "gate", "cat", "depthwise", "band")  # a channel_slice's op (``ChannelSlice``)
SLICE_FRACTIONS = (2, 3, 4)  # a channel_slice's part: this fraction of its tensor's channels
MUL_SHAPES = ("same", "gate", "channel")  # the second operand: the same shape, (B, C, 1, 1), or (1, C, 1, 1)
CAST_DIRECTIONS = ("up", "down")  # a cast's variant: from the activations' 16-bit dtype to fp32, or back


@dataclass(frozen=True)
class OpConfig:
    kind: str
    batch: int
    channels: int  # input channels (features of a linear layer)
    out_channels: int  # = channels for the kinds that keep them
    size: int = 1  # square spatial size of the input (for a linear layer >1: over (B, size, size, C) tokens)
    kernel: int = 1
    stride: int = 1
    groups: int = 1  # a radix_sum's: its radix
    dilation: int = 1
    variant: str = ""  # the activation, the pool, or the shape of a multiply's second operand
    kernel_w: int = 0  # a conv's kernel width when it differs from its height (1x7, 11x1 ...); 0: square

    @property
    def key(self) -> str:
        """The fields as name=value; kernel_w only when set (so configs drawn before it existed keep their keys)."""
        return "|".join(f"{k}={v}" for k, v in asdict(self).items() if k != "kernel_w" or v)

    @property
    def kernel_width(self) -> int:
        return self.kernel_w or self.kernel

    @property
    def out_size(self) -> int:
        if self.kind == "conv_head":  # its kernel covers its unpadded input
            return 1
        if self.kind not in (*CONV_KINDS, "pool") or self.variant == "global":
            return 1 if self.variant == "global" else self.size
        reach = self.dilation * (self.kernel - 1)
        return (self.size + 2 * (reach // 2) - reach - 1) // self.stride + 1


def _conv(config: OpConfig) -> nn.Module:
    kernel = (config.kernel, config.kernel_width)
    padding = tuple(0 if config.kind == "conv_head" else config.dilation * (side - 1) // 2 for side in kernel)
    return nn.Conv2d(
        config.channels, config.out_channels, kernel, config.stride, padding, config.dilation, config.groups, bias=False
    )


class SqueezeExcite(nn.Module):
    """Global pool, 1x1 reduce (to a quarter), ReLU, 1x1 expand, sigmoid, and the gate's multiply."""

    def __init__(self, channels: int):
        super().__init__()
        hidden = max(8, channels // 4)
        self.reduce, self.expand = nn.Conv2d(channels, hidden, 1), nn.Conv2d(hidden, channels, 1)

    def forward(self, x):
        gate = self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


class LayerNorm2d(nn.LayerNorm):
    """Layer norm over the channels of an image, as ConvNeXt's: to channels-last, normalize, back."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Chain(nn.Module):
    """A residual block: conv (the config's kernel, stride 1, groups), batch norm, activation, 1x1 conv, batch
    norm, and the add of the block's input."""

    def __init__(self, config: OpConfig):
        super().__init__()
        channels, kernel = config.channels, config.kernel
        self.conv = nn.Conv2d(channels, channels, kernel, 1, kernel // 2, groups=config.groups, bias=False)
        self.norm, self.act = nn.BatchNorm2d(channels), ACTIVATIONS[config.variant]()
        self.project, self.norm2 = nn.Conv2d(channels, channels, 1, bias=False), nn.BatchNorm2d(channels)

    def forward(self, x):
        return x + self.norm2(self.project(self.act(self.norm(self.conv(x)))))


class ToChannelsLast(nn.Module):
    """The copy of an NCHW image to channels_last, as ATen makes it of a conv's input that arrives NCHW."""

    def forward(self, x):
        return x.contiguous(memory_format=torch.channels_last)


class RadixSum(nn.Module):
    """The sum over the branches of a split-attention block (ResNeSt's, SKNet's): the (B, radix x C, H, W) image as
    (B, radix, C, H, W), summed over the radix."""

    def __init__(self, radix: int):
        super().__init__()
        self.radix = radix

    def forward(self, x):
        b, c, h, w = x.shape
        return x.reshape(b, self.radix, c // self.radix, h, w).sum(dim=1)


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


class ChannelSlice(nn.Module):
    """An op on a channel slice of its input, as a block that splits its channels runs it (InceptionNeXt's band
    convs, FocalNet's gates, MambaOut's activation): on a channels_last input the first ``out_channels`` channels
    are a strided view, not a dense tensor. ``gelu``, a 3x3 ``depthwise`` conv or a 1xk / kx1 ``band`` one on that
    part; ``add``, ``mul`` or ``cat`` with the next as many channels; ``gate``: times the next one channel."""

    def __init__(self, config: OpConfig):
        super().__init__()
        self.width, self.variant = config.out_channels, config.variant
        self.op = nn.GELU() if self.variant == "gelu" else None
        if self.variant in ("depthwise", "band"):  # depthwise on the slice, as the sample's convs are built
            self.op = _conv(replace(config, channels=self.width, groups=self.width))

    def forward(self, x):
        part = x[:, : self.width]
        if self.op is not None:
            return self.op(part)
        other = x[:, self.width : self.width + (1 if self.variant == "gate" else self.width)]
        if self.variant == "add":
            return part + other
        if self.variant == "cat":
            return torch.cat((part, other), dim=1)
        return part * other


class Cast(nn.Module):
    """A cast of an image to the dtype of its second input, a one-element tensor (``input_dtypes`` says which)."""

    def forward(self, x, like):
        return x.to(like.dtype)


class Shuffle(nn.Module):
    def forward(self, x):
        b, c, h, w = x.shape
        return x.view(b, 2, c // 2, h, w).transpose(1, 2).reshape(b, c, h, w)


def input_dtypes(config: OpConfig, shapes, activations: torch.dtype) -> list[torch.dtype]:
    """The dtypes of a config's inputs (``shapes``: ``build_op``'s), ``activations`` being the dtype of the
    activations between a network's layers: theirs, but a cast's image and target as its direction says, between
    fp32 and the activations' 16-bit dtype (fp16 when the activations are fp32)."""
    if config.kind != "cast":
        return [activations] * len(shapes)
    narrow = activations if activations.itemsize == 2 else torch.float16
    return [narrow, torch.float32] if config.variant == "up" else [torch.float32, narrow]


def _pool(config: OpConfig) -> nn.Module:
    if config.variant == "global":
        return nn.AdaptiveAvgPool2d(1)
    cls = nn.MaxPool2d if config.variant == "max" else nn.AvgPool2d
    return cls(config.kernel, config.stride, (config.kernel - 1) // 2)


def laid_out(config: OpConfig, tensors: list[torch.Tensor], channels_last: bool) -> list[torch.Tensor]:
    """A config's inputs in the layout a network feeds them (``calibrate.op_inputs`` times them so, ``features.
    config_events`` traces them so): on a channels_last profile its images channels_last, a linear layer's tokens
    and a layout copy's image as they are (contiguous)."""
    images = channels_last and config.kind not in (*LINEAR_KINDS, "layout_copy")
    return [t.contiguous(memory_format=torch.channels_last) if images and t.dim() == 4 else t for t in tensors]


def build_op(config: OpConfig) -> tuple[nn.Module, tuple[torch.Size, ...]]:
    """The module of a config and the shapes of its inputs (channels first)."""
    image = torch.Size((config.batch, config.channels, config.size, config.size))
    builders = {
        **dict.fromkeys((*CONV_KINDS, "conv_head"), lambda: _conv(config)),
        **dict.fromkeys(LINEAR_KINDS, lambda: nn.Linear(config.channels, config.out_channels)),
        "batch_norm": lambda: nn.BatchNorm2d(config.channels),
        "layer_norm": lambda: LayerNorm2d(config.channels),
        "group_norm": lambda: nn.GroupNorm(math.gcd(32, config.channels), config.channels),
        "chain": lambda: Chain(config),
        "activation": lambda: ACTIVATIONS[config.variant](),
        "pool": lambda: _pool(config),
        "se_gate": lambda: SqueezeExcite(config.channels),
        "shuffle": Shuffle,
        "head": lambda: nn.Linear(config.channels, config.out_channels),
        "layout_copy": ToChannelsLast,
        "radix_sum": lambda: RadixSum(config.groups),
        "channel_slice": lambda: ChannelSlice(config),
    }
    if config.kind == "cast":
        return Cast(), (image, torch.Size((1,)))
    if config.kind == "large_memory":  # the module of its variant, at a size no other kind reaches
        variant = config.variant
        kind = variant if variant in ("batch_norm", "group_norm", "add") else "activation"
        return build_op(replace(config, kind=kind, variant="" if kind != "activation" else variant))
    if config.kind in ("add", "mul", "concat"):
        other = {"gate": (config.batch, config.channels, 1, 1), "channel": (1, config.channels, 1, 1)}
        return Binary(config.kind), (image, torch.Size(other.get(config.variant, image)))
    if config.kind == "head":
        return builders["head"](), (torch.Size((config.batch, config.channels)),)
    if config.kind in LINEAR_KINDS:
        tokens = (config.batch, config.size, config.size, config.channels)
        return builders["linear"](), (torch.Size(tokens if config.size > 1 else (config.batch, config.channels)),)
    if config.kind not in builders:
        raise UsageError(f"unknown op kind {config.kind!r}; use one of: {', '.join(KINDS)}")
    return builders[config.kind](), (image,)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def _width(rng: random.Random, value: float, aligned: float = 0.85) -> int:
    """``value`` as a layer width: a multiple of 8 with probability ``aligned``, else as it is (at least 8)."""
    return max(8, round(value / 8) * 8 if rng.random() < aligned else int(value))


def _channels(rng: random.Random) -> int:
    """Log-uniform over CHANNELS; a third of them unaligned (not a multiple of 8), as pruned or odd widths are."""
    return _width(rng, _log_uniform(rng, *CHANNELS), aligned=2 / 3)


def _pyramid(rng: random.Random) -> tuple[int, int, int]:
    """A CNN's input resolution, and the spatial size and width of one of its five stages (width doubling per
    stage from a base width of 16 to 96)."""
    resolution, stage = _log_uniform(rng, *RESOLUTIONS), rng.randint(1, 5)
    return resolution, max(3, math.ceil(resolution / 2**stage)), _log_uniform(rng, 16, 96) * 2 ** (stage - 1)


def _grouped(rng: random.Random, width: float) -> tuple[int, int]:
    """Channels and groups of a grouped conv of about ``width`` channels: a CNN's group width, at least 2 groups."""
    group_width = rng.choice(GROUP_WIDTHS)
    groups = max(2, round(width / group_width))
    return groups * group_width, groups


def _band(rng: random.Random, sides: tuple[int, ...]) -> tuple[int, int]:
    """A band kernel's (height, width): 1 x k or k x 1, k one of ``sides``."""
    side = rng.choice(sides)
    return (1, side) if rng.random() < 0.5 else (side, 1)


def _band_depthwise(kind: str, batch: int, channels: int, size: int, kernel: tuple[int, int]) -> OpConfig:
    """A depthwise conv of a band ``kernel`` (height, width), stride 1."""
    return OpConfig(kind, batch, channels, channels, size, kernel[0], 1, channels, kernel_w=kernel[1])


def _cnn_conv(rng: random.Random, batch: int) -> OpConfig:
    """A convolution as CNNs have them: stems, patchify downsampling, 3x3/5x5/7x7 dense and factorized 1xk / kx1,
    pointwise expansions and projections, depthwise (at expanded widths, 3x3 to 9x9 and band kernels) and grouped
    convs at the sizes and widths of a stage."""
    resolution, size, width = _pyramid(rng)
    style, stride = rng.choice(CONV_STYLES), 2 if rng.random() < 0.15 else 1
    if style == "dense":
        draw = rng.random()
        if draw < 0.15:  # a stem on the RGB input
            kernel = rng.choice((3, 4, 7))
            return OpConfig(
                "conv", batch, 3, _width(rng, _log_uniform(rng, 16, 64)), resolution, kernel, 4 if kernel == 4 else 2
            )
        if draw < 0.25:  # patchify downsampling (ConvNeXt's 2x2 stride 2)
            return OpConfig("conv", batch, _width(rng, width), _width(rng, 2 * width), size, 2, 2)
        if draw < 0.35:  # a factorized kernel (Inception's 1x7 and 7x1)
            height, kernel_w = _band(rng, (3, 5, 7))
            return OpConfig("conv", batch, _width(rng, width), _width(rng, width), size, height, kernel_w=kernel_w)
        cin = _width(rng, width)
        return OpConfig(
            "conv", batch, cin, _width(rng, cin * rng.choice((1, 1, 2))), size, rng.choice((3, 3, 3, 3, 5, 7)), stride
        )
    if style == "pointwise":
        cin = _width(rng, width * rng.choice((1, 1, 4, 6)))
        return OpConfig("conv", batch, cin, _width(rng, width * rng.choice((0.25, 0.5, 1, 2, 4, 6))), size)
    if style == "depthwise":
        channels = _width(rng, width * rng.choice(DEPTHWISE_EXPANSIONS))
        if rng.random() < 0.15:  # a band kernel (InceptionNeXt's 1x11 and 11x1)
            return _band_depthwise("conv", batch, channels, size, _band(rng, (7, 11)))
        return OpConfig("conv", batch, channels, channels, size, rng.choice((3, 3, 5, 7, 9)), stride, channels)
    channels, groups = _grouped(rng, width)
    return OpConfig("conv", batch, channels, channels, size, 3, stride, groups)


def _broad_conv(rng: random.Random, batch: int, size: int) -> OpConfig:
    """A convolution of log-uniform channels and size, any style, kernel 1-7, stride 1-2, some dilated."""
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


def _chain_config(rng: random.Random, batch: int) -> OpConfig:
    """A residual chain at a stage's size and width: depthwise, grouped or dense first conv."""
    _, size, width = _pyramid(rng)
    style, variant = rng.choice(("depthwise", "grouped", "dense")), rng.choice(list(ACTIVATIONS))
    if style == "grouped":
        channels, groups = _grouped(rng, width)
        return OpConfig("chain", batch, channels, channels, size, 3, groups=groups, variant=variant)
    channels = _width(rng, width * (rng.choice((1, 4, 6)) if style == "depthwise" else 1))
    kernel = rng.choice((3, 5, 7)) if style == "depthwise" else 3
    groups = channels if style == "depthwise" else 1
    return OpConfig("chain", batch, channels, channels, size, kernel, groups=groups, variant=variant)


def draw_config(rng: random.Random, kind: str) -> OpConfig:
    """One config of ``kind`` (convs and chains half CNN-like, half broad; linear layers half on tokens)."""
    batch, size, channels = rng.choice(BATCHES), _log_uniform(rng, *SIZES), _channels(rng)
    cnn_like = rng.random() < 0.5
    if kind in ("conv", "chain") and cnn_like:
        return _cnn_conv(rng, batch) if kind == "conv" else _chain_config(rng, batch)
    if kind == "conv":
        return _broad_conv(rng, batch, size)
    if kind == "chain":
        return OpConfig(kind, batch, channels, channels, size, 3, variant=rng.choice(list(ACTIVATIONS)))
    if kind == "linear":  # a classifier or an MLP on (B, H, W, C) tokens, as ConvNeXt's
        return OpConfig("linear", batch, channels, _channels(rng), size if cnn_like else 1)
    if kind == "token_linear":
        return _token_linear(rng)
    if kind == "head":  # a classifier, or AlexNet's and VGG's wide fully connected layers
        features = rng.choice(HEAD_FEATURES)
        return OpConfig(kind, batch, features, rng.choice((1000, 1000, 4096, features)))
    if kind == "large_conv":  # a 9x9 or 11x11 dense conv: an RGB stem at stride 4 (AlexNet's), or within a stage
        return _large_conv(rng, batch)
    if kind == "conv_head":  # a classifier head as a conv over its whole k x k input (timm's VGG: 512x7x7 -> 4096)
        kernel = rng.choice((3, 5, 7))
        return OpConfig(kind, batch, rng.choice(CONV_HEAD_CHANNELS), rng.choice((1000, 2048, 4096)), kernel, kernel)
    if kind == "layout_copy" and cnn_like:  # at a stage's size and width (GroupNorm and ShuffleNet stages)
        _, size, width = _pyramid(rng)
        channels = _width(rng, width * rng.choice((0.5, 1, 4)), aligned=0.7)
        return OpConfig(kind, batch, channels, channels, size)
    if kind == "multiplier_conv":  # a depthwise conv to 2 or 4 x its channels, at a stage's size and width
        _, size, width = _pyramid(rng)
        channels, stride = _width(rng, width), rng.choice((1, 2))
        return OpConfig(
            kind, batch, channels, channels * rng.choice(MULTIPLIERS), size, rng.choice((3, 5, 7)), stride, channels
        )
    if kind in ("grouped_stage", "narrow_grouped", "band_depthwise", "pointwise_depthwise"):
        return _stage_conv(rng, kind, batch)
    if kind == "grouped_entry":
        return _grouped_entry(rng)
    if kind == "channel_slice":
        return _channel_slice(rng, batch)
    if kind == "radix_sum":  # a split-attention block's sum over its branches, at a stage's size and width
        _, size, width = _pyramid(rng)
        radix, branch = rng.choice(RADICES), _width(rng, width)
        return OpConfig(kind, batch, radix * branch, branch, size, groups=radix)
    if kind == "large_memory":  # 2^28 to 2^30 elements at a large batch: channels log-uniform, the size to match
        batch, channels = rng.choice((32, 64, 128, 256)), _width(rng, _log_uniform(rng, 32, 3072), aligned=0.9)
        size = max(7, round(math.sqrt(_log_uniform(rng, *LARGE_ELEMENTS) / (batch * channels))))
        return OpConfig(kind, batch, channels, channels, size, variant=rng.choice(LARGE_MEMORY_OPS))
    if kind == "activation":
        return OpConfig(kind, batch, channels, channels, size, variant=rng.choice(list(ACTIVATIONS)))
    if kind == "pool":
        variant = rng.choice(POOLS)
        kernel, stride = rng.choice(((3, 2), (3, 2), (3, 1), (2, 2)))
        return OpConfig(kind, batch, channels, channels, size, kernel, stride, variant=variant)
    if kind == "mul":
        return OpConfig(kind, batch, channels, channels, size, variant=rng.choice(MUL_SHAPES))
    if kind == "cast":
        return OpConfig(kind, batch, channels, channels, size, variant=rng.choice(CAST_DIRECTIONS))
    if kind == "shuffle":
        channels += channels % 2
    return OpConfig(kind, batch, channels, channels, size)


def _token_linear(rng: random.Random) -> OpConfig:
    """A channels-last MLP's layer on a stage's tokens, 4x up or down (ConvNeXt's), at the large batches where its
    rows outnumber the linear kind's."""
    _, size, width = _pyramid(rng)
    batch, width = rng.choice(BATCHES[-4:]), _width(rng, width)
    channels, out_channels = (width, 4 * width) if rng.random() < 0.5 else (4 * width, width)
    return OpConfig("token_linear", batch, channels, out_channels, size)


def _stage_conv(rng: random.Random, kind: str, batch: int) -> OpConfig:
    """A conv at a stage's size and width. ``band_depthwise``: a 1xk or kx1 depthwise conv at the stage's width or
    expanded, stride 1 (GhostNetV2's 1x5 and 5x1); ``pointwise_depthwise``: a 1x1 depthwise conv there, stride 1 or
    2 (MobileOne's scale branch). Else a 3x3 grouped conv, stride 1 or 2:
    ``grouped_stage``, any multiple-of-8 group width and 2-64 groups; ``narrow_grouped``, 2 or 3 channels a group
    at the stage's width."""
    _, size, width = _pyramid(rng)
    if kind in ("band_depthwise", "pointwise_depthwise"):
        channels = _width(rng, width * rng.choice(DEPTHWISE_EXPANSIONS))
        if kind == "pointwise_depthwise":
            return OpConfig(kind, batch, channels, channels, size, 1, rng.choice((1, 2)), channels)
        return _band_depthwise(kind, batch, channels, size, _band(rng, BAND_SIDES))
    if kind == "grouped_stage":
        group_width = 8 * _log_uniform(rng, 1, 32)
        groups = max(2, min(_log_uniform(rng, 2, 64), GROUPED_STAGE_CHANNELS // group_width))
    else:
        group_width = rng.choice(NARROW_GROUP_WIDTHS)
        groups = max(2, round(width / group_width))
    channels = group_width * groups
    return OpConfig(kind, batch, channels, channels, size, 3, rng.choice((1, 2)), groups)


def _channel_slice(rng: random.Random, batch: int) -> OpConfig:
    """An op on a channel slice (``ChannelSlice``, one of ``SLICE_OPS``) of a tensor at a stage's size and width or
    expanded, the slice a ``SLICE_FRACTIONS`` part of its channels; a band conv 1x7, 1x11, 7x1 or 11x1."""
    _, size, width = _pyramid(rng)
    channels, variant = _width(rng, width * rng.choice(DEPTHWISE_EXPANSIONS)), rng.choice(SLICE_OPS)
    kernel = (3, 3) if variant == "depthwise" else _band(rng, (7, 11)) if variant == "band" else (1, 1)
    part = max(1, channels // rng.choice(SLICE_FRACTIONS))
    return OpConfig("channel_slice", batch, channels, part, size, kernel[0], variant=variant, kernel_w=kernel[1])


def _grouped_entry(rng: random.Random) -> OpConfig:
    """A RegNet-like stage's first grouped conv: 3x3 at stride 2 on the input of one of the first three stages
    (the stem's output halved 0-2 times), any multiple-of-8 group width, 2 groups or more at a width of 24-528
    channels doubled per stage (RegNets' first stages: 24 to RegNetY-128GF's 528), batch 64-256, its groups at
    most as many as keep the input within ``MAX_ACTIVATION_ELEMENTS`` (``fits``, as every conv)."""
    resolution, stage = _log_uniform(rng, *RESOLUTIONS), rng.randint(1, 3)
    size = max(3, math.ceil(resolution / 2**stage))
    batch, group_width = rng.choice(BATCHES[-3:]), 8 * _log_uniform(rng, 1, 32)
    width = _log_uniform(rng, 24, 528) * 2 ** (stage - 1)
    fitting = MAX_ACTIVATION_ELEMENTS // (batch * size * size * group_width)
    groups = max(2, min(round(width / group_width), GROUPED_STAGE_CHANNELS // group_width, fitting))
    channels = group_width * groups
    return OpConfig("grouped_entry", batch, channels, channels, size, 3, 2, groups)


def _large_conv(rng: random.Random, batch: int) -> OpConfig:
    """A 9x9 or 11x11 dense conv: an RGB stem at stride 2 or 4 (AlexNet's), or one within a stage."""
    kernel, stem = rng.choice((9, 11)), rng.random() < 0.5
    if stem:
        out_channels = _width(rng, _log_uniform(rng, 16, 96))
        return OpConfig("large_conv", batch, 3, out_channels, _log_uniform(rng, 96, 320), kernel, rng.choice((2, 4)))
    _, size, width = _pyramid(rng)
    return OpConfig("large_conv", batch, _width(rng, width), _width(rng, width), size, kernel, rng.choice((1, 2)))


def quotas(count: int) -> dict[str, int]:
    """Configs per kind for a sample of ``count``: KIND_SHARES, rounded by largest remainder."""
    exact = {kind: count * share / sum(KIND_SHARES.values()) for kind, share in KIND_SHARES.items()}
    result = {kind: int(value) for kind, value in exact.items()}
    for kind in sorted(exact, key=lambda k: result[k] - exact[k])[: count - sum(result.values())]:
        result[kind] += 1
    return result


def conv_flops(config: OpConfig) -> int:
    """2 x MACs of a config's convolution (for a chain: of its two convs), by ``counting.formulas.conv_flops``."""
    image = (config.batch, config.channels, config.size, config.size)
    weight = (config.out_channels, config.channels // config.groups, config.kernel, config.kernel_width)
    flops = formulas.conv_flops(image, weight, (config.batch, config.out_channels, config.out_size, config.out_size))
    if config.kind == "chain":  # its 1x1 projection
        flops += formulas.conv_flops(image, (config.channels, config.channels, 1, 1), image)
    return flops


def fits(config: OpConfig) -> bool:
    """Within memory and time bounds: no input or output over MAX_ACTIVATION_ELEMENTS elements (a large_memory
    config: within LARGE_ELEMENTS; a token_linear one: up to its top), no conv over MAX_CONV_FLOPS, an output of at
    least one pixel."""
    if config.out_size < 1:
        return False
    elements = config.batch * max(config.channels * config.size**2, config.out_channels * config.out_size**2)
    if config.kind == "large_memory":
        return LARGE_ELEMENTS[0] <= elements <= LARGE_ELEMENTS[1]
    if config.kind in (*CONV_KINDS, "chain", "conv_head"):
        return elements <= MAX_ACTIVATION_ELEMENTS and conv_flops(config) <= MAX_CONV_FLOPS
    if config.kind == "token_linear":  # ConvNeXt-T's first MLP at batch 256: 308M elements, as large_memory's
        return elements <= LARGE_ELEMENTS[1]
    return elements <= MAX_ACTIVATION_ELEMENTS


def _kind_stream(kind: str, quota: int, seed: int) -> list[OpConfig]:
    rng, seen = random.Random(f"{seed}:{kind}"), {}
    while len(seen) < quota:
        config = draw_config(rng, kind)
        if fits(config):
            seen.setdefault(config.key, config)
    return list(seen.values())


def sample_configs(count: int, seed: int = 0) -> list[OpConfig]:
    """``count`` distinct configs that fit, ``quotas(count)`` of each kind, each kind drawn from its own stream
    of ``seed`` (a larger count extends each kind's configs of a smaller one), interleaved so that any prefix of
    the sample holds the kinds in their shares."""
    check_count(count, "the calibration sample's size", 1, MAX_CONFIGS, MAX_CONFIGS_WHY)
    streams = {kind: _kind_stream(kind, quota, seed) for kind, quota in quotas(count).items()}
    ranked = [
        ((index + 0.5) / len(configs), kind, config)
        for kind, configs in streams.items()
        for index, config in enumerate(configs)
    ]
    return [config for *_, config in sorted(ranked, key=lambda item: item[:2])]
