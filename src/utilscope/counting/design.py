"""A CNN's design choices, read from its count and its modules: what a population's utilization is related to.

``design(module, resolution)`` gives, for one forward pass at batch 1: the FLOP shares of dense (k > 1),
pointwise, grouped and depthwise convolutions and of linear layers; whether it has squeeze-excite blocks; its main
activation; the share of its matmul-class FLOPs in layers aligned for fp16 tensor cores (``aligned_share``: by
``hardware.alignment.unaligned_channels``, the one rule, with the stem counted and depthwise convs judged per group;
see ``_aligned``); its stem (the kernel and stride of the convolution that reads the image, and whether it is a
patchify conv); its depth (convolution and linear layers run) and FLOP-weighted width (output channels); whether
it has re-parameterizable blocks (RepVGG-style: ``reparameterize``, ``switch_to_deploy`` or ``fuse`` methods;
measured as built, i.e. with their branches).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from torch import nn

from utilscope.counting.counter import CountResult, count
from utilscope.hardware.alignment import channel_multiple, unaligned_channels
from utilscope.models import zoo

MATMUL_CLASSES = ("dense_conv", "pointwise_conv", "grouped_conv", "depthwise_conv", "linear")
ALIGNMENT = channel_multiple("fp16")  # the design features describe networks for fp16 tensor cores
_REPEAT = re.compile(r"#\d+$")


@dataclass(frozen=True)
class Design:
    dense_share: float  # FLOP shares of the network's FLOPs
    pointwise_share: float
    grouped_share: float
    depthwise_share: float
    linear_share: float
    squeeze_excite: bool
    activation: str  # the activation most layers use: "relu", "silu", "gelu", "hardswish", ...
    aligned_share: float  # of conv/linear FLOPs in layers aligned to ALIGNMENT (``_aligned``: stem counted)
    stem: str  # "k7s2": the kernel and stride of the convolution that reads the image
    patchify_stem: bool  # kernel == stride >= 4
    depth: int  # convolution and linear layers run
    width: float  # FLOP-weighted mean output channels of the conv/linear layers
    reparameterizable: bool


def activation_name(op: str) -> str:
    """``aten.silu_`` -> ``silu``; torch's relu6 is a ``hardtanh``."""
    name = op.removeprefix("aten.").rstrip("_")
    return {"hardtanh": "relu6", "clamp": "relu6", "clamp_min": "relu"}.get(name, name)


def main_activation(result: CountResult) -> str:
    """The activation op the most layers outside squeeze-excite gates run (softmax excluded); "none" if none."""
    names = Counter(
        activation_name(op)
        for layer in result.layers
        if layer.op_class == "activation"
        for op in layer.ops
        if "softmax" not in op
    )
    return names.most_common(1)[0][0] if names else "none"


def channels_per_group(module: nn.Module) -> tuple[int, int] | None:
    if isinstance(module, nn.modules.conv._ConvNd):
        return module.in_channels // module.groups, module.out_channels // module.groups
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    return None


def _shares(result: CountResult) -> dict[str, float]:
    shares = result.class_summary().set_index("op_class")["flops_share"]
    return {op_class: float(shares.get(op_class, 0.0)) for op_class in MATMUL_CLASSES}


def _matmul_layers(result: CountResult, modules: dict[str, nn.Module]):
    """(layer, its module) of every conv/linear layer run by a module of the model."""
    for layer in result.layers:
        module = modules.get(_REPEAT.sub("", layer.name))
        if layer.op_class in MATMUL_CLASSES and module is not None and channels_per_group(module) is not None:
            yield layer, module


def _stem(result: CountResult, modules: dict[str, nn.Module]) -> tuple[str, bool]:
    """The stem: of the convolutions that read the image (3 input channels), the one with the largest kernel (a
    RepVGG stem runs a 3x3 and a 1x1 branch side by side); else the first convolution (TResNet's space-to-depth
    stem)."""
    convs = [m for _, m in _matmul_layers(result, modules) if isinstance(m, nn.modules.conv._ConvNd)]
    if not convs:
        return "none", False
    stem = max((m for m in convs if m.in_channels == 3), key=lambda m: m.kernel_size[0], default=convs[0])
    kernel, stride = stem.kernel_size[0], stem.stride[0]
    return f"k{kernel}s{stride}", kernel == stride >= 4


def _aligned(module: nn.Module) -> bool:
    """Whether a conv / linear layer is aligned to ``ALIGNMENT`` by the one rule (``unaligned_channels``), applied
    as the stored design tables were built (``data/timm_design.csv``, ``scripts/build_timm_design.py``): the stem's
    3 input channels are judged (``image_input=False``: the stem counts as unaligned) and a depthwise conv is judged
    per group (``depthwise_per_group=True``: its one channel per group makes every depthwise conv unaligned).
    ``advise``'s ``unaligned_share`` applies the same rule with the image exempt and depthwise convs judged by their
    total channels."""
    groups = getattr(module, "groups", 1)
    per_group_in, per_group_out = channels_per_group(module)
    return not unaligned_channels(
        per_group_in * groups,
        per_group_out * groups,
        ALIGNMENT,
        groups=groups,
        image_input=False,
        depthwise_per_group=True,
    )


def design_of(module: nn.Module, result: CountResult) -> Design:
    """The design of a model, from the module and its count (``count(module, ...)``)."""
    modules = dict(module.named_modules())
    shares = _shares(result)
    layers = list(_matmul_layers(result, modules))
    flops = sum(layer.flops for layer, _ in layers) or 1
    aligned = sum(layer.flops for layer, m in layers if _aligned(m))
    width = sum(layer.flops * channels_per_group(m)[1] * getattr(m, "groups", 1) for layer, m in layers) / flops
    stem, patchify = _stem(result, modules)
    return Design(
        shares["dense_conv"],
        shares["pointwise_conv"],
        shares["grouped_conv"],
        shares["depthwise_conv"],
        shares["linear"],
        any(layer.op_class == "se_gate" for layer in result.layers),
        main_activation(result),
        aligned / flops,
        stem,
        patchify,
        len(layers),
        width,
        any(callable(getattr(m, name, None)) for m in modules.values() for name in zoo.REPARAM_METHODS),
    )


def design(module: nn.Module, resolution: int) -> Design:
    """The design of a module at a resolution (counted at batch 1, fp32)."""
    return design_of(module, count(module, resolution=resolution))
