"""ONNX files as PyTorch modules: parsed with their external data, checked, made convertible, converted by onnx2torch.

onnx2torch (the ``onnx`` extra: ``pip install 'utilscope[onnx]'``) turns each ONNX node into a module of a
``torch.fx.GraphModule`` (``Conv`` into ``nn.Conv2d``, ``Add`` into its own module), with the file's weights. Its
last release (1.5.15) knows the ops CNNs use up to opset 17. Files of a later opset (PyTorch's exporter writes
opset 18 and later) are first converted down to opset 17 by ONNX's own version converter; the ops it cannot convert
down (``Gelu``, new in opset 20; ``Split`` of opset 18, for which it has no adapter) are carried through that step
under a private domain and converted by converters of ours (``nn.GELU``; onnx2torch's own ``Split``, whose split
sizes come from the split input or divide the axis evenly). Rewrites that change nothing the graph computes make
the files of PyTorch's exporters convertible: an ``Identity`` of a weight is replaced by the weight itself
(onnx2torch wants a conv's weight as an initializer); a ``Reshape`` with ``allowzero=1`` whose shape is a constant
without zeros gets ``allowzero=0`` (the attribute only matters for a zero in the shape). After conversion, each
Reshape of a constant shape reads it once (``StaticReshape``: onnx2torch's reads it on every call, a host sync on a
GPU and impossible on the meta device), and the weights onnx2torch keeps as buffers become parameters. An op the
converter lacks is a one-line error naming each such op and its count.

Nothing here runs code from the file: ONNX is a protobuf of ops and tensors.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

from torch import nn

from utilscope.errors import ModelError, UsageError, describe
from utilscope.models.onnx_graph import check_graph, external_files, image_input, unparsable

ONNX_EXTRA = "pip install 'utilscope[onnx]'"
CONVERTER_OPSET = 17  # the newest opset whose CNN ops onnx2torch 1.5.15 converts
PRIVATE_DOMAIN = "utilscope"  # carries ops of later opsets through the version converter (``_PRIVATE_OPS``)
_PRIVATE_OPS = ("Gelu", "Split")


def require_onnx():
    """The ``onnx`` and ``onnx2torch`` modules; a one-line UsageError naming the extra when they are missing."""
    try:
        import onnx
        import onnx2torch  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"reading ONNX files needs the onnx extra ({exc.name} is missing): {ONNX_EXTRA}") from None
    return onnx


def parse(data: bytes, path: Path):
    """The ModelProto of a file's bytes, its graph checked (``onnx_graph.check_graph``: nodes, external data files,
    one image input; then onnx's checker, not on its weights); a UsageError naming the file when the bytes are not
    an ONNX model (another format, corrupt, truncated), a data file is missing or the graph is not one utilscope
    runs."""
    onnx = require_onnx()
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError, and what a corrupt file raises before it
        raise unparsable(path, exc) from None
    external = check_graph(model, path)
    try:  # with external data, the checker reads the file and finds its data files beside it
        onnx.checker.check_model(str(path) if external else model)
    except Exception as exc:
        raise UsageError(f"{path} is not a valid ONNX model ({describe(exc)})") from None
    return model


def default_opset(model) -> int:
    return next((op.version for op in model.opset_import if op.domain in ("", "ai.onnx")), 1)


def convertible(model, path: Path):
    """The model rewritten so onnx2torch converts it (the module docstring's steps); the model itself is changed."""
    onnx = require_onnx()
    _drop_identity_of_weights(model)
    if default_opset(model) > CONVERTER_OPSET:
        _hide_private_ops(model)
        try:
            model = onnx.version_converter.convert_version(model, CONVERTER_OPSET)
        except Exception as exc:
            later = _ops_without_version(model, CONVERTER_OPSET)
            named = ", ".join(f"{op} x{n}" for op, n in later.items()) or describe(exc)
            raise UsageError(
                f"{path} (opset {default_opset(model)}) cannot be converted to opset {CONVERTER_OPSET}, the "
                f"newest onnx2torch knows: {named}"
            ) from None
    _allow_no_zero(model)
    return model


def _drop_identity_of_weights(model) -> None:
    """``Identity`` nodes whose input is an initializer (PyTorch's older exporter writes them for shared weights):
    their consumers read the initializer itself."""
    graph = model.graph
    weights = {tensor.name for tensor in graph.initializer}
    outputs = {value.name for value in graph.output}
    alias = {
        node.output[0]: node.input[0]
        for node in graph.node
        if node.op_type == "Identity" and node.domain in ("", "ai.onnx") and node.input[0] in weights
        if node.output[0] not in outputs
    }
    if not alias:
        return
    kept = [node for node in graph.node if not (node.op_type == "Identity" and node.output and node.output[0] in alias)]
    for node in kept:
        for index, name in enumerate(node.input):
            node.input[index] = alias.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)


def _hide_private_ops(model) -> None:
    """Move ``_PRIVATE_OPS`` nodes to ``PRIVATE_DOMAIN`` (the version converter leaves other domains alone)."""
    from onnx.helper import make_opsetid

    hidden = False
    for node in model.graph.node:
        if node.op_type in _PRIVATE_OPS and node.domain in ("", "ai.onnx"):
            node.domain, hidden = PRIVATE_DOMAIN, True
    if hidden and all(op.domain != PRIVATE_DOMAIN for op in model.opset_import):
        model.opset_import.append(make_opsetid(PRIVATE_DOMAIN, 1))


def _ops_without_version(model, opset: int) -> Counter:
    """Ops of the default domain with no version at or below ``opset``, and their counts."""
    from onnx import defs

    counts: Counter = Counter()
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx"):
            try:
                defs.get_schema(node.op_type, max_inclusive_version=opset)
            except Exception:
                counts[node.op_type] += 1
    return counts


def _allow_no_zero(model) -> None:
    """``Reshape(allowzero=1)`` -> ``allowzero=0`` where the shape is a constant without a zero (then the two are
    the same op); onnx2torch converts only the latter."""
    from onnx import numpy_helper

    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "Reshape" or node.input[1] not in constants:
            continue
        shape = numpy_helper.to_array(constants[node.input[1]]).tolist()
        for attribute in node.attribute:
            if attribute.name == "allowzero" and attribute.i == 1 and 0 not in shape:
                attribute.i = 0


def unsupported_ops(model) -> Counter:
    """The model's ops onnx2torch has no converter for, as "Op (opset N)" -> count."""
    _register_private_converters()
    from onnx2torch.node_converters.registry import get_converter

    opsets = {op.domain: op.version for op in model.opset_import}
    counts: Counter = Counter()
    for node in model.graph.node:
        version = opsets.get(node.domain, opsets.get("ai.onnx" if node.domain == "" else node.domain, 1))
        try:
            get_converter(node.op_type, version, node.domain)
        except NotImplementedError:
            counts[f"{node.op_type} (opset {version})"] += 1
    return counts


@functools.cache
def _register_private_converters() -> None:
    """Add onnx2torch converters for ``_PRIVATE_OPS`` (its documented ``add_converter`` extension); once."""
    from onnx2torch.node_converters.registry import add_converter
    from onnx2torch.node_converters.split import OnnxSplit13
    from onnx2torch.utils.common import OperationConverterResult, onnx_mapping_from_node

    @add_converter(operation_type="Gelu", version=1, domain=PRIVATE_DOMAIN)
    def _gelu(node, graph):
        approximate = node.attributes.get("approximate", "none")
        approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
        return OperationConverterResult(nn.GELU(approximate=approximate), onnx_mapping_from_node(node))

    @add_converter(operation_type="Split", version=1, domain=PRIVATE_DOMAIN)
    def _split(node, graph):
        module = OnnxSplit13(num_splits=len(node.output_values), axis=node.attributes.get("axis", 0))
        return OperationConverterResult(module, onnx_mapping_from_node(node))


def to_module(model, path: Path) -> nn.Module:
    """The onnx2torch module of a model made ``convertible``, with the model's weights; an op it lacks is a UsageError
    naming each such op and its count."""
    missing = unsupported_ops(model)
    if missing:
        ops = ", ".join(f"{op} x{count}" for op, count in missing.most_common())
        raise UsageError(f"{path} uses ONNX ops onnx2torch cannot convert: {ops}")
    from onnx2torch import convert

    try:
        module = convert(model)
    except Exception as exc:
        raise ModelError(f"converting {path} with onnx2torch raised {describe(exc)}") from exc
    return _weights_as_parameters(_static_reshapes(module))


def _weights_as_parameters(module):
    """onnx2torch keeps the initializers no module of its own takes (a MatMul's weight, an Add's bias, a scale) as
    buffers; its floating-point ones become parameters, as they are in the network exported (integer ones are
    shapes and indices)."""
    container = getattr(module, "initializers", None)
    for name, tensor in list(container.named_buffers(recurse=False)) if container is not None else ():
        if tensor.is_floating_point():
            del container._buffers[name]
            container.register_parameter(name, nn.Parameter(tensor, requires_grad=False))
    return module


class StaticReshape(nn.Module):
    """onnx2torch's Reshape with its constant target shape read once: its own reads the shape tensor's values on
    every call (a host sync on a GPU, impossible on the meta device the zoo counts on)."""

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.shape = shape

    def forward(self, x, shape=None):
        return x.reshape(self.shape)


def _static_reshapes(module):
    """Each onnx2torch Reshape whose shape is a constant without a zero (a zero copies an input's size) replaced by a
    ``StaticReshape``."""
    from onnx2torch.node_converters.reshape import OnnxReshape

    for node in module.graph.nodes:
        if node.op != "call_module" or not isinstance(module.get_submodule(node.target), OnnxReshape):
            continue
        shape = node.args[1] if len(node.args) > 1 else None
        if getattr(shape, "op", None) != "get_attr":
            continue
        values = module.get_buffer(shape.target).tolist()
        if 0 not in values:
            module.set_submodule(node.target, StaticReshape(tuple(values)))
    return module


def load_module(data: bytes, path: Path) -> tuple[nn.Module, tuple[str, tuple[int | None, ...]]]:
    """The module of an ONNX file's bytes (external data read from its folder) and its input (``image_input``)."""
    from onnx.external_data_helper import load_external_data_for_model

    model = parse(data, path)
    shape = image_input(model, path)
    if external_files(model, path):
        try:
            load_external_data_for_model(model, str(path.parent))
        except Exception as exc:
            raise UsageError(f"cannot read the external data of {path}: {describe(exc)}") from None
    return to_module(convertible(model, path), path), shape
