"""Run a model once under a TorchDispatchMode and record every aten op with its module, costs and dataflow.

Each op becomes an ``OpEvent``. Every call of a leaf module is one *layer*; an op executed directly in a
non-leaf module's ``forward`` (a residual add, a functional relu) becomes a layer of its own, named
``parent.op``. Views are not events: they alias their input and cost nothing. Tensors are tracked by *value
keys* (a new key per op output, views keep their base's key) so that fused traffic can be computed later.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import weakref
from dataclasses import dataclass, field

import torch
from torch import nn
from torch._prims_common import suggest_memory_format
from torch.nn import functional as F
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from utilscope.counting.formulas import Call, Cost, Kind, lookup

_SE_CLASS = re.compile(r"(?i:squeeze.?excit)|^(Effective)?SE(Module|Layer|Block|WithNorm)?$")
_CONVOLUTIONS = (torch.ops.aten.convolution.default, torch.ops.aten._convolution.default)


def is_squeeze_excite(module: nn.Module) -> bool:
    return bool(_SE_CLASS.search(type(module).__name__))


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor addresses: a broadcast (stride-0) dimension counts once."""
    distinct = math.prod(size for size, stride in zip(t.shape, t.stride(), strict=True) if stride != 0)
    return distinct * t.element_size()


@dataclass(frozen=True)
class TensorRef:
    key: int
    bytes: int
    is_weight: bool


@dataclass
class OpEvent:
    op: str  # "aten.convolution"
    kind: Kind | None  # None: the registry does not know this op
    cost: Cost
    call: Call  # shapes and scalar arguments, as the formula saw them
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    layer: int  # index into Trace.layers
    overwrites_first: bool = False
    first_output_only: bool = False
    layouts: tuple[str, ...] = ()  # a conv's input and weight: layout_of each (they decide its kernels' layout)
    strided: bool = False  # an input of 3 or more dims is not dense (``is_dense``): a channel slice, a broadcast

    @functools.cached_property  # an event is not changed once recorded; the fusion pass and the features ask often
    def bytes(self) -> int:
        reads = self.inputs[1:] if self.overwrites_first else self.inputs
        if self.kind is Kind.CREATION:
            reads = ()  # zeros_like(x) reads only x's shape
        writes = self.outputs[:1] if self.first_output_only else self.outputs
        return sum(r.bytes for r in reads) + sum(o.bytes for o in writes)

    @property
    def weight_bytes(self) -> int:
        return sum(r.bytes for r in self.inputs if r.is_weight)


@dataclass
class LayerSlot:
    name: str
    type: str  # module class name, or the aten op for an op outside leaf modules
    in_se: bool
    params: int = 0
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shapes: list[list[int]] = field(default_factory=list)


@dataclass
class Trace:
    layers: list[LayerSlot]
    events: list[OpEvent]
    output_keys: frozenset[int]


def _shapes(obj) -> list[list[int]]:
    return [list(t.shape) for t in pytree.tree_leaves(obj) if isinstance(t, torch.Tensor)]


class _Frame:
    """One module call on the stack."""

    __slots__ = ("path", "leaf", "in_se", "layer")

    def __init__(self, path: str, leaf: bool, in_se: bool, layer: int | None):
        self.path, self.leaf, self.in_se, self.layer = path, leaf, in_se, layer


class Tracer(TorchDispatchMode):
    """Records ops; module hooks (installed by ``trace``) keep the module stack."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.paths = {}
        for name, module in model.named_modules(remove_duplicate=False):
            self.paths.setdefault(id(module), name)
        self.layers: list[LayerSlot] = []
        self.events: list[OpEvent] = []
        self.stack: list[_Frame] = []
        self._name_uses: dict[str, int] = {}
        self._seen_modules: set[int] = set()
        self._keys: dict[int, tuple[int, weakref.ref]] = {}
        self._counter = 0
        self.suspended = False  # True while an op recorded as a whole computes its output
        self._weight_keys: set[int] = set()
        for tensor in (*model.parameters(), *model.buffers()):
            self._weight_keys.add(self.key(tensor))

    # --- tensor value keys ---
    def key(self, t: torch.Tensor) -> int:
        entry = self._keys.get(id(t))
        if entry is not None and entry[1]() is t:
            return entry[0]
        return self._assign(t, self._fresh())

    def _fresh(self) -> int:
        self._counter += 1
        return self._counter

    def _assign(self, t: torch.Tensor, key: int) -> int:
        self._keys[id(t)] = (key, weakref.ref(t))
        return key

    def ref(self, t: torch.Tensor) -> TensorRef:
        key = self.key(t)
        return TensorRef(key, tensor_bytes(t), key in self._weight_keys)

    # --- layers ---
    def _unique(self, name: str) -> str:
        uses = self._name_uses.get(name, 0) + 1
        self._name_uses[name] = uses
        return name if uses == 1 else f"{name}#{uses}"

    def new_layer(self, name: str, type_name: str, in_se: bool) -> int:
        self.layers.append(LayerSlot(self._unique(name or type_name), type_name, in_se))
        return len(self.layers) - 1

    def enter_module(self, module: nn.Module, args) -> None:
        path = self.paths.get(id(module))
        if path is None:
            return
        leaf = next(module.children(), None) is None
        in_se = is_squeeze_excite(module) or bool(self.stack and self.stack[-1].in_se)
        layer = self.new_layer(path, type(module).__name__, in_se) if leaf else None
        if layer is not None:
            slot = self.layers[layer]
            slot.input_shapes = _shapes(args)
            if id(module) not in self._seen_modules:
                slot.params = sum(p.numel() for p in module.parameters())
                self._seen_modules.add(id(module))
        self.stack.append(_Frame(path, leaf, in_se, layer))

    def exit_module(self, module: nn.Module, args, output) -> None:
        if self.paths.get(id(module)) is None:
            return
        frame = self.stack.pop()
        if frame.layer is not None:
            self.layers[frame.layer].output_shapes = _shapes(output)

    # --- ops ---
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.suspended:
            return func(*args, **kwargs)
        out = _meta_call(func, args, kwargs)
        layouts = ()
        if func in _CONVOLUTIONS:  # TorchScript's graphs call aten._convolution, modules aten.convolution
            layouts = (layout_of(args[0]), layout_of(args[1]))
            if args[0].device.type == "meta":
                out = _cuda_conv_layout(layouts, out)
        self._record(func, args, kwargs, out, layouts)
        return out

    def _record(self, func, args, kwargs, out, layouts: tuple[str, ...] = ()) -> None:
        """One op's event; ``layouts``: a conv's input and weight layouts (``layout_of``), when the caller has them."""
        name = str(func.overloadpacket)
        rule = lookup(name)
        tensors_in = tensors_of((args, kwargs))
        tensors_out = tensors_of(out)
        if func.is_view or (rule is not None and rule.kind is Kind.VIEW):
            base = self.key(tensors_in[0]) if tensors_in else self._fresh()
            for t in tensors_out:
                self._assign(t, base)
            return
        inputs = tuple(self.ref(t) for t in tensors_in)
        weight_only = bool(inputs) and all(r.is_weight for r in inputs)
        outputs = []
        for t in tensors_out:  # every output, in-place ones included, is a new value
            key = self._assign(t, self._fresh())
            if weight_only:
                self._weight_keys.add(key)
            outputs.append(TensorRef(key, tensor_bytes(t), weight_only))
        call = Call(_shapes_in(args), _shapes_in(kwargs), _shapes_of(tensors_out))
        cost = rule.cost(call) if rule is not None else Cost()
        is_conv = rule is not None and rule.kind is Kind.CONV
        conv_layouts = (layouts or tuple(map(layout_of, tensors_in[:2]))) if is_conv else ()
        self.events.append(
            OpEvent(
                name,
                rule.kind if rule is not None else None,
                cost,
                call,
                inputs,
                tuple(outputs),
                self._layer_for(name, tensors_in, tensors_out),
                rule is not None and rule.overwrites_first,
                rule is not None and rule.first_output_only,
                conv_layouts,
                any(t.dim() >= 3 and not is_dense(t) for t in tensors_in),
            )
        )

    def next_layer_index(self) -> int:
        """The layer the next op will be attributed to (a new op-level layer unless inside a leaf module)."""
        top = self.stack[-1] if self.stack else None
        return top.layer if top is not None and top.leaf else len(self.layers)

    def _layer_for(self, op_name: str, tensors_in, tensors_out) -> int:
        top = self.stack[-1] if self.stack else None
        if top is not None and top.leaf:
            return top.layer
        short = op_name.removeprefix("aten.")
        path = f"{top.path}.{short}" if top is not None and top.path else short
        layer = self.new_layer(path, op_name, bool(top and top.in_se))
        self.layers[layer].input_shapes = _shapes(tensors_in)
        self.layers[layer].output_shapes = _shapes(tensors_out)
        return layer


def is_dense(t: torch.Tensor) -> bool:
    """Whether a tensor's elements fill one block of memory, in some order of its dimensions (PyTorch's
    "non-overlapping and dense": a contiguous or channels_last tensor, or a permute of one). A part of another
    tensor along a channel (``torch.split``'s and ``chunk``'s parts of a channels_last tensor) leaves gaps and a
    broadcast view overlaps: kernels read them strided, or ATen copies them first (cuDNN's convolutions)."""
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(t.shape, t.stride(), strict=True) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def layout_of(t: torch.Tensor) -> str:
    """A 4-D tensor's memory format as ATen's ``suggest_memory_format`` reads its strides ("channels_last" or
    "contiguous"); "" for other ranks."""
    if t.dim() != 4:
        return ""
    return "channels_last" if suggest_memory_format(t) == torch.channels_last else "contiguous"


def _cuda_conv_layout(layouts: tuple[str, str], out: torch.Tensor) -> torch.Tensor:
    """A meta convolution's output laid out as cuDNN's would be: channels_last when the input or the weight is
    (``layouts``, their ``layout_of``; ATen's ``cudnn_conv_suggest_memory_format``; the meta kernel returns NCHW
    whatever its arguments). Without this, every op after a conv would look NCHW to the predictor, as none is on
    the GPU."""
    if out.dim() == 4 and "channels_last" in layouts:
        return torch.empty_like(out, memory_format=torch.channels_last)
    return out


def _stats_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _batch_norm_meta(x, *_):
    stats = x.new_empty((x.shape[1],), dtype=_stats_dtype(x))
    return torch.empty_like(x), stats, stats.clone()


def _layer_norm_meta(x, normalized_shape, *_):
    stats_shape = (*x.shape[: x.dim() - len(normalized_shape)], *([1] * len(normalized_shape)))
    stats = x.new_empty(stats_shape, dtype=_stats_dtype(x))
    return x.new_empty(x.shape), stats, stats.clone()  # contiguous, whatever the input's layout


def _addmm_meta(bias, a, b, *_):
    return a.new_empty((a.shape[0], b.shape[1]))


def _unary_meta(op):
    """An elementwise op of one tensor: its output is laid out as its input when that is contiguous or channels_last
    (the decomposition's stride rule for anything else is left to the op itself)."""

    def shortcut(x, *rest):
        if x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last):
            return torch.empty_like(x)
        return op(x, *rest)

    return shortcut


def _inplace_unary_meta(op):
    """An in-place elementwise op of one tensor: returns that tensor itself, as the kernel does (``hardswish_``'s
    meta kernel is a decomposition computing a copy it writes back: about 1 ms a call, a third of tracing a
    MobileNetV3 block)."""

    def shortcut(x, *rest):
        if x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last):
            return x
        return op(x, *rest)

    return shortcut


UNARY = (
    torch.ops.aten.gelu.default,
    torch.ops.aten.silu.default,
    torch.ops.aten.sigmoid.default,
    torch.ops.aten.hardswish.default,
    torch.ops.aten.hardsigmoid.default,
)
INPLACE_UNARY = (torch.ops.aten.hardswish_.default,)

# Output shapes of ops whose meta kernels are slow Python decompositions (most of the counting time; GELU's took
# about 1 ms a call, a fifth of NFNet-F7's count); tests check each against the real meta kernel.
META_SHORTCUTS = {
    torch.ops.aten.native_batch_norm.default: _batch_norm_meta,
    torch.ops.aten._native_batch_norm_legit_no_training.default: _batch_norm_meta,
    torch.ops.aten.native_layer_norm.default: _layer_norm_meta,
    torch.ops.aten.addmm.default: _addmm_meta,
    **{op: _unary_meta(op) for op in UNARY},
    **{op: _inplace_unary_meta(op) for op in INPLACE_UNARY},
}


def _shapes_of(tensors: list[torch.Tensor]) -> tuple[torch.Size, ...]:
    return tuple(t.shape for t in tensors)


# An op's arguments and outputs are tensors, scalars and (nested) lists, tuples and dicts of them: the two walks
# below do what torch.utils._pytree's tree_leaves and tree_map_only do for them, at a quarter of the cost (pytree's
# generality was a third of a large network's count).
def tensors_of(tree) -> list[torch.Tensor]:
    """Every tensor in ``tree``, in order (a scalar or a list of ints is looked at once, not recursed into)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        tree = tree.values()
    elif not isinstance(tree, (tuple, list)):
        return []
    found = []
    for item in tree:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list, dict)):
            found += tensors_of(item)
    return found


def _shapes_in(tree):
    """``tree`` with each tensor replaced by its shape."""
    if isinstance(tree, torch.Tensor):
        return tree.shape
    if isinstance(tree, (tuple, list)):
        return type(tree)(_shapes_in(item) for item in tree)
    if isinstance(tree, dict):
        return {key: _shapes_in(value) for key, value in tree.items()}
    return tree


# Meta outputs memoized by the inputs' metadata, for one trace at a time (``trace`` starts it empty: kept across
# networks it grew by ~100 entries a network, objects every full collection scans): a network repeats its blocks,
# and an op's output shape, strides and dtype on the meta device are a function of its arguments' (shapes,
# strides, dtypes, scalars). The meta kernels are Python for most ops (30-200 us a call, the rest of a large
# network's count); a hit is an ``empty_strided``.
# Only ops on tensors that neither write nor alias an argument are memoized, so every hit is a fresh tensor as the
# kernel's is; the default dtype is in the key (an int tensor times 2.0 promotes to it).
_META_OUTPUTS: dict[tuple, tuple] = {}
_META_OUTPUTS_MAX = 1 << 16
_PURE: dict[torch._ops.OpOverload, bool] = {}


def _meta_call(func, args, kwargs):
    """``func(*args, **kwargs)``, through ``META_SHORTCUTS`` and the memo when it runs on the meta device."""
    try:
        key = (func, torch.get_default_dtype(), _meta_key(args), _meta_key(kwargs)) if _memoizable(func, args) else None
        hit = _META_OUTPUTS.get(key) if key is not None else None
    except TypeError:  # an unhashable argument
        key = hit = None
    if hit is not None:
        is_tuple, specs = hit
        outputs = tuple(torch.empty_strided(size, stride, dtype=dtype, device="meta") for size, stride, dtype in specs)
        return outputs if is_tuple else outputs[0]
    shortcut = META_SHORTCUTS.get(func)
    if shortcut is not None and not kwargs and args[0].device.type == "meta":
        out = shortcut(*args)
    else:
        out = func(*args, **kwargs)
    spec = _meta_spec(out) if key is not None else None
    if spec is not None:
        if len(_META_OUTPUTS) >= _META_OUTPUTS_MAX:  # bounded, for a trace of an unusually large network
            _META_OUTPUTS.clear()
        _META_OUTPUTS[key] = spec
    return out


def _memoizable(func, args) -> bool:
    """A pure op (``_is_pure``) on tensors: its first argument a tensor or a list of them, so that the key holds the
    device (a factory's output device can come from a context the key does not see)."""
    first = args[0] if args else None
    if isinstance(first, (list, tuple)) and first:
        first = first[0]
    return isinstance(first, torch.Tensor) and _is_pure(func)


def _is_pure(func) -> bool:
    """Whether an op neither writes nor aliases any argument (its schema has no alias annotation)."""
    pure = _PURE.get(func)
    if pure is None:
        schema = func._schema
        annotated = any(a.alias_info is not None for a in (*schema.arguments, *schema.returns))
        pure = _PURE[func] = not (schema.is_mutable or annotated)
    return pure


def _meta_key(tree):
    """A hashable key of an op's arguments: tensors by their metadata, scalars with their type (2 and 2.0 promote
    differently)."""
    if isinstance(tree, torch.Tensor):
        return tree.shape, tree.stride(), tree.storage_offset(), tree.dtype, tree.device.type
    if isinstance(tree, (tuple, list)):
        return tuple(_meta_key(item) for item in tree)
    if isinstance(tree, dict):
        return tuple((name, _meta_key(value)) for name, value in tree.items())
    return type(tree), tree


def _meta_spec(out) -> tuple[bool, tuple] | None:
    """What a meta output is: (a tuple?, (shape, stride, dtype) of each tensor); None for anything else, which is
    not memoized."""
    tensors = (out,) if isinstance(out, torch.Tensor) else out
    if type(tensors) is not tuple or not all(isinstance(t, torch.Tensor) and t.is_meta for t in tensors):
        return None
    return type(out) is tuple, tuple((t.shape, t.stride(), t.dtype) for t in tensors)


@contextlib.contextmanager
def attention_as_one_op(tracer: Tracer, enabled: bool):
    """Record ``F.scaled_dot_product_attention`` as one fused attention op (on the meta device).

    Below autograd, meta has no fused attention kernel: SDPA would decompose into mul/bmm/softmax (scaling per
    element of Q and K, the score matrix materialized, an fp16 upcast), which is not what a GPU runs. The function
    is swapped in ``torch.nn.functional`` for the trace, so calls from inside ``multi_head_attention_forward``
    are caught too (a TorchFunctionMode would not see calls nested in another overridable function).
    """
    original = F.scaled_dot_product_attention
    op = torch.ops.aten.scaled_dot_product_attention.default

    def fused(query, key, value, *args, **kwargs):
        tracer.suspended = True
        try:
            out = query.new_empty((*query.shape[:-1], value.shape[-1]))
        finally:
            tracer.suspended = False
        tracer._record(op, (query, key, value, *args), kwargs, out)
        return out

    F.scaled_dot_product_attention = fused if enabled else original
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


_SHARED_MEMO = [False]  # set by ``shared_meta_memo``: traces keep the memo of meta outputs


@contextlib.contextmanager
def shared_meta_memo():
    """Traces inside share the memo of meta outputs (cleared when the block ends): many small modules of the same
    shapes (a search space's layers) repeat each other's ops."""
    _META_OUTPUTS.clear()
    _SHARED_MEMO[0] = True
    try:
        yield
    finally:
        _SHARED_MEMO[0] = False
        _META_OUTPUTS.clear()


def trace(model: nn.Module, example: torch.Tensor, tracer_class: type[Tracer] = Tracer) -> Trace:
    """Run ``model(example)`` without gradients and record every op."""
    if not _SHARED_MEMO[0]:
        _META_OUTPUTS.clear()  # per trace (see _META_OUTPUTS)
    tracer = tracer_class(model)
    pre = nn.modules.module.register_module_forward_pre_hook(tracer.enter_module)
    post = nn.modules.module.register_module_forward_hook(tracer.exit_module, always_call=True)
    try:
        with torch.no_grad(), attention_as_one_op(tracer, example.device.type == "meta"), tracer:
            output = model(example)
    finally:
        pre.remove()
        post.remove()
    output_keys = frozenset(tracer.key(t) for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor))
    return Trace(tracer.layers, tracer.events, output_keys)
