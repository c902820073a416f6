"""A traced network's channel graph: which tensors must share one channel layout (a union-find over fx nodes), which
are cut from (``Slice``) or joined of (``Cat``) others, which are blocked (kept unpadded, with a reason), and the
layers whose weights follow the layouts (``Site``).

A tensor with channels is a 4-D ``(N, C, H, W)`` or a 2-D ``(N, C)`` one. Every op is either understood here or
blocks the tensors it touches: correctness first, an op that is not understood keeps its tensors as they were.

Padding holds values consumers ignore, except where a conv runs *over* the channels (ECA's gate: a ``Conv1d`` along
the channel dim): there it must be zero and at the end. ``zero_rules`` say which tensors' padding is zero given their
inputs' (a layer's output always: zero filters, zero bias), ``channel_convs`` where it has to be.
"""

from __future__ import annotations

import builtins
import copy
import math
import operator
from collections import Counter
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from utilscope.errors import ModelError, describe
from utilscope.measure.folding import is_plain_conv

CHANNEL_RANKS = (2, 4)  # (N, C) and (N, C, H, W): the channel dim is dim 1
SPATIAL_DIMS = frozenset({2, 3})

PRESERVING_MODULES = (
    nn.ReLU,
    nn.ReLU6,
    nn.SiLU,
    nn.GELU,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.Sigmoid,
    nn.Tanh,
    nn.LeakyReLU,
    nn.ELU,
    nn.Mish,
    nn.Hardtanh,
    nn.Identity,
    nn.Dropout,
    nn.Dropout2d,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
    nn.Upsample,
    nn.UpsamplingNearest2d,
    nn.UpsamplingBilinear2d,  # resampling: per channel
)
PRESERVING_FUNCTIONS = frozenset(
    {
        F.relu,
        F.relu6,
        F.silu,
        F.gelu,
        F.hardswish,
        F.hardsigmoid,
        F.leaky_relu,
        F.elu,
        F.mish,
        F.hardtanh,
        F.dropout,
        F.max_pool2d,
        F.avg_pool2d,
        F.adaptive_avg_pool2d,
        F.adaptive_max_pool2d,
        torch.sigmoid,
        torch.tanh,
        torch.relu,
        torch.clamp,
        F.interpolate,
    }
)
PRESERVING_METHODS = frozenset(
    "relu relu_ sigmoid sigmoid_ tanh tanh_ clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ contiguous".split()
)
BINARY_FUNCTIONS = frozenset(
    {
        operator.add,
        operator.mul,
        operator.sub,
        operator.iadd,
        operator.imul,
        operator.isub,
        torch.add,
        torch.mul,
        torch.sub,
    }
)
DIVISIONS = frozenset({operator.truediv, operator.itruediv, torch.div, torch.true_divide})
BINARY_METHODS = frozenset("add add_ mul mul_ sub sub_".split())
DIVISION_METHODS = frozenset({"div", "div_"})
INPLACE_FUNCTIONS = frozenset({operator.iadd, operator.imul, operator.isub, operator.itruediv})
CATS = frozenset({torch.cat, torch.concat, torch.concatenate})
NONZERO_AT_ZERO = frozenset(
    {
        torch.sigmoid,
        F.hardsigmoid,
        F.hardtanh,
        torch.clamp,
        "sigmoid",
        "sigmoid_",
        "clamp",
        "clamp_",
        "clamp_min",
        "clamp_min_",
        "clamp_max",
        "clamp_max_",
    }
)
NONZERO_AT_ZERO_MODULES = (nn.Sigmoid, nn.Hardsigmoid, nn.Hardtanh)  # exact types (ReLU6 is a Hardtanh of 0)
MULTIPLICATIONS = frozenset({operator.mul, operator.imul, torch.mul, "mul", "mul_"})
GATES = frozenset({torch.sigmoid, F.hardsigmoid, torch.tanh, "sigmoid", "tanh"})  # elementwise, on ECA's (N, 1, C)
GATE_MODULES = (nn.Sigmoid, nn.Hardsigmoid, nn.Tanh)
SAFE_ATTRIBUTES = frozenset({"ndim", "dtype", "device", "is_cuda", "requires_grad", "layout"})
ALIASING_MODULES = (nn.Identity, nn.Dropout, nn.Dropout2d, nn.Flatten)
ALIASING_FUNCTIONS = frozenset({F.dropout, torch.flatten, torch.reshape, operator.getitem})
ALIASING_METHODS = frozenset({"view", "reshape", "flatten", "contiguous"})
NORMS_OVER_CHANNELS = (nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm2d, nn.LocalResponseNorm)
CHANNEL_SHUFFLES = (nn.ChannelShuffle, nn.PixelShuffle, nn.PixelUnshuffle)


@dataclass(frozen=True)
class Cat:
    inputs: tuple[fx.Node, ...]


@dataclass(frozen=True)
class Slice:
    input: fx.Node
    start: int
    stop: int


@dataclass(frozen=True)
class Site:
    """A layer whose weights follow layouts: a ``conv`` or ``linear`` (input and output), a ``grouped`` conv (input
    and output, each laid out alike in each of its ``groups``), a ``depthwise`` conv or a ``batchnorm`` (one
    layout). ``params`` maps a role (weight, bias, running_mean, ...) to its attribute path; ``module`` is the
    called module whose channel attributes follow (None for a functional call)."""

    node: fx.Node
    kind: str
    layer: str
    params: tuple[tuple[str, str], ...]
    module: str | None
    groups: int = 1


@dataclass
class ChannelGraph:
    module: fx.GraphModule
    channels: dict[fx.Node, int]  # the tensors with channels, by node
    parent: dict[fx.Node, fx.Node] = field(default_factory=dict)
    derived: dict[fx.Node, Cat | Slice] = field(default_factory=dict)
    blocks: dict[fx.Node, str] = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    splits: dict[fx.Node, tuple[fx.Node, list[tuple[int, int]]]] = field(default_factory=dict)
    inplace: list[tuple[fx.Node, fx.Node]] = field(default_factory=list)  # (in-place op, the tensor it writes)
    groups: dict[fx.Node, set[int]] = field(default_factory=dict)  # tensor -> groups of the grouped convs on it
    # tensor -> ("all" or "any", inputs): its padding is zero when all (any) of those inputs' is; ("all", ()): always
    zero_rules: dict[fx.Node, tuple[str, tuple[fx.Node, ...]]] = field(default_factory=dict)
    channel_convs: list[tuple[fx.Node, fx.Node]] = field(default_factory=list)  # (its (N, C) input, the Conv1d)
    handled: set[fx.Node] = field(default_factory=set)  # ops a pattern seen before them already read

    def find(self, node: fx.Node) -> fx.Node:
        root = node
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        while node is not root:
            self.parent[node], node = root, self.parent.get(node, node)
        return root

    def tie(self, a: fx.Node, b: fx.Node) -> None:
        if self.channels.get(a) != self.channels.get(b) or a not in self.channels:
            self.block(a, "channel counts differ across a layout-preserving op")
            self.block(b, "channel counts differ across a layout-preserving op")
            return
        self.parent[self.find(a)] = self.find(b)

    def block(self, node: fx.Node, reason: str) -> None:
        if node in self.channels:
            self.blocks.setdefault(node, reason)

    def classes(self) -> dict[fx.Node, list[fx.Node]]:
        """Each class's root -> its members, in graph order (classes ordered by their first member)."""
        found: dict[fx.Node, list[fx.Node]] = {}
        for node in self.channels:
            found.setdefault(self.find(node), []).append(node)
        return found

    def derived_users(self) -> dict[fx.Node, list[fx.Node]]:
        """Each tensor -> the cats and slices made from it."""
        users: dict[fx.Node, list[fx.Node]] = {}
        for node, derivation in self.derived.items():
            for source in inputs_of(derivation):
                users.setdefault(source, []).append(node)
        return users


def inputs_of(derivation: Cat | Slice) -> tuple[fx.Node, ...]:
    return derivation.inputs if isinstance(derivation, Cat) else (derivation.input,)


def build(model: nn.Module, example: torch.Tensor) -> ChannelGraph:
    """Trace a deep copy of ``model`` and read its channel graph; ``model`` itself is not touched."""
    traced = trace(model, example)
    channels = {node: count for node in traced.graph.nodes if (count := channel_count(node)) is not None}
    graph = ChannelGraph(traced, channels)
    modules = dict(traced.named_modules())
    for node in traced.graph.nodes:
        visit(graph, node, modules)
    block_shared_weights(graph)
    block_writes_into_slices(graph)
    return graph


class PlainConvTracer(fx.Tracer):
    """Plain convolutions are leaves, timm's ``Conv2dSame`` among them: it computes its padding from the input's
    shape, which symbolic tracing cannot follow, and it is read as the convolution it is."""

    def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
        return is_plain_conv(module) or super().is_leaf_module(module, qualified_name)


def trace(model: nn.Module, example: torch.Tensor) -> fx.GraphModule:
    name = type(model).__name__
    try:
        root = copy.deepcopy(model)
        traced = fx.GraphModule(root, PlainConvTracer().trace(root), class_name=name)
    except Exception as exc:
        raise ModelError(f"torch.fx cannot trace {name}: {describe(exc)}") from exc
    try:
        with torch.no_grad():
            ShapeProp(traced).propagate(example)
    except Exception as exc:
        raise ModelError(
            f"the example {tuple(example.shape)} does not run through {name}: {describe(exc.__cause__ or exc)}"
        ) from exc
    return traced


def channel_count(node: fx.Node) -> int | None:
    meta = node.meta.get("tensor_meta")
    if isinstance(meta, TensorMetadata) and len(meta.shape) in CHANNEL_RANKS:
        return int(meta.shape[1])
    return None


def shape_of(node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return tuple(meta.shape) if isinstance(meta, TensorMetadata) else None


def argument(node: fx.Node, position: int, name: str, default=None):
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def visit(graph: ChannelGraph, node: fx.Node, modules: dict[str, nn.Module]) -> None:
    if node in graph.handled:
        return
    if node.op == "placeholder":
        graph.block(node, "graph input")
    elif node.op == "output":
        for source in node.all_input_nodes:
            graph.block(source, "graph output")
    elif node.op == "get_attr":
        graph.block(node, "a parameter or buffer used as a tensor")
    elif node.op == "call_module":
        visit_module(graph, node, modules[node.target])
    elif node.op == "call_function":
        visit_function(graph, node)
    else:
        visit_method(graph, node)


def unknown(graph: ChannelGraph, node: fx.Node, reason: str | None = None) -> None:
    """Block every tensor the op touches."""
    reason = reason or f"unknown op {target_name(node)}"
    for source in node.all_input_nodes:
        graph.block(source, reason)
    graph.block(node, reason)


def target_name(node: fx.Node) -> str:
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(node.target)).__name__
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


def visit_module(graph: ChannelGraph, node: fx.Node, module: nn.Module) -> None:
    kind = type(module)
    if is_plain_conv(module):
        visit_conv(graph, node, module)
    elif kind is nn.Linear:
        visit_linear(graph, node, node.target, {"weight": f"{node.target}.weight", "bias": f"{node.target}.bias"})
    elif (kind is nn.BatchNorm2d and len(shape_of(node) or ()) == 4) or (
        kind is nn.BatchNorm1d and len(shape_of(node) or ()) == 2
    ):
        roles = {
            "weight": module.weight,
            "bias": module.bias,
            "running_mean": module.running_mean,
            "running_var": module.running_var,
        }
        params = {role: f"{node.target}.{role}" for role, tensor in roles.items() if tensor is not None}
        visit_batchnorm(graph, node, node.target, params, node.target)
    elif kind in PRESERVING_MODULES:
        preserve(graph, node, inplace=getattr(module, "inplace", False))
    elif kind is nn.Flatten:
        flatten(graph, node, module.start_dim, module.end_dim)
    elif isinstance(module, NORMS_OVER_CHANNELS):
        unknown(graph, node, f"{kind.__name__} normalizes over channels")
    elif isinstance(module, CHANNEL_SHUFFLES):
        unknown(graph, node, f"{kind.__name__} reorders the channel dim")
    else:
        unknown(graph, node, f"unknown module {kind.__name__}")


def visit_conv(graph: ChannelGraph, node: fx.Node, conv: nn.Conv2d) -> None:
    source = node.args[0] if len(node.args) == 1 and not node.kwargs else None
    if source not in graph.channels or node not in graph.channels:
        unknown(graph, node, "a conv not on a 4-D tensor")
        return
    params = tuple((role, f"{node.target}.{role}") for role in ("weight", "bias") if getattr(conv, role) is not None)
    conv_site(graph, node, source, conv.groups, Site(node, "conv", node.target, params, node.target))


def visit_functional_conv(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: None) -> None:
    """``F.conv2d`` of ``get_attr`` weights whose ``groups`` is a number: dense, grouped, or depthwise (timm's
    ``BlurPool2d``: a fixed blur filter, one per channel; the rewrite sets ``groups`` to the padded width)."""
    source, groups = node.args[0], argument(node, 6, "groups", 1)
    if source not in graph.channels or node not in graph.channels or not isinstance(groups, int):
        unknown(graph, node, "a conv2d not on a 4-D tensor, or with computed groups")
        return
    conv_site(graph, node, source, groups, Site(node, "conv", layer, tuple(params.items()), None))


def conv_site(graph: ChannelGraph, node: fx.Node, source: fx.Node, groups: int, dense: Site) -> None:
    """Record a conv of ``source`` by its ``groups``: ``dense`` as it is; depthwise (one filter per channel: both
    sides share a layout); grouped (laid out group by group on both sides, which solve.conflicts checks); a
    depthwise conv with a channel multiplier is left unpadded."""
    channels_in, channels_out = graph.channels[source], graph.channels[node]
    if groups == 1:
        graph.sites.append(dense)
    elif groups == channels_in == channels_out:
        graph.tie(source, node)
        graph.sites.append(replace(dense, kind="depthwise"))
    elif groups == channels_in:
        unknown(graph, node, f"depthwise conv with channel multiplier {channels_out // channels_in}")
        return
    else:
        graph.sites.append(replace(dense, kind="grouped", groups=groups))
        for tensor in (source, node):
            graph.groups.setdefault(tensor, set()).add(groups)
    graph.zero_rules[node] = ("all", ())  # a padded filter is zero, and so is its bias


def visit_linear(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: str | None = None) -> None:
    source = node.args[0]
    if len(shape_of(source) or ()) != 2 or node not in graph.channels:
        unknown(graph, node, "a linear layer over the last dim of a tensor that is not (N, C)")
        return
    module = module or (layer if node.op == "call_module" else None)
    present = tuple((role, path) for role, path in params.items() if path is not None)
    if module is not None:
        linear = graph.module.get_submodule(module)
        present = tuple((role, path) for role, path in present if getattr(linear, role) is not None)
    graph.sites.append(Site(node, "linear", layer, present, module))
    graph.zero_rules[node] = ("all", ())


def visit_batchnorm(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: str | None) -> None:
    source = node.args[0]
    if source not in graph.channels:
        unknown(graph, node, "a batch norm not on an (N, C) or (N, C, H, W) tensor")
        return
    graph.tie(source, node)
    graph.sites.append(Site(node, "batchnorm", layer, tuple(params.items()), module))
    graph.zero_rules[node] = ("all", (source,))  # identity statistics, weight 1, bias 0: zero stays zero


def preserve(graph: ChannelGraph, node: fx.Node, inplace: bool = False) -> None:
    """An op that keeps its first argument's layout (elementwise per channel, per-channel pooling, views)."""
    source = node.args[0] if node.args else None
    others = [n for n in node.all_input_nodes if n is not source and shape_of(n) is not None]
    if source not in graph.channels or others or shape_of(node) is None or len(shape_of(node)) != len(shape_of(source)):
        unknown(graph, node)
        return
    graph.tie(source, node)
    if maps_zero_to_zero(graph, node):
        graph.zero_rules[node] = ("all", (source,))
    if inplace:
        graph.inplace.append((node, source))


def maps_zero_to_zero(graph: ChannelGraph, node: fx.Node) -> bool:
    """Whether a layout-preserving op keeps zero padding zero (ReLU, SiLU, pooling, ...; not a sigmoid)."""
    if node.op == "call_module":
        return type(graph.module.get_submodule(node.target)) not in NONZERO_AT_ZERO_MODULES
    return node.target not in NONZERO_AT_ZERO


def spatial_pad(graph: ChannelGraph, node: fx.Node, pad) -> None:
    """``F.pad`` of H and W only (at most 4 numbers: the last two dims) keeps the channel layout."""
    if isinstance(pad, (tuple, list)) and len(pad) <= 4 and len(shape_of(node) or ()) == 4:
        preserve(graph, node)
    else:
        unknown(graph, node, f"a pad of {pad} that reaches the channel dim")


def flatten(graph: ChannelGraph, node: fx.Node, start_dim: int, end_dim: int) -> None:
    source, shape = node.args[0], shape_of(node.args[0]) or ()
    rank = len(shape)
    if rank not in CHANNEL_RANKS or start_dim % rank != 1 or end_dim % rank != rank - 1:
        unknown(graph, node, f"flatten({start_dim}, {end_dim}) of a {rank}-D tensor")
    elif rank == 4 and shape[2] * shape[3] != 1:
        unknown(graph, node, f"flatten with spatial {shape[2]}x{shape[3]} mixes channels and positions")
    else:
        graph.tie(source, node)
        graph.zero_rules[node] = ("all", (source,))


def reshape(graph: ChannelGraph, node: fx.Node) -> None:
    """``view``/``reshape`` to ``(N, -1)`` of a tensor whose spatial size is 1x1: a flatten; to ``(N, 1, -1)``,
    the start of ECA's gate (``channel_conv_chain``), read whole here."""
    sizes = view_sizes(node)
    if len(sizes) == 2 and sizes[1] == -1 and len(shape_of(node) or ()) == 2:
        flatten(graph, node, 1, -1)
    elif chain := channel_conv_chain(graph, node, sizes):
        graph.tie(node.args[0], chain[-1])
        graph.channel_convs.append((node.args[0], chain[0]))
        graph.handled.update(chain)
    else:
        unknown(graph, node, "a reshape of the channel dim")


def view_sizes(node: fx.Node) -> tuple | None:
    """The sizes of a ``view``/``reshape`` (method or ``torch.reshape``) as one tuple; None for another op."""
    if node.op == "call_method" and node.target in ("view", "reshape"):
        sizes = node.args[1:]
    elif node.op == "call_function" and node.target is torch.reshape:
        sizes = (argument(node, 1, "shape"),)
    else:
        return None
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)


def channel_conv_chain(graph: ChannelGraph, view: fx.Node, sizes: tuple) -> list[fx.Node] | None:
    """ECA's gate: ``(N, C)`` viewed as ``(N, 1, -1)``, a ``Conv1d(1, 1, k)`` along the channels that keeps their
    number (stride 1, zero padding), elementwise gates, and a view back to ``(N, -1, 1, 1)`` or ``(N, -1)``, each
    the only user of the one before. The Conv1d, the gates and the view back; None where the pattern breaks."""
    source, shape = view.args[0], shape_of(view)
    channels = graph.channels.get(source)
    if channels is None or len(sizes) != 3 or sizes[2] != -1 or shape != (shape_of(source)[0], 1, channels):
        return None
    conv = sole_user(view)
    layer = graph.module.get_submodule(conv.target) if conv is not None and conv.op == "call_module" else None
    if not (
        type(layer) is nn.Conv1d
        and layer.in_channels == layer.out_channels == layer.groups == 1
        and layer.stride == (1,)
        and layer.padding_mode == "zeros"
        and shape_of(conv) == shape
    ):
        return None
    chain = [conv]
    while (user := sole_user(chain[-1])) is not None and is_gate(graph, user) and shape_of(user) == shape:
        chain.append(user)
    back = sole_user(chain[-1])
    back_sizes = view_sizes(back) if back is not None else None
    if back_sizes is None or len(back_sizes) < 2 or back_sizes[1] != -1 or graph.channels.get(back) != channels:
        return None
    return [*chain, back] if math.prod(shape_of(back)[2:]) == 1 else None


def sole_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def is_gate(graph: ChannelGraph, node: fx.Node) -> bool:
    if node.op == "call_module":
        return type(graph.module.get_submodule(node.target)) in GATE_MODULES
    return node.target in GATES and len(node.all_input_nodes) == 1


def expand_as(graph: ChannelGraph, node: fx.Node) -> None:
    """``y.expand_as(x)``: a gate ``(N, C, 1, 1)`` broadcast to ``(N, C, H, W)``; the three share one layout."""
    source, other = node.args[:2]
    if not all(n in graph.channels for n in (source, other, node)) or len(shape_of(source)) != len(shape_of(other)):
        unknown(graph, node)
        return
    graph.tie(source, node)
    graph.tie(other, node)
    graph.zero_rules[node] = ("all", (source,))


def zero_padded(graph: ChannelGraph) -> set[fx.Node]:
    """The tensors whose padding holds zeros whatever the layouts, by ``zero_rules`` in graph order; a tensor an op
    writes in place only where that op keeps zeros too."""
    spoiled = {source for writer, source in graph.inplace if graph.zero_rules.get(writer) != ("all", (source,))}
    zeros: set[fx.Node] = set()
    for node, (quantifier, inputs) in graph.zero_rules.items():
        if node not in spoiled and (all if quantifier == "all" else any)(i in zeros for i in inputs):
            zeros.add(node)
    return zeros


def visit_function(graph: ChannelGraph, node: fx.Node) -> None:
    target = node.target
    if target in PRESERVING_FUNCTIONS:
        preserve(graph, node, inplace=bool(node.kwargs.get("inplace", False)))
    elif target in BINARY_FUNCTIONS or target in DIVISIONS:
        binary(graph, node, divides=target in DIVISIONS, inplace=target in INPLACE_FUNCTIONS)
    elif target in CATS:
        cat(graph, node, argument(node, 0, "tensors"), argument(node, 1, "dim", 0))
    elif target is torch.split:
        split(graph, node, argument(node, 1, "split_size_or_sections"), argument(node, 2, "dim", 0), chunks=False)
    elif target is torch.chunk:
        split(graph, node, argument(node, 1, "chunks"), argument(node, 2, "dim", 0), chunks=True)
    elif target is torch.flatten:
        flatten(graph, node, argument(node, 1, "start_dim", 0), argument(node, 2, "end_dim", -1))
    elif target is torch.mean:
        mean(graph, node, argument(node, 1, "dim"))
    elif target is torch.reshape:
        reshape(graph, node)
    elif target is operator.getitem:
        getitem(graph, node)
    elif target is builtins.getattr:
        read_attribute(graph, node)
    elif target is F.batch_norm:
        functional_batchnorm(graph, node)
    elif target is F.linear:
        params = {"weight": argument(node, 1, "weight"), "bias": argument(node, 2, "bias")}
        functional_layer(graph, node, params, visit_linear)
    elif target is F.conv2d:
        params = {"weight": argument(node, 1, "weight"), "bias": argument(node, 2, "bias")}
        functional_layer(graph, node, params, visit_functional_conv)
    elif target is F.pad:
        spatial_pad(graph, node, argument(node, 1, "pad"))
    else:
        unknown(graph, node)


def visit_method(graph: ChannelGraph, node: fx.Node) -> None:
    method = node.target
    if method in PRESERVING_METHODS:
        preserve(graph, node, inplace=method.endswith("_"))
    elif method in BINARY_METHODS or method in DIVISION_METHODS:
        binary(graph, node, divides=method in DIVISION_METHODS, inplace=method.endswith("_"))
    elif method == "mean":
        mean(graph, node, argument(node, 1, "dim"))
    elif method == "flatten":
        flatten(graph, node, argument(node, 1, "start_dim", 0), argument(node, 2, "end_dim", -1))
    elif method in ("view", "reshape"):
        reshape(graph, node)
    elif method == "expand_as":
        expand_as(graph, node)
    elif method == "split":
        split(graph, node, argument(node, 1, "split_size"), argument(node, 2, "dim", 0), chunks=False)
    elif method == "chunk":
        split(graph, node, argument(node, 1, "chunks"), argument(node, 2, "dim", 0), chunks=True)
    elif method == "dim" or method == "size" and sizes_other_dims_only(node):
        pass  # the rank, the batch size, a spatial size: padding changes none of them
    elif method == "size":
        unknown(graph, node, "reads the channel count (.size())")
    else:
        unknown(graph, node)


def binary(graph: ChannelGraph, node: fx.Node, divides: bool, inplace: bool) -> None:
    """Elementwise add/sub/mul/div: operands with the output's channels share its layout (a squeeze-excite gate
    ``(N, C, 1, 1)`` against ``(N, C, H, W)`` too); a one-channel operand broadcasts and stays unpadded."""
    operands = [a for a in node.args[:2] if isinstance(a, fx.Node) and shape_of(a) is not None]
    tensors = [n for n in node.all_input_nodes if shape_of(n) is not None]
    shape = shape_of(node)
    if (
        node not in graph.channels
        or len(tensors) != len(set(operands))
        or any(len(shape_of(a)) not in (0, len(shape)) for a in operands)
    ):
        unknown(graph, node)
        return
    if divides and len(node.args) > 1 and node.args[1] in operands and graph.channels.get(node.args[1], 1) > 1:
        unknown(graph, node, "a division by a tensor with channels (its padding could be zero)")
        return
    for operand in operands:
        channels = graph.channels.get(operand, 1)  # a 0-D tensor broadcasts like one channel
        if channels == graph.channels[node]:
            graph.tie(operand, node)
        elif channels == 1:
            graph.block(operand, "broadcast over channels")
        else:
            unknown(graph, node)
            return
    if inplace and operands and node.args[0] is operands[0]:
        graph.inplace.append((node, operands[0]))
    binary_zero_rule(graph, node, divides)


def binary_zero_rule(graph: ChannelGraph, node: fx.Node, divides: bool) -> None:
    """A product is zero where any factor with the channels is; a sum or difference where both terms are (a
    broadcast or constant term is not zero there); a quotient: no rule."""
    full = [a for a in node.args[:2] if isinstance(a, fx.Node) and graph.channels.get(a) == graph.channels[node]]
    if node.target in MULTIPLICATIONS and full:
        graph.zero_rules[node] = ("any", tuple(full))
    elif not divides and len(full) == 2:
        graph.zero_rules[node] = ("all", tuple(full))


def mean(graph: ChannelGraph, node: fx.Node, dims) -> None:
    """A mean over H and W (global pooling, the squeeze of squeeze-excite)."""
    rank = len(shape_of(node.args[0]) or ())
    dims = (dims,) if isinstance(dims, int) else tuple(dims or ())
    if rank == 4 and {d % 4 for d in dims} == SPATIAL_DIMS and len(dims) == 2 and node in graph.channels:
        graph.tie(node.args[0], node)
        graph.zero_rules[node] = ("all", (node.args[0],))
    else:
        unknown(graph, node, f"a mean over dims {dims}")


def channel_dim(dim, rank: int) -> bool:
    return isinstance(dim, int) and rank in CHANNEL_RANKS and dim % rank == 1


def cat(graph: ChannelGraph, node: fx.Node, tensors, dim) -> None:
    rank = len(shape_of(node) or ())
    ok = isinstance(tensors, (list, tuple)) and all(t in graph.channels and len(shape_of(t)) == rank for t in tensors)
    if not ok or not channel_dim(dim, rank) or node not in graph.channels:
        unknown(graph, node, f"a cat along dim {dim}" if ok else None)
        return
    graph.derived[node] = Cat(tuple(tensors))
    graph.zero_rules[node] = ("all", tuple(tensors))


def split(graph: ChannelGraph, node: fx.Node, sizes, dim, chunks: bool) -> None:
    """``split``/``chunk`` along channels: each ``getitem`` of the result is a ``Slice`` of the input."""
    source = node.args[0]
    literal = isinstance(sizes, int) or (isinstance(sizes, (list, tuple)) and all(isinstance(s, int) for s in sizes))
    if source not in graph.channels or not channel_dim(dim, len(shape_of(source))) or not literal:
        unknown(graph, node, f"a split along dim {dim}" if literal else "a split by computed sizes")
        return
    channels = torch.arange(graph.channels[source])
    pieces = channels.chunk(sizes, 0) if chunks else channels.split(sizes, 0)
    ranges = [(int(piece[0]), int(piece[-1]) + 1) for piece in pieces if len(piece)]
    whole = [u for u in node.users if u.target is not operator.getitem or not isinstance(u.args[1], int)]
    if whole or len(ranges) != len(pieces):
        graph.block(source, "a split used whole (not piece by piece) or with an empty piece")
        return
    graph.splits[node] = (source, ranges)


def getitem(graph: ChannelGraph, node: fx.Node) -> None:
    source, index = node.args
    if source in graph.splits:
        tensor, ranges = graph.splits[source]
        start, stop = ranges[index]
        if graph.channels.get(node) == stop - start:
            graph.derived[node] = Slice(tensor, start, stop)
            return
    elif source in graph.channels:
        channel_slice(graph, node, source, index)
        return
    unknown(graph, node)


def channel_slice(graph: ChannelGraph, node: fx.Node, source: fx.Node, index) -> None:
    """``x[:, a:b]`` (other dims sliced or not): a ``Slice``, also when ``a:b`` spans all channels (its bounds
    must move too); ``x[:, :]`` and ``x[i:j]`` keep the layout."""
    index = index if isinstance(index, tuple) else (index,)
    body = index[:-1] if len(index) > 2 and index[-1] is Ellipsis else index
    plain = all(
        isinstance(i, slice) and all(isinstance(v, (int, type(None))) for v in (i.start, i.stop, i.step)) for i in body
    )
    if not plain or node not in graph.channels or len(shape_of(node)) != len(shape_of(source)):
        unknown(graph, node, "an index that is not a slice of channels")
        return
    channels = graph.channels[source]
    start, stop, step = index[1].indices(channels) if len(index) > 1 else (0, channels, 1)
    if step != 1 or stop <= start:
        unknown(graph, node, f"a channel slice with step {step} or no channels")
    elif len(index) < 2 or index[1] == slice(None):
        graph.tie(source, node)
        graph.zero_rules[node] = ("all", (source,))
    else:
        graph.derived[node] = Slice(source, start, stop)


def read_attribute(graph: ChannelGraph, node: fx.Node) -> None:
    """``x.shape`` whose every use takes one dim other than the channels (``x.shape[-2]``: an interpolation's size)
    is as safe as ``x.dtype``; any other read of the shape could take the channel count."""
    source, name = node.args[:2]
    other_dims = name == "shape" and reads_other_dims_only(node, len(shape_of(source) or ()))
    if name not in SAFE_ATTRIBUTES and not other_dims:
        graph.block(source, f"reads .{name}")
        graph.block(node, f"reads .{name}")


def sizes_other_dims_only(node: fx.Node) -> bool:
    """``x.size(d)`` of a dim other than the channels, or ``x.size()`` whose uses take such dims only."""
    rank, dim = len(shape_of(node.args[0]) or ()), argument(node, 1, "dim")
    if dim is None:
        return reads_other_dims_only(node, rank)
    return dim == 0 or other_dim(dim, rank)


def reads_other_dims_only(shape: fx.Node, rank: int) -> bool:
    return bool(shape.users) and all(
        user.op == "call_function" and user.target is operator.getitem and other_dim(user.args[1], rank)
        for user in shape.users
    )


def other_dim(dim, rank: int) -> bool:
    """Whether ``dim`` is a dim of a channel tensor other than its channels."""
    return isinstance(dim, int) and rank in CHANNEL_RANKS and -rank <= dim < rank and not channel_dim(dim, rank)


def functional_batchnorm(graph: ChannelGraph, node: fx.Node) -> None:
    """``F.batch_norm`` as timm's BatchNormAct2d calls it, its tensors ``get_attr`` nodes."""
    names = ("input", "running_mean", "running_var", "weight", "bias")
    params = {name: argument(node, position, name) for position, name in enumerate(names) if position}
    functional_layer(graph, node, params, visit_batchnorm)


def functional_layer(graph: ChannelGraph, node: fx.Node, params: dict, visit_layer) -> None:
    """A functional call whose weights are ``get_attr`` nodes (or None): named by its weights' module."""
    if not all(p is None or (isinstance(p, fx.Node) and p.op == "get_attr") for p in params.values()):
        unknown(graph, node, f"{target_name(node)} with computed weights")
        return
    paths = {role: p.target for role, p in params.items() if p is not None}
    layer = next(iter(paths.values()), node.name).rpartition(".")[0] or node.name
    visit_layer(graph, node, layer, paths, None)


def block_shared_weights(graph: ChannelGraph) -> None:
    """A module called twice, or a weight read twice, would need one layout for several call sites: keep it."""
    calls = Counter(n.target for n in graph.module.graph.nodes if n.op == "call_module")
    reads = Counter()
    for n in graph.module.graph.nodes:
        if n.op == "get_attr":
            reads[n.target] += len(n.users)
    for site in graph.sites:
        paths = [path for _, path in site.params]
        if site.module is not None:
            shared = calls[site.module] > 1 or any(reads[p] > 0 for p in paths)
        else:
            shared = any(reads[p] > 1 for p in paths)
        if shared:
            graph.block(site.node, f"{site.layer}'s weights are used at several places")
            graph.block(site.node.args[0], f"{site.layer}'s weights are used at several places")


def block_writes_into_slices(graph: ChannelGraph) -> None:
    """An in-place op on a channel slice (or a view of one) writes into the sliced tensor: a padded slice would
    write into padding that holds real channels; keep such a slice unpadded."""
    writes = dict(graph.inplace)
    views = {node for node, d in graph.derived.items() if isinstance(d, Slice)}
    for node in graph.module.graph.nodes:
        if node.args and node.args[0] in views and (node in writes or may_alias(graph.module, node)):
            views.add(node)
    for node, written in graph.inplace:
        if written in views:
            graph.block(node, "an in-place op on a channel slice")


def may_alias(module: fx.GraphModule, node: fx.Node) -> bool:
    """Whether the op may return (a view of) its first argument."""
    if node.op == "call_module":
        return isinstance(module.get_submodule(node.target), ALIASING_MODULES)
    if node.op == "call_function":
        return node.target in ALIASING_FUNCTIONS
    return node.op == "call_method" and node.target in ALIASING_METHODS
