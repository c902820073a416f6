"""What an ONNX file's graph declares, checked without torch and without the ``onnx`` package's init (which imports
numpy and ml_dtypes: about 0.8 s): a graph with nodes, its external data files beside it, one image input. The rules
here are the ones ``onnx_import`` applies when it opens a file (``check_graph``, ``image_input``); ``check_file``
applies them while the command line is parsed, the file decoded by onnx's own generated protobuf classes (loaded
from their file, about 10 ms), so an ONNX file that cannot be used is one line before torch is imported.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

from utilscope.errors import UsageError, describe
from utilscope.files import read_bytes
from utilscope.models.sources import MODEL_FILE

IMAGE_ELEMENT_TYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}  # TensorProto data types
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL: the tensor's bytes are in a file its external_data names
_GENERATED = "onnx_ml_pb2.py"  # the onnx package's generated classes of onnx/onnx-ml.proto


@functools.cache
def _model_class():
    """onnx's ``ModelProto`` class: the onnx package's when it is imported, else its generated module's, loaded
    from its file without the package (a class of the same descriptor: protobuf gives both the same class); None
    when the onnx extra is not installed (the library says so) or its files are laid out otherwise."""
    if "onnx" in sys.modules:
        return sys.modules["onnx"].ModelProto
    try:
        found = [importlib.util.find_spec(name) for name in ("onnx", "onnx2torch")]
    except (ImportError, ValueError):
        return None
    if None in found:
        return None
    for folder in found[0].submodule_search_locations or ():
        path = Path(folder) / _GENERATED
        if path.is_file():
            spec = importlib.util.spec_from_file_location("utilscope_onnx_ml_pb2", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception:
                return None
            return module.ModelProto
    return None


def unparsable(path: Path, exc: Exception) -> UsageError:
    """The one-line error for bytes that do not decode as an ONNX model (``exc``: the decoder's)."""
    return UsageError(
        f"{path} is a truncated or corrupt ONNX model, or no ONNX model (it cannot be parsed: {describe(exc)})"
    )


def check_graph(model, path: Path) -> list[Path]:
    """What a decoded model's graph must declare: nodes, its external data files (``external_files``, returned) and
    one image input (``image_input``); a UsageError naming the file otherwise."""
    if not model.HasField("graph") or not model.graph.node:
        raise UsageError(f"{path} is not an ONNX model (it holds no graph): a corrupt, truncated or foreign file")
    external = external_files(model, path)
    image_input(model, path)
    return external


def external_files(model, path: Path) -> list[Path]:
    """The external data files the model's weights are in (beside the .onnx file), each once; a UsageError when one
    is missing or lies outside the file's folder."""
    folder = path.parent.resolve()
    files: dict[Path, None] = {}
    for tensor in _all_initializers(model.graph):
        if tensor.HasField("data_location") and tensor.data_location == _EXTERNAL:
            location = (folder / _location(tensor)).resolve()
            if not location.is_relative_to(folder):
                raise UsageError(f"{path} names external data outside its folder ({location.name}): refused")
            if not location.is_file():
                raise UsageError(
                    f"{path} keeps its weights in {location.name}, which is missing (external data is read from "
                    "the folder of the .onnx file)"
                )
            files[location] = None
    return list(files)


def _location(tensor) -> str:
    """The file an external tensor's bytes are in, as onnx's ``ExternalDataInfo`` reads it: its last ``location``
    entry, '' when it has none."""
    return next((entry.value for entry in reversed(tensor.external_data) if entry.key == "location"), "")


def _all_initializers(graph):
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t


def image_input(model, path: Path) -> tuple[str, tuple[int | None, ...]]:
    """The name and sizes (batch, channels, height, width; None where the file leaves one free) of the model's one
    input (initializers listed as inputs left out), a 4-D float tensor; a UsageError naming what the model takes
    otherwise."""
    weights = {tensor.name for tensor in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in weights]
    if len(inputs) != 1:
        names = ", ".join(value.name for value in inputs)
        raise UsageError(f"{path} takes {len(inputs)} inputs ({names}): utilscope runs models of one image input")
    value = inputs[0]
    tensor = value.type.tensor_type
    element = IMAGE_ELEMENT_TYPES.get(tensor.elem_type)
    dims = tuple(dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim)
    if not value.type.HasField("tensor_type") or element is None or len(dims) != 4:
        kind = "non-tensor"
        if value.type.HasField("tensor_type"):
            kind = f"{len(dims)}-D {_element_name(model, tensor.elem_type)}"
        raise UsageError(
            f"{path} takes a {kind} input '{value.name}': utilscope runs models of one image input (a 4-D float "
            "tensor, batch x channels x height x width)"
        )
    return value.name, dims


def _element_name(model, element: int) -> str:
    """A TensorProto data type's name in lower case (``int64``), from the model's own descriptors."""
    types = model.DESCRIPTOR.file.message_types_by_name["TensorProto"].enum_types_by_name["DataType"]
    known = types.values_by_number.get(element)
    return known.name.lower() if known is not None else f"type {element}"


def check_file(path: Path) -> None:
    """An ONNX file's graph checked before torch is imported (``check_graph``), with the messages opening it gives;
    nothing when the onnx extra is not installed (opening the file says so). The checker's and the converter's
    rules are applied when the file is opened."""
    model_class = _model_class()
    if model_class is None:
        return
    data = read_bytes(path, MODEL_FILE)
    try:
        model = model_class.FromString(data)
    except Exception as exc:  # protobuf's DecodeError, and what a corrupt file raises before it
        raise unparsable(path, exc) from None
    check_graph(model, path)
