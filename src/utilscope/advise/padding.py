"""Exact channel padding: rewrite a network so that its conv and linear layers' channel counts are multiples of 8
(tensor-core friendly), with outputs unchanged.

Padding is exact because the extra output filters of a layer are zero (zero bias), the extra input channels of the
next layer meet zero weights, batch norm gets identity statistics there, and every op between them is per channel.
``pad_channels`` traces the network with torch.fx, ties the tensors that must share a channel layout
(``channel_graph``), chooses the layouts (``solve``) and scatters the weights into zero tensors of the padded widths.
Anything it does not understand is left unpadded and reported with the reason.

    result = pad_channels(model.eval(), torch.randn(1, 3, 224, 224))
    verify(model, result.model, example)  # max |a - b| / max |a| of the outputs, float32
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import fx, nn

from utilscope.advise.channel_graph import ChannelGraph, Site, Slice, build
from utilscope.advise.layout import Layout
from utilscope.advise.solve import LAYER_KINDS, Solution, solve
from utilscope.errors import ModelError, UsageError
from utilscope.limits import check_multiple

DEFAULT_MULTIPLE = 8  # fp16 tensor cores want channel counts that are multiples of 8
DEFAULT_RTOL = 1e-4
FOLLOWS = "its layout follows the tensors it is cut from or joined of"
TWO_SIDED = ("conv", "linear", "grouped")  # the layers with an input and an output layout


@dataclass(frozen=True)
class PaddedGroup:
    """Tensors that share one channel layout, with the layers reading or writing them. ``blocked_by`` says why a
    group keeps its ``channels`` unpadded (None when it is padded, or needs nothing)."""

    layers: tuple[str, ...]
    channels: int
    padded_channels: int
    blocked_by: str | None

    @property
    def added_channels(self) -> int:
        return self.padded_channels - self.channels


@dataclass(frozen=True)
class PaddingResult:
    """``model`` is the rewritten ``fx.GraphModule``, or the model passed in, untouched, when nothing is padded.
    ``groups``: every group of tensors that layers read or write and that is padded, or that a conv or linear
    layer reads or writes with unaligned channels.
    ``padded_layers``: conv and linear layers whose weights changed (batch norms not counted); ``added_params``:
    parameters after minus before (buffers such as running statistics not counted)."""

    model: nn.Module
    groups: tuple[PaddedGroup, ...]
    padded_layers: int
    added_params: int

    @property
    def nothing_to_do(self) -> bool:
        return not any(group.added_channels for group in self.groups)

    @property
    def blocked(self) -> tuple[PaddedGroup, ...]:
        return tuple(group for group in self.groups if group.blocked_by is not None)


def pad_channels(model: nn.Module, example: torch.Tensor, multiple: int = DEFAULT_MULTIPLE) -> PaddingResult:
    """Pad every conv/linear channel count that can be padded to a multiple of ``multiple``; ``model`` is copied."""
    check_arguments(model, example, multiple)
    graph = build(model, example)
    solution = solve(graph, multiple)
    groups = report_groups(graph, solution, multiple)
    if not solution.pads_anything:
        return PaddingResult(model, groups, 0, 0)
    params_before = parameter_count(graph.module)
    padded_layers = rewrite(graph, solution)
    return PaddingResult(graph.module, groups, padded_layers, parameter_count(graph.module) - params_before)


def check_arguments(model, example, multiple) -> None:
    if not isinstance(model, nn.Module):
        raise UsageError(f"pad_channels needs a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(example, torch.Tensor) or example.dim() != 4:
        shape = tuple(example.shape) if isinstance(example, torch.Tensor) else type(example).__name__
        raise UsageError(f"the example must be an (N, C, H, W) tensor, got {shape}")
    check_multiple(multiple)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def report_groups(graph: ChannelGraph, solution: Solution, multiple: int) -> tuple[PaddedGroup, ...]:
    layers, unaligned = defaultdict(list), set()
    for site in graph.sites:
        tensors = (site.node.args[0], site.node) if site.kind in TWO_SIDED else (site.node,)
        for node in tensors:
            layers[graph.find(node)].append(site.layer)
            if site.kind in LAYER_KINDS and graph.channels[node] % multiple:
                unaligned.add(graph.find(node))
    groups = []
    for root in graph.classes():
        layout = solution.layouts[root]
        if not layers[root] or (layout.is_identity and root not in unaligned):
            continue
        reasons = solution.blocked.get(root)
        blocked_by = "; ".join(reasons) if reasons else (FOLLOWS if layout.is_identity else None)
        groups.append(PaddedGroup(tuple(dict.fromkeys(layers[root])), layout.channels, layout.width, blocked_by))
    return tuple(groups)


def rewrite(graph: ChannelGraph, solution: Solution) -> int:
    """Scatter the weights into the padded widths and move the channel slices; the conv and linear layers changed."""
    padded_layers = 0
    for site in graph.sites:
        changed = rewrite_site(graph, site, solution)
        padded_layers += changed and site.kind in LAYER_KINDS
    for node, derivation in graph.derived.items():
        if isinstance(derivation, Slice):
            rewrite_slice(graph, node, derivation, solution)
    for split in graph.splits:
        if not split.users:
            graph.module.graph.erase_node(split)
    graph.module.graph.lint()
    graph.module.recompile()
    return padded_layers


def rewrite_site(graph: ChannelGraph, site: Site, solution: Solution) -> bool:
    output = solution.layout(graph, site.node)
    source = solution.layout(graph, site.node.args[0])
    if output.is_identity and source.is_identity:
        return False
    params = dict(site.params)
    if site.kind in TWO_SIDED:  # the weight's dim 1 holds one group's input channels (all of them: groups 1)
        scattered = {"weight": {0: output, 1: source.per_group(site.groups)}, "bias": {0: output}}
        fills = {}
    elif site.kind == "depthwise":
        scattered = {"weight": {0: output}, "bias": {0: output}}
        fills = {}
    else:  # batch norm: identity statistics in the padding
        scattered = {role: {0: output} for role in params}
        fills = {"weight": 1.0, "running_var": 1.0}
    for role, path in params.items():
        widened = scatter(get_tensor(graph.module, path), scattered[role], fills.get(role, 0.0))
        replace_tensor(graph.module, path, widened)
    if site.module is not None:
        set_channel_attributes(graph.module.get_submodule(site.module), site.kind, source.width, output.width)
    elif site.kind == "depthwise":  # a functional conv2d: its groups argument follows the channels
        set_groups(site.node, output.width)
    return True


def get_tensor(module: nn.Module, path: str) -> torch.Tensor:
    owner_path, _, name = path.rpartition(".")
    return getattr(module.get_submodule(owner_path), name)


def scatter(tensor: torch.Tensor, layouts: dict[int, Layout], fill: float) -> torch.Tensor:
    """``tensor`` with dim ``d`` widened to ``layouts[d].width``: the original entries at the layout's positions,
    ``fill`` elsewhere."""
    result = tensor.detach()
    for dim, layout in layouts.items():
        if layout.is_identity:
            continue
        shape = list(result.shape)
        shape[dim] = layout.width
        widened = result.new_full(shape, fill)
        widened.index_copy_(dim, torch.tensor(layout.positions, device=result.device), result)
        result = widened
    return result


def replace_tensor(module: nn.Module, path: str, tensor: torch.Tensor) -> None:
    owner_path, _, name = path.rpartition(".")
    owner = module.get_submodule(owner_path)
    if name in owner._parameters:
        setattr(owner, name, nn.Parameter(tensor, requires_grad=owner._parameters[name].requires_grad))
    else:
        setattr(owner, name, tensor)


def set_channel_attributes(layer: nn.Module, kind: str, source_width: int, output_width: int) -> None:
    if kind in ("conv", "grouped"):
        layer.in_channels, layer.out_channels = source_width, output_width
    elif kind == "depthwise":
        layer.in_channels = layer.out_channels = layer.groups = output_width
    elif kind == "linear":
        layer.in_features, layer.out_features = source_width, output_width
    else:
        layer.num_features = output_width


def set_groups(node: fx.Node, groups: int) -> None:
    """Set ``F.conv2d``'s ``groups`` (its 7th argument, or a keyword)."""
    if len(node.args) > 6:
        node.args = (*node.args[:6], groups, *node.args[7:])
    else:
        node.kwargs = {**node.kwargs, "groups": groups}


def rewrite_slice(graph: ChannelGraph, node: fx.Node, derivation: Slice, solution: Solution) -> None:
    """Point a channel slice (or a split's piece) at its padded channels: from the first kept channel's position,
    as wide as the slice's layout."""
    source = solution.layout(graph, derivation.input)
    start = source.offset(derivation.start)
    stop = start + solution.layout(graph, node).width
    # Written out even where the channels stay put: a split keeps its unpadded sizes, so a piece left indexing it
    # would cut the padded tensor wrongly, and an open-ended slice (x[:, 2:]) would take the padding along
    # (FocalNet's q, ctx, gates = split(...) and gates[:, focal_level:]).
    if node.args[0] in graph.splits:  # a split's piece becomes a slice of the split tensor
        node.args = (derivation.input, (slice(None), slice(start, stop)))
    else:
        index = list(node.args[1])
        index[1] = slice(start, stop)
        node.args = (node.args[0], tuple(index))


def output_difference(original: nn.Module, rewritten: nn.Module, example: torch.Tensor) -> tuple[float, float]:
    """The largest absolute difference between the two models' outputs on ``example`` (float32), and that
    difference relative to the largest output magnitude (the absolute one where every output is 0); a ModelError
    when the outputs do not match in structure."""
    with torch.no_grad():
        expected, actual = tensor_leaves(original(example)), tensor_leaves(rewritten(example))
    if [t.shape for t in expected] != [t.shape for t in actual]:
        raise ModelError(
            f"the outputs differ in shape: {[tuple(t.shape) for t in expected]} vs {[tuple(t.shape) for t in actual]}"
        )
    pairs = [(e.float(), a.float()) for e, a in zip(expected, actual, strict=True) if e.numel()]
    scale = max((float(e.abs().max()) for e, _ in pairs), default=0.0)
    worst = max((float((e - a).abs().max()) for e, a in pairs), default=0.0)
    return worst, worst / scale if scale else worst


def verify(original: nn.Module, rewritten: nn.Module, example: torch.Tensor, rtol: float = DEFAULT_RTOL) -> float:
    """The largest difference between the two models' outputs on ``example``, relative to the largest output
    magnitude (float32, ``output_difference``); a ModelError when it is over ``rtol`` or the outputs do not match
    in structure."""
    relative = output_difference(original, rewritten, example)[1]
    if not relative <= rtol or math.isnan(relative):
        raise ModelError(f"the outputs differ: max relative difference {relative:.3g} > rtol {rtol:g}")
    return relative


def tensor_leaves(output) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [t for value in output.values() for t in tensor_leaves(value)]
    if isinstance(output, (list, tuple)):
        return [t for value in output for t in tensor_leaves(value)]
    return []
