"""The exact rewrites ``advise`` tries, and their checks: channel padding to the multiple the precision's tensor cores
need (``padding.pad_channels``), when enough of the conv/linear FLOPs are in unaligned layers (``unaligned_share``),
and BatchNorm folding. Each changes the model's graph but not its function: it is checked against the original in
fp32 on every input of ``CHECK_INPUTS`` (seeded, of several batch sizes), and one whose outputs differ by more than
``EXACT_RTOL`` on any of them is not exact (``Rewrite.exact``; ``advisor`` lists it, never measures or combines it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from utilscope.advise.padding import output_difference, pad_channels
from utilscope.counting.counter import CountResult, LayerCount, count
from utilscope.errors import ModelError, describe
from utilscope.hardware.alignment import unaligned_channels
from utilscope.measure import folding
from utilscope.measure.backends import fold_batchnorm

EXACT_RTOL = 1e-4  # max |difference| / max |output| in fp32, on every check input, for a rewrite to count as exact
# (batch, seed) of the inputs a rewrite is checked on: random normal images at the model's resolution, each drawn by
# a torch.Generator seeded so; the first is also the example the rewrites trace the model with
CHECK_INPUTS = ((2, 0), (1, 1), (3, 2))
MIN_UNALIGNED_SHARE = 0.01  # padding is tried when at least this share of conv/linear FLOPs is in unaligned layers
CONV_OR_LINEAR = ("dense_conv", "pointwise_conv", "grouped_conv", "depthwise_conv", "linear")


@dataclass(frozen=True)
class Rewrite:
    """An exact rewrite of the model (fp32, on the CPU), its check against the original (the largest output
    differences over the check inputs, ``check_exact``), and what it adds."""

    name: str
    model: nn.Module
    max_abs_diff: float
    max_rel_diff: float
    added_params: int
    added_flops: int  # per sample
    detail: str
    apply: Callable[[nn.Module, torch.Tensor], nn.Module]  # the same rewrite of another model (a combination's)

    @property
    def exact(self) -> bool:
        return self.max_rel_diff <= EXACT_RTOL


def unaligned_share(counted: CountResult, multiple: int, model: nn.Module) -> float:
    """The share of a counted model's conv/linear FLOPs in layers that are unaligned by the one rule
    (``hardware.alignment.unaligned_channels``): input channels per group (unless the layer reads the image, whose
    channels the data fixes) or output channels per group not a multiple of ``multiple``; a depthwise conv judged by
    its total channels. ``model`` is the module counted: its layers' ``groups`` (a count's shapes do not hold them)."""
    modules = dict(model.named_modules())
    image = next((layer.input_shapes[0] for layer in counted.layers if layer.input_shapes), None)
    total = unaligned = 0
    for layer in counted.layers:
        if layer.op_class not in CONV_OR_LINEAR or not layer.input_shapes or not layer.output_shapes:
            continue
        axis = -1 if layer.op_class == "linear" else 1
        channels_in, channels_out = layer.input_shapes[0][axis], layer.output_shapes[0][axis]
        groups = layer_groups(layer, channels_in, channels_out, modules)
        total += layer.flops
        if unaligned_channels(channels_in, channels_out, multiple, groups, image_input=layer.input_shapes[0] == image):
            unaligned += layer.flops
    return unaligned / max(total, 1)


def layer_groups(layer: LayerCount, channels_in: int, channels_out: int, modules: dict[str, nn.Module]) -> int:
    """A counted conv's groups: its module's ``groups`` (the layer's name, less a ``#n`` repeat suffix), else the
    input channels of a depthwise conv and 1 of any other layer (an op issued outside a conv module)."""
    module = modules.get(re.sub(r"#\d+$", "", layer.name))
    groups = getattr(module, "groups", None) if layer.op_class != "linear" else 1
    if isinstance(groups, int) and groups >= 1 and channels_in % groups == 0 and channels_out % groups == 0:
        return groups
    return channels_in if layer.op_class == "depthwise_conv" else 1


def check_inputs(resolution: int, channels: int, fixed_batch: int | None = None) -> tuple[torch.Tensor, ...]:
    """The inputs of ``CHECK_INPUTS`` at ``resolution`` with ``channels`` (the model's ``zoo.input_channels``):
    random normal, fp32, on the CPU, NCHW; all of batch ``fixed_batch`` when the model runs at no other (a model file
    whose batch is fixed)."""
    return tuple(
        torch.randn(
            (fixed_batch or batch, channels, resolution, resolution), generator=torch.Generator().manual_seed(seed)
        )
        for batch, seed in CHECK_INPUTS
    )


def check_exact(original: nn.Module, rewritten: nn.Module, inputs) -> tuple[float, float]:
    """The largest absolute and the largest relative difference of ``rewritten``'s outputs from ``original``'s over
    ``inputs`` (``padding.output_difference``: each relative to that input's largest output), NaN counted as
    infinite. Raises where a model fails on an input or the outputs differ in structure."""
    differences = [output_difference(original, rewritten, x) for x in inputs]
    absolute, relative = zip(*((math.inf if math.isnan(d) else d for d in pair) for pair in differences), strict=True)
    return max(absolute), max(relative)


def _differences(name: str, original: nn.Module, rewritten: nn.Module, inputs, notes: list[str]):
    """``check_exact``; None, with the reason in ``notes``, where the rewritten model fails on a check input."""
    try:
        return check_exact(original, rewritten, inputs)
    except Exception as exc:  # a rewrite that cannot run is rejected like one that computes otherwise, and said
        notes.append(f"{name}: rejected, the rewritten model fails on the check inputs: {describe(exc)}")
        return None


def exact_rewrites(
    model: nn.Module, counted: CountResult, inputs: tuple[torch.Tensor, ...], multiple: int, notes: list[str]
) -> list[Rewrite]:
    """Channel padding and BatchNorm folding where they apply, each checked against ``model`` (``counted``: its
    count) on every one of ``inputs`` in fp32 (the first is the example they trace with); why one is not tried goes
    to ``notes``."""
    rewrites = [padding_rewrite(model, counted, inputs, multiple, notes), folding_rewrite(model, inputs, notes)]
    return [rewrite for rewrite in rewrites if rewrite is not None]


def padding_rewrite(
    model: nn.Module, counted: CountResult, inputs: tuple[torch.Tensor, ...], multiple: int, notes: list[str]
) -> Rewrite | None:
    """Channel padding, when at least ``MIN_UNALIGNED_SHARE`` of the conv/linear FLOPs are in unaligned layers, the
    pass can read the model (torch.fx traces it) and it pads something."""
    share, flops, example = unaligned_share(counted, multiple, model), counted.total.flops, inputs[0]
    unaligned = f"{share:.2%} of conv/linear FLOPs in layers with channels that are not multiples of {multiple}"
    if share < MIN_UNALIGNED_SHARE:
        notes.append(f"channel padding: nothing to do ({unaligned})")
        return None
    try:
        padded = pad_channels(model, example, multiple)
    except ModelError as exc:  # the pass cannot read this model: padding is not tried, and the advice says why
        notes.append(f"channel padding: not tried ({unaligned}): {exc}")
        return None
    if padded.nothing_to_do:
        notes.append(f"channel padding: nothing to do ({unaligned}, none of them paddable)")
        return None
    added_flops = count(padded.model, resolution=example.shape[-1]).total.flops - flops
    params = sum(p.numel() for p in model.parameters())
    detail = (
        f"{padded.padded_layers} layers padded to a multiple of {multiple}: +{padded.added_params:,} params "
        f"(+{padded.added_params / params:.1%}), +{added_flops / max(flops, 1):.1%} FLOPs"
    )
    differences = _differences("channel padding", model, padded.model, inputs, notes)
    if differences is None:
        return None
    return Rewrite(
        f"pad channels to {multiple}",
        padded.model,
        *differences,
        padded.added_params,
        added_flops,
        detail,
        lambda m, x: pad_channels(m, x, multiple).model,
    )


def folding_rewrite(model: nn.Module, inputs: tuple[torch.Tensor, ...], notes: list[str]) -> Rewrite | None:
    """BatchNorm folding into the preceding convolutions, when the model has BatchNorm that can be folded."""
    total = folding.count_batchnorm(model)
    if not total:
        return None
    folded, fold_notes = fold_batchnorm(model, inputs[0])
    notes.extend(fold_notes)
    left = folding.count_batchnorm(folded)
    if folded is model or left == total:
        return None
    differences = _differences("BatchNorm folding", model, folded, inputs, notes)
    if differences is None:
        return None
    return Rewrite(
        "fold BatchNorm",
        folded,
        *differences,
        0,
        0,
        f"{total - left} of {total} BatchNorm layers folded into their convolutions",
        lambda m, x: fold_batchnorm(m, x)[0],
    )


def exactness() -> dict:
    """How rewrites are checked, as the advice records it: on the CPU in fp32, the inputs (``CHECK_INPUTS``), and
    the largest relative difference (to the original's largest output, per input) a rewrite may have."""
    return {
        "device": "cpu",
        "precision": "fp32",
        "inputs": [{"batch": b, "seed": s} for b, s in CHECK_INPUTS],
        "relative_to": "max |output| of the original on the same input",
        "rtol": EXACT_RTOL,
    }
