"""A traced network's channel graph: which tensors must share one channel layout (a union-find over fx nodes), which
are cut from (``Slice``) or joined of (``Cat``) others, which are blocked (kept unpadded, with a reason), and the
layers whose weights follow the layouts (``Site``).

A tensor with channels is a 4-D ``(N, C, H, W)`` or a 2-D ``(N, C)`` one. Every op is either understood here or
blocks the tensors it touches: correctness first, an op that is not understood keeps its tensors as they were.

Padding holds values consumers ignore, except where a conv runs *over* the channels (ECA's gate: a ``Conv1d`` along
the channel dim): there it must be zero and at the end. ``zero_rules`` say which tensors' padding is zero given their
inputs' (a layer's output always: zero filters, zero bias), ``channel_convs`` where it has to be.

The ops understood are a table, the shape of torch's ``register_flop_formula``: each op, or family of alike ops, is
one handler ``(graph, node) -> None`` registered with ``@_handles`` under its targets, a module class (matched by
exact type; ``subclasses=True``: its subclasses too), a function (``torch.cat``, ``operator.add``) or a method name
(``"view"``). The handler ties, derives or blocks the node's tensors and states the node's zero rule; the
registration says what else the op is: a ``gate`` (elementwise, so it may sit in ECA's gate) or an op that
``aliases`` its first argument (returns it or a view of it). Adding an op is one such function.
"""

from __future__ import annotations

import builtins
import copy
import math
import operator
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from utilscope.errors import ModelError, describe
from utilscope.measure.folding import is_plain_conv

_CHANNEL_RANKS = (2, 4)  # (N, C) and (N, C, H, W): the channel dim is dim 1
_SPATIAL_DIMS = frozenset({2, 3})
_SAFE_ATTRIBUTES = frozenset({"ndim", "dtype", "device", "is_cuda", "requires_grad", "layout"})
_AUGMENTED_ASSIGNMENTS = frozenset({operator.iadd, operator.imul, operator.isub, operator.itruediv})  # x += y, ...


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
    traced = _trace(model, example)
    channels = {node: count for node in traced.graph.nodes if (count := _channel_count(node)) is not None}
    graph = ChannelGraph(traced, channels)
    for node in traced.graph.nodes:
        _visit(graph, node)
    _block_shared_weights(graph)
    _block_writes_into_slices(graph)
    return graph


class PlainConvTracer(fx.Tracer):
    """Plain convolutions are leaves, timm's ``Conv2dSame`` among them: it computes its padding from the input's
    shape, which symbolic tracing cannot follow, and it is read as the convolution it is."""

    def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
        return is_plain_conv(module) or super().is_leaf_module(module, qualified_name)


def _trace(model: nn.Module, example: torch.Tensor) -> fx.GraphModule:
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


def _channel_count(node: fx.Node) -> int | None:
    meta = node.meta.get("tensor_meta")
    if isinstance(meta, TensorMetadata) and len(meta.shape) in _CHANNEL_RANKS:
        return int(meta.shape[1])
    return None


def _shape_of(node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return tuple(meta.shape) if isinstance(meta, TensorMetadata) else None


def _argument(node: fx.Node, position: int, name: str, default=None):
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _called(graph: ChannelGraph, node: fx.Node) -> nn.Module:
    """The module a ``call_module`` node calls."""
    return graph.module.get_submodule(node.target)


# --- the op table ----------------------------------------------------------------------------------------------

_Handler = Callable[[ChannelGraph, fx.Node], None]


@dataclass(frozen=True)
class _Op:
    read: _Handler
    gate: bool = False  # elementwise: may sit in ECA's gate, between its Conv1d and the view back
    aliases: bool = False  # may return its first argument or a view of it


_OPS: dict[tuple[str, object], _Op] = {}  # (node.op, target) -> its op; a module by its exact type
_SUBCLASSED: list[tuple[type, _Op]] = []  # module classes whose subclasses are read as they are


def _key(target) -> tuple[str, object]:
    """The fx node kind that calls ``target`` (a module class, a method name or a function), and ``target``."""
    if isinstance(target, str):
        return ("call_method", target)
    if isinstance(target, type) and issubclass(target, nn.Module):
        return ("call_module", target)
    return ("call_function", target)


def _handles(*targets, gate: bool = False, aliases: bool = False, subclasses: bool = False):
    """Register the decorated handler for ``targets``; a target registered twice is a ``ValueError``."""

    def register(read: _Handler) -> _Handler:
        op, keys = _Op(read, gate, aliases), [_key(target) for target in targets]
        taken = [key for key in keys if key in _OPS or keys.count(key) > 1]
        if taken:
            names = ", ".join(dict.fromkeys(getattr(t, "__name__", str(t)) for _, t in taken))
            raise ValueError(f"channel-graph op {names} registered twice")
        _OPS.update(dict.fromkeys(keys, op))
        if subclasses:
            _SUBCLASSED.extend((target, op) for target in targets)
        return read

    return register


def _op_of(graph: ChannelGraph, node: fx.Node) -> _Op | None:
    """The registered op a node calls; None for an op not in the table (or a node that calls none). Every plain
    convolution (``is_plain_conv``: timm's ``Conv2dSame`` too) is read as ``nn.Conv2d``."""
    if node.op == "call_module":
        module = _called(graph, node)
        found = _OPS.get(("call_module", nn.Conv2d if is_plain_conv(module) else type(module)))
        return found or next((op for kind, op in _SUBCLASSED if isinstance(module, kind)), None)
    if node.op in ("call_function", "call_method"):
        return _OPS.get((node.op, node.target))
    return None


def _visit(graph: ChannelGraph, node: fx.Node) -> None:
    if node in graph.handled:
        return
    if node.op == "placeholder":
        graph.block(node, "graph input")
    elif node.op == "output":
        for source in node.all_input_nodes:
            graph.block(source, "graph output")
    elif node.op == "get_attr":
        graph.block(node, "a parameter or buffer used as a tensor")
    elif (op := _op_of(graph, node)) is not None:
        op.read(graph, node)
    else:
        _unknown(graph, node, f"unknown module {_target_name(node)}" if node.op == "call_module" else None)


def _unknown(graph: ChannelGraph, node: fx.Node, reason: str | None = None) -> None:
    """Block every tensor the op touches."""
    reason = reason or f"unknown op {_target_name(node)}"
    for source in node.all_input_nodes:
        graph.block(source, reason)
    graph.block(node, reason)


def _target_name(node: fx.Node) -> str:
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(node.target)).__name__
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


# --- layers: convolutions, linear layers, batch norms ----------------------------------------------------------


@_handles(nn.Conv2d)
def _conv_module(graph: ChannelGraph, node: fx.Node) -> None:
    conv = _called(graph, node)
    source = node.args[0] if len(node.args) == 1 and not node.kwargs else None
    if source not in graph.channels or node not in graph.channels:
        _unknown(graph, node, "a conv not on a 4-D tensor")
        return
    params = tuple((role, f"{node.target}.{role}") for role in ("weight", "bias") if getattr(conv, role) is not None)
    _conv_site(graph, node, source, conv.groups, Site(node, "conv", node.target, params, node.target))


@_handles(F.conv2d)
def _functional_conv(graph: ChannelGraph, node: fx.Node) -> None:
    params = {"weight": _argument(node, 1, "weight"), "bias": _argument(node, 2, "bias")}
    _functional_layer(graph, node, params, _conv_layer)


def _conv_layer(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: None) -> None:
    """``F.conv2d`` of ``get_attr`` weights whose ``groups`` is a number: dense, grouped, or depthwise (timm's
    ``BlurPool2d``: a fixed blur filter, one per channel; the rewrite sets ``groups`` to the padded width)."""
    source, groups = node.args[0], _argument(node, 6, "groups", 1)
    if source not in graph.channels or node not in graph.channels or not isinstance(groups, int):
        _unknown(graph, node, "a conv2d not on a 4-D tensor, or with computed groups")
        return
    _conv_site(graph, node, source, groups, Site(node, "conv", layer, tuple(params.items()), None))


def _conv_site(graph: ChannelGraph, node: fx.Node, source: fx.Node, groups: int, dense: Site) -> None:
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
        _unknown(graph, node, f"depthwise conv with channel multiplier {channels_out // channels_in}")
        return
    else:
        graph.sites.append(replace(dense, kind="grouped", groups=groups))
        for tensor in (source, node):
            graph.groups.setdefault(tensor, set()).add(groups)
    graph.zero_rules[node] = ("all", ())  # a padded filter is zero, and so is its bias


@_handles(nn.Linear)
def _linear_module(graph: ChannelGraph, node: fx.Node) -> None:
    _linear_layer(graph, node, node.target, {"weight": f"{node.target}.weight", "bias": f"{node.target}.bias"})


@_handles(F.linear)
def _functional_linear(graph: ChannelGraph, node: fx.Node) -> None:
    params = {"weight": _argument(node, 1, "weight"), "bias": _argument(node, 2, "bias")}
    _functional_layer(graph, node, params, _linear_layer)


def _linear_layer(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: str | None = None) -> None:
    source = node.args[0]
    if len(_shape_of(source) or ()) != 2 or node not in graph.channels:
        _unknown(graph, node, "a linear layer over the last dim of a tensor that is not (N, C)")
        return
    module = module or (layer if node.op == "call_module" else None)
    present = tuple((role, path) for role, path in params.items() if path is not None)
    if module is not None:
        linear = graph.module.get_submodule(module)
        present = tuple((role, path) for role, path in present if getattr(linear, role) is not None)
    graph.sites.append(Site(node, "linear", layer, present, module))
    graph.zero_rules[node] = ("all", ())


_BATCHNORM_RANKS = {nn.BatchNorm1d: 2, nn.BatchNorm2d: 4}  # the rank of the tensors each normalizes per channel


@_handles(*_BATCHNORM_RANKS)
def _batchnorm_module(graph: ChannelGraph, node: fx.Node) -> None:
    module = _called(graph, node)
    if len(_shape_of(node) or ()) != _BATCHNORM_RANKS[type(module)]:
        _unknown(graph, node, f"unknown module {type(module).__name__}")
        return
    roles = ("weight", "bias", "running_mean", "running_var")
    params = {role: f"{node.target}.{role}" for role in roles if getattr(module, role) is not None}
    _batchnorm_layer(graph, node, node.target, params, node.target)


@_handles(F.batch_norm)
def _functional_batchnorm(graph: ChannelGraph, node: fx.Node) -> None:
    """``F.batch_norm`` as timm's BatchNormAct2d calls it, its tensors ``get_attr`` nodes."""
    names = ("input", "running_mean", "running_var", "weight", "bias")
    params = {name: _argument(node, position, name) for position, name in enumerate(names) if position}
    _functional_layer(graph, node, params, _batchnorm_layer)


def _batchnorm_layer(graph: ChannelGraph, node: fx.Node, layer: str, params: dict, module: str | None) -> None:
    source = node.args[0]
    if source not in graph.channels:
        _unknown(graph, node, "a batch norm not on an (N, C) or (N, C, H, W) tensor")
        return
    graph.tie(source, node)
    graph.sites.append(Site(node, "batchnorm", layer, tuple(params.items()), module))
    graph.zero_rules[node] = ("all", (source,))  # identity statistics, weight 1, bias 0: zero stays zero


def _functional_layer(graph: ChannelGraph, node: fx.Node, params: dict, read_layer) -> None:
    """A functional call whose weights are ``get_attr`` nodes (or None): named by its weights' module."""
    if not all(p is None or (isinstance(p, fx.Node) and p.op == "get_attr") for p in params.values()):
        _unknown(graph, node, f"{_target_name(node)} with computed weights")
        return
    paths = {role: p.target for role, p in params.items() if p is not None}
    layer = next(iter(paths.values()), node.name).rpartition(".")[0] or node.name
    read_layer(graph, node, layer, paths, None)


@_handles(nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm2d, nn.LocalResponseNorm, subclasses=True)
def _norm_over_channels(graph: ChannelGraph, node: fx.Node) -> None:
    _unknown(graph, node, f"{type(_called(graph, node)).__name__} normalizes over channels")


@_handles(nn.ChannelShuffle, nn.PixelShuffle, nn.PixelUnshuffle, subclasses=True)
def _channel_shuffle(graph: ChannelGraph, node: fx.Node) -> None:
    _unknown(graph, node, f"{type(_called(graph, node)).__name__} reorders the channel dim")


# --- ops that keep their input's layout: activations, per-channel pooling and resampling, no-ops ----------------


@_handles(nn.Tanh, torch.tanh, "tanh", gate=True)
@_handles(nn.Identity, nn.Dropout, nn.Dropout2d, F.dropout, "contiguous", aliases=True)
@_handles(
    *(nn.ReLU, nn.ReLU6, nn.SiLU, nn.GELU, nn.Hardswish, nn.LeakyReLU, nn.ELU, nn.Mish),
    *(F.relu, F.relu6, F.silu, F.gelu, F.hardswish, F.leaky_relu, F.elu, F.mish, torch.relu, "relu", "relu_"),
    *(nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d),
    *(F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d, F.adaptive_max_pool2d),
    *(nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d, F.interpolate),  # resampling: per channel
    "tanh_",
)
def _keeps_zero(graph: ChannelGraph, node: fx.Node) -> None:
    """Per channel, and zero where its input is (ReLU, SiLU, tanh, pooling, ...)."""
    _preserve(graph, node, zero_kept=True)


@_handles(nn.Sigmoid, nn.Hardsigmoid, torch.sigmoid, F.hardsigmoid, "sigmoid", gate=True)
@_handles(
    *(nn.Hardtanh, F.hardtanh, torch.clamp, "sigmoid_"),
    *("clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_"),
)
def _nonzero_at_zero(graph: ChannelGraph, node: fx.Node) -> None:
    """Per channel, but not zero where its input is (a sigmoid, a clamp; ReLU6 is a Hardtanh of 0 and its own
    type, so it keeps zero)."""
    _preserve(graph, node, zero_kept=False)


@_handles(F.pad)
def _spatial_pad(graph: ChannelGraph, node: fx.Node) -> None:
    """``F.pad`` of H and W only (at most 4 numbers: the last two dims) keeps the channel layout."""
    pad = _argument(node, 1, "pad")
    if isinstance(pad, (tuple, list)) and len(pad) <= 4 and len(_shape_of(node) or ()) == 4:
        _preserve(graph, node, zero_kept=True)
    else:
        _unknown(graph, node, f"a pad of {pad} that reaches the channel dim")


def _preserve(graph: ChannelGraph, node: fx.Node, zero_kept: bool) -> None:
    """An op that keeps its first argument's layout (elementwise per channel, per-channel pooling, views);
    ``zero_kept``: it maps zero padding to zero."""
    source, shape = node.args[0] if node.args else None, _shape_of(node)
    others = [n for n in node.all_input_nodes if n is not source and _shape_of(n) is not None]
    if source not in graph.channels or others or shape is None or len(shape) != len(_shape_of(source)):
        _unknown(graph, node)
        return
    graph.tie(source, node)
    if zero_kept:
        graph.zero_rules[node] = ("all", (source,))
    if _writes_in_place(graph, node):
        graph.inplace.append((node, source))


def _writes_in_place(graph: ChannelGraph, node: fx.Node) -> bool:
    """Whether the op writes its first argument: a module's ``inplace``, a method named with a trailing ``_``, a
    function's ``inplace=True`` or an augmented assignment (``x += y``)."""
    if node.op == "call_module":
        return bool(getattr(_called(graph, node), "inplace", False))
    if node.op == "call_method":
        return node.target.endswith("_")
    return node.target in _AUGMENTED_ASSIGNMENTS or bool(node.kwargs.get("inplace", False))


# --- elementwise arithmetic of two tensors ----------------------------------------------------------------------


@_handles(operator.add, operator.sub, operator.iadd, operator.isub, torch.add, torch.sub, "add", "add_", "sub", "sub_")
def _sum(graph: ChannelGraph, node: fx.Node) -> None:
    """A sum or difference: zero where both terms with the channels are (a broadcast or constant term is not)."""
    _binary(graph, node, zero_when="all")


@_handles(operator.mul, operator.imul, torch.mul, "mul", "mul_")
def _product(graph: ChannelGraph, node: fx.Node) -> None:
    """A product: zero where any factor with the channels is."""
    _binary(graph, node, zero_when="any")


@_handles(operator.truediv, operator.itruediv, torch.div, torch.true_divide, "div", "div_")
def _quotient(graph: ChannelGraph, node: fx.Node) -> None:
    """A quotient: no zero rule, and a divisor with channels blocks (its padding could be zero)."""
    _binary(graph, node, zero_when=None)


def _binary(graph: ChannelGraph, node: fx.Node, zero_when: str | None) -> None:
    """Elementwise add/sub/mul/div: operands with the output's channels share its layout (a squeeze-excite gate
    ``(N, C, 1, 1)`` against ``(N, C, H, W)`` too); a one-channel operand broadcasts and stays unpadded.
    ``zero_when``: "all" (a sum), "any" (a product) or None (a quotient)."""
    operands = [a for a in node.args[:2] if isinstance(a, fx.Node) and _shape_of(a) is not None]
    tensors = [n for n in node.all_input_nodes if _shape_of(n) is not None]
    shape = _shape_of(node)
    if (
        node not in graph.channels
        or len(tensors) != len(set(operands))
        or any(len(_shape_of(a)) not in (0, len(shape)) for a in operands)
    ):
        _unknown(graph, node)
        return
    divisor = node.args[1] if len(node.args) > 1 else None
    if zero_when is None and divisor in operands and graph.channels.get(divisor, 1) > 1:
        _unknown(graph, node, "a division by a tensor with channels (its padding could be zero)")
        return
    for operand in operands:
        channels = graph.channels.get(operand, 1)  # a 0-D tensor broadcasts like one channel
        if channels == graph.channels[node]:
            graph.tie(operand, node)
        elif channels == 1:
            graph.block(operand, "broadcast over channels")
        else:
            _unknown(graph, node)
            return
    if _writes_in_place(graph, node) and operands and node.args[0] is operands[0]:
        graph.inplace.append((node, operands[0]))
    full = [a for a in node.args[:2] if isinstance(a, fx.Node) and graph.channels.get(a) == graph.channels[node]]
    if (zero_when == "any" and full) or (zero_when == "all" and len(full) == 2):
        graph.zero_rules[node] = (zero_when, tuple(full))


@_handles("expand_as")
def _expand_as(graph: ChannelGraph, node: fx.Node) -> None:
    """``y.expand_as(x)``: a gate ``(N, C, 1, 1)`` broadcast to ``(N, C, H, W)``; the three share one layout."""
    source, other = node.args[:2]
    if not all(n in graph.channels for n in (source, other, node)) or len(_shape_of(source)) != len(_shape_of(other)):
        _unknown(graph, node)
        return
    graph.tie(source, node)
    graph.tie(other, node)
    graph.zero_rules[node] = ("all", (source,))


# --- reductions and reshapes ------------------------------------------------------------------------------------


@_handles(torch.mean, "mean")
def _mean(graph: ChannelGraph, node: fx.Node) -> None:
    """A mean over H and W (global pooling, the squeeze of squeeze-excite)."""
    dims = _argument(node, 1, "dim")
    rank = len(_shape_of(node.args[0]) or ())
    dims = (dims,) if isinstance(dims, int) else tuple(dims or ())
    if rank == 4 and {d % 4 for d in dims} == _SPATIAL_DIMS and len(dims) == 2 and node in graph.channels:
        graph.tie(node.args[0], node)
        graph.zero_rules[node] = ("all", (node.args[0],))
    else:
        _unknown(graph, node, f"a mean over dims {dims}")


@_handles(nn.Flatten, torch.flatten, "flatten", aliases=True)
def _flatten(graph: ChannelGraph, node: fx.Node) -> None:
    if node.op == "call_module":
        module = _called(graph, node)
        _flatten_dims(graph, node, module.start_dim, module.end_dim)
    else:
        _flatten_dims(graph, node, _argument(node, 1, "start_dim", 0), _argument(node, 2, "end_dim", -1))


def _flatten_dims(graph: ChannelGraph, node: fx.Node, start_dim: int, end_dim: int) -> None:
    source, shape = node.args[0], _shape_of(node.args[0]) or ()
    rank = len(shape)
    if rank not in _CHANNEL_RANKS or start_dim % rank != 1 or end_dim % rank != rank - 1:
        _unknown(graph, node, f"flatten({start_dim}, {end_dim}) of a {rank}-D tensor")
    elif rank == 4 and shape[2] * shape[3] != 1:
        _unknown(graph, node, f"flatten with spatial {shape[2]}x{shape[3]} mixes channels and positions")
    else:
        graph.tie(source, node)
        graph.zero_rules[node] = ("all", (source,))


@_handles(torch.reshape, "view", "reshape", aliases=True)
def _reshape(graph: ChannelGraph, node: fx.Node) -> None:
    """``view``/``reshape`` to ``(N, -1)`` of a tensor whose spatial size is 1x1: a flatten; to ``(N, 1, -1)``,
    the start of ECA's gate (``_channel_conv_chain``), read whole here."""
    sizes = _view_sizes(node)
    if len(sizes) == 2 and sizes[1] == -1 and len(_shape_of(node) or ()) == 2:
        _flatten_dims(graph, node, 1, -1)
    elif chain := _channel_conv_chain(graph, node, sizes):
        graph.tie(node.args[0], chain[-1])
        graph.channel_convs.append((node.args[0], chain[0]))
        graph.handled.update(chain)
    else:
        _unknown(graph, node, "a reshape of the channel dim")


def _view_sizes(node: fx.Node) -> tuple:
    """The sizes of a ``view``/``reshape`` (method or ``torch.reshape``) as one tuple."""
    sizes = node.args[1:] if node.op == "call_method" else (_argument(node, 1, "shape"),)
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)


def _channel_conv_chain(graph: ChannelGraph, view: fx.Node, sizes: tuple) -> list[fx.Node] | None:
    """ECA's gate: ``(N, C)`` viewed as ``(N, 1, -1)``, a ``Conv1d(1, 1, k)`` along the channels that keeps their
    number (stride 1, zero padding), elementwise gates, and a view back to ``(N, -1, 1, 1)`` or ``(N, -1)``, each
    the only user of the one before. The Conv1d, the gates and the view back; None where the pattern breaks."""
    source, shape = view.args[0], _shape_of(view)
    channels = graph.channels.get(source)
    if channels is None or len(sizes) != 3 or sizes[2] != -1 or shape != (_shape_of(source)[0], 1, channels):
        return None
    conv = _sole_user(view)
    layer = _called(graph, conv) if conv is not None and conv.op == "call_module" else None
    if not (
        type(layer) is nn.Conv1d
        and layer.in_channels == layer.out_channels == layer.groups == 1
        and layer.stride == (1,)
        and layer.padding_mode == "zeros"
        and _shape_of(conv) == shape
    ):
        return None
    chain = [conv]
    while (user := _sole_user(chain[-1])) is not None and _is_gate(graph, user) and _shape_of(user) == shape:
        chain.append(user)
    back = _sole_user(chain[-1])
    back_op = _op_of(graph, back) if back is not None else None
    back_sizes = _view_sizes(back) if back_op is not None and back_op.read is _reshape else None
    if back_sizes is None or len(back_sizes) < 2 or back_sizes[1] != -1 or graph.channels.get(back) != channels:
        return None
    return [*chain, back] if math.prod(_shape_of(back)[2:]) == 1 else None


def _sole_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _is_gate(graph: ChannelGraph, node: fx.Node) -> bool:
    """A module, or a call of one tensor, registered as a ``gate``."""
    op = _op_of(graph, node)
    return op is not None and op.gate and (node.op == "call_module" or len(node.all_input_nodes) == 1)


# --- cats, splits and slices ------------------------------------------------------------------------------------


def _channel_dim(dim, rank: int) -> bool:
    return isinstance(dim, int) and rank in _CHANNEL_RANKS and dim % rank == 1


@_handles(torch.cat, torch.concat, torch.concatenate)
def _cat(graph: ChannelGraph, node: fx.Node) -> None:
    tensors, dim = _argument(node, 0, "tensors"), _argument(node, 1, "dim", 0)
    rank = len(_shape_of(node) or ())
    ok = isinstance(tensors, (list, tuple)) and all(t in graph.channels and len(_shape_of(t)) == rank for t in tensors)
    if not ok or not _channel_dim(dim, rank) or node not in graph.channels:
        _unknown(graph, node, f"a cat along dim {dim}" if ok else None)
        return
    graph.derived[node] = Cat(tuple(tensors))
    graph.zero_rules[node] = ("all", tuple(tensors))


@_handles(torch.split, "split")
def _split(graph: ChannelGraph, node: fx.Node) -> None:
    sizes = _argument(node, 1, "split_size" if node.op == "call_method" else "split_size_or_sections")
    _split_channels(graph, node, sizes, _argument(node, 2, "dim", 0), chunks=False)


@_handles(torch.chunk, "chunk")
def _chunk(graph: ChannelGraph, node: fx.Node) -> None:
    _split_channels(graph, node, _argument(node, 1, "chunks"), _argument(node, 2, "dim", 0), chunks=True)


def _split_channels(graph: ChannelGraph, node: fx.Node, sizes, dim, chunks: bool) -> None:
    """``split``/``chunk`` along channels: each ``getitem`` of the result is a ``Slice`` of the input."""
    source = node.args[0]
    literal = isinstance(sizes, int) or (isinstance(sizes, (list, tuple)) and all(isinstance(s, int) for s in sizes))
    if source not in graph.channels or not _channel_dim(dim, len(_shape_of(source))) or not literal:
        _unknown(graph, node, f"a split along dim {dim}" if literal else "a split by computed sizes")
        return
    channels = torch.arange(graph.channels[source])
    pieces = channels.chunk(sizes, 0) if chunks else channels.split(sizes, 0)
    ranges = [(int(piece[0]), int(piece[-1]) + 1) for piece in pieces if len(piece)]
    whole = [u for u in node.users if u.target is not operator.getitem or not isinstance(u.args[1], int)]
    if whole or len(ranges) != len(pieces):
        graph.block(source, "a split used whole (not piece by piece) or with an empty piece")
        return
    graph.splits[node] = (source, ranges)


@_handles(operator.getitem, aliases=True)
def _getitem(graph: ChannelGraph, node: fx.Node) -> None:
    source, index = node.args
    if source in graph.splits:
        tensor, ranges = graph.splits[source]
        start, stop = ranges[index]
        if graph.channels.get(node) == stop - start:
            graph.derived[node] = Slice(tensor, start, stop)
            return
    elif source in graph.channels:
        _channel_slice(graph, node, source, index)
        return
    _unknown(graph, node)


def _channel_slice(graph: ChannelGraph, node: fx.Node, source: fx.Node, index) -> None:
    """``x[:, a:b]`` (other dims sliced or not): a ``Slice``, also when ``a:b`` spans all channels (its bounds
    must move too); ``x[:, :]`` and ``x[i:j]`` keep the layout."""
    index = index if isinstance(index, tuple) else (index,)
    body = index[:-1] if len(index) > 2 and index[-1] is Ellipsis else index
    plain = all(
        isinstance(i, slice) and all(isinstance(v, (int, type(None))) for v in (i.start, i.stop, i.step)) for i in body
    )
    if not plain or node not in graph.channels or len(_shape_of(node)) != len(_shape_of(source)):
        _unknown(graph, node, "an index that is not a slice of channels")
        return
    channels = graph.channels[source]
    start, stop, step = index[1].indices(channels) if len(index) > 1 else (0, channels, 1)
    if step != 1 or stop <= start:
        _unknown(graph, node, f"a channel slice with step {step} or no channels")
    elif len(index) < 2 or index[1] == slice(None):
        graph.tie(source, node)
        graph.zero_rules[node] = ("all", (source,))
    else:
        graph.derived[node] = Slice(source, start, stop)


# --- reads of a tensor's shape and attributes -------------------------------------------------------------------


@_handles(builtins.getattr)
def _read_attribute(graph: ChannelGraph, node: fx.Node) -> None:
    """``x.shape`` whose every use takes one dim other than the channels (``x.shape[-2]``: an interpolation's size)
    is as safe as ``x.dtype``; any other read of the shape could take the channel count."""
    source, name = node.args[:2]
    other_dims = name == "shape" and _reads_other_dims_only(node, len(_shape_of(source) or ()))
    if name not in _SAFE_ATTRIBUTES and not other_dims:
        graph.block(source, f"reads .{name}")
        graph.block(node, f"reads .{name}")


@_handles("dim")
def _reads_rank(graph: ChannelGraph, node: fx.Node) -> None:
    """``x.dim()``: padding does not change the rank."""


@_handles("size")
def _reads_size(graph: ChannelGraph, node: fx.Node) -> None:
    """``x.size(d)`` of a dim other than the channels (the batch size, a spatial size: padding changes none of
    them), or ``x.size()`` whose uses take such dims only; any other could read the channel count."""
    rank, dim = len(_shape_of(node.args[0]) or ()), _argument(node, 1, "dim")
    other_dims = _reads_other_dims_only(node, rank) if dim is None else (dim == 0 or _other_dim(dim, rank))
    if not other_dims:
        _unknown(graph, node, "reads the channel count (.size())")


def _reads_other_dims_only(shape: fx.Node, rank: int) -> bool:
    return bool(shape.users) and all(
        user.op == "call_function" and user.target is operator.getitem and _other_dim(user.args[1], rank)
        for user in shape.users
    )


def _other_dim(dim, rank: int) -> bool:
    """Whether ``dim`` is a dim of a channel tensor other than its channels."""
    return isinstance(dim, int) and rank in _CHANNEL_RANKS and -rank <= dim < rank and not _channel_dim(dim, rank)


# --- checks over the whole graph --------------------------------------------------------------------------------


def _block_shared_weights(graph: ChannelGraph) -> None:
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


def _block_writes_into_slices(graph: ChannelGraph) -> None:
    """An in-place op on a channel slice (or a view of one) writes into the sliced tensor: a padded slice would
    write into padding that holds real channels; keep such a slice unpadded."""
    writes = dict(graph.inplace)
    views = {node for node, d in graph.derived.items() if isinstance(d, Slice)}
    for node in graph.module.graph.nodes:
        if node.args and node.args[0] in views and (node in writes or _may_alias(graph, node)):
            views.add(node)
    for node, written in graph.inplace:
        if written in views:
            graph.block(node, "an in-place op on a channel slice")


def _may_alias(graph: ChannelGraph, node: fx.Node) -> bool:
    """Whether the op may return (a view of) its first argument: one registered as ``aliases`` (a module of such
    a class or of a subclass of one)."""
    if node.op == "call_module":
        module = _called(graph, node)
        return any(isinstance(module, kind) for (how, kind), op in _OPS.items() if how == "call_module" and op.aliases)
    op = _OPS.get((node.op, node.target)) if node.op in ("call_function", "call_method") else None
    return op is not None and op.aliases
