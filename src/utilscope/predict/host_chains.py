"""The host calibration's networks (``host_calibrate``): small CNNs built from the blocks CNNs are made of, so that
the host's work of a whole forward can be compared with the sum of its calls timed one kind at a time.

A call timed alone, 200 times back to back, runs with its Python, its dispatch path and its launch hot in the
CPU's caches; in a network's forward each call follows calls of other kinds, through modules' own ``forward``
code. The chains measure what that costs: each is one block kind of the common CNN families (a plain conv stack,
ResNet's basic and bottleneck blocks, MobileNet's inverted residual with squeeze-excite, DenseNet's concatenation,
ShuffleNet's split and shuffle), repeated, with a classifier head where the family has one. Their tensors are
tiny (batch 1, 16 channels, 8x8), so the GPU runs each kernel faster than the host issues it and a forward's time is
the host's. None of them is a network of the validation sets: they are written here, block by block.
"""

from __future__ import annotations

import torch
from torch import nn

CHANNELS = 16
RESOLUTION = 8
REPEATS = 4


def conv_bn(c_in: int, c_out: int, kernel: int = 3, groups: int = 1, act: type[nn.Module] | None = nn.ReLU):
    """Conv, batch norm and (``act`` None: no) activation, as torchvision's and timm's stems and blocks build them."""
    layers = [nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    return nn.Sequential(*layers, *([act()] if act is not None else []))


class Basic(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch norm, the input added, ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class Bottleneck(nn.Module):
    """ResNet's bottleneck block: 1x1, 3x3, 1x1 with batch norm, the input added, ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.reduce, self.conv = conv_bn(c, c // 2, 1), conv_bn(c // 2, c // 2, 3)
        self.expand = conv_bn(c // 2, c, 1, act=None)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.expand(self.conv(self.reduce(x))) + x)


class Excite(nn.Module):
    """Squeeze-excite: a global average, two 1x1 convs, a gate multiplied into the input."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.relu, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.ReLU(), nn.Conv2d(c // 4, c, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class Inverted(nn.Module):
    """MobileNetV3's inverted residual: expand, depthwise, squeeze-excite, project, the input added."""

    def __init__(self, c: int) -> None:
        super().__init__()
        wide = 2 * c
        self.block = nn.Sequential(
            conv_bn(c, wide, 1, act=nn.Hardswish),
            conv_bn(wide, wide, 3, groups=wide, act=nn.Hardswish),
            Excite(wide),
            conv_bn(wide, c, 1, act=None),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class Dense(nn.Module):
    """DenseNet's layer: batch norm, ReLU, 1x1 conv, batch norm, ReLU, 3x3 conv, its output concatenated to the
    input, then a 1x1 transition back to the block's width (the chain keeps one width)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.norm1, self.relu1, self.conv1 = nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 1, bias=False)
        self.norm2, self.relu2, self.conv2 = nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 3, padding=1)
        self.transition = nn.Conv2d(c + c // 2, c, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))
        return self.transition(torch.cat([x, out], 1))


class Shuffle(nn.Module):
    """ShuffleNetV2's unit: the channels split in two, one half through 1x1, depthwise 3x3, 1x1, concatenated back
    and shuffled (view, transpose, contiguous, view)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        half = c // 2
        self.branch = nn.Sequential(
            conv_bn(half, half, 1), conv_bn(half, half, 3, groups=half, act=None), conv_bn(half, half, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep, work = x.chunk(2, dim=1)
        out = torch.cat((keep, self.branch(work)), dim=1)
        b, c, h, w = out.shape
        return out.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


def head(c: int, classes: int = 10) -> nn.Sequential:
    """A classifier head: global average pool, flatten, linear."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes))


def chains(c: int = CHANNELS, repeats: int = REPEATS) -> dict[str, nn.Module]:
    """The calibration networks by name, in eval mode: each block kind ``repeats`` times after a conv stem."""
    stem = lambda: conv_bn(c, c, 3)  # noqa: E731  (a fresh stem for each chain)
    blocks = {
        "plain": lambda: conv_bn(c, c, 3),
        "basic": lambda: Basic(c),
        "bottleneck": lambda: Bottleneck(c),
        "inverted": lambda: Inverted(c),
        "dense": lambda: Dense(c),
        "shuffle": lambda: Shuffle(c),
        "silu": lambda: conv_bn(c, c, 3, act=nn.SiLU),
    }
    with_head = {"plain", "basic", "bottleneck", "inverted", "silu"}
    nets = {}
    for name, block in blocks.items():
        layers = [stem(), *(block() for _ in range(repeats)), *([head(c)] if name in with_head else [])]
        nets[name] = nn.Sequential(*layers).eval()
    return nets
