"""Model files as model sources: a network as it ships, with its own weights and without the code that built it.

| source | spec (the prefix is optional) | written by | opened with |
|---|---|---|---|
| ``onnx`` | ``path/model.onnx`` | any ONNX exporter | parsed and converted by onnx2torch (``models.onnx_import``) |
| ``pt2`` | ``path/model.pt2`` | ``torch.export.save`` | ``torch.export.load(...).module()`` |
| ``torchscript`` | ``path/model.pt`` (``.pth``, ``.ts``) | ``torch.jit.save`` | ``torch.jit.load`` |
| ``pickle`` | ``path/model.pt`` (``.pth``) | ``torch.save(model)`` | ``torch.load(weights_only=False)`` if trusted |

A file is told by its suffix, then by its content, read without running anything: ONNX is a protobuf of ops and
tensors; torch.export and TorchScript archives hold a graph and tensors (TorchScript's graph is code, but code of
TorchScript's own interpreter, which reaches no Python); a ``.pt`` may also be a ``torch.save`` pickle, which names
Python callables that unpickling calls. Such a file is refused unless the user trusts it (``TRUST_PICKLE_ENV`` set
to 1); a pickle that names none (a state dict) holds weights without an architecture and is refused always.

A file's model is named, and keyed in a store, by its format, resolved path and the first characters of the SHA-256
of its bytes (with an ONNX file's external data files, in the order it names them):
``onnx:/abs/path/model.onnx#<digest>``. The same file named by another path is the same model; an edited file is
another one, and an id whose digest the file no longer has is refused (as for factory files).

The input's shape is the file's: its channels and its resolution (an image side) when the file fixes them, else
the channels of its first 2-D convolution (``sources.module_channels``) and ``--res``; a fixed batch (or side) is
the only one the model runs at, checked before any work (``check_input``) and by a forward pre-hook on the module (a
survey's row at another batch is an error row, not a crash). TorchScript and pickled modules record no input shape:
their channels are their first convolution's, as a factory file's model's.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import glob
import hashlib
import io
import json
import logging
import math
import os
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from utilscope.errors import ModelError, UsageError, describe
from utilscope.files import check_input_file, is_folder, read_bytes
from utilscope.models import onnx_import
from utilscope.models.file_formats import (  # noqa: F401  (model_files' names too)
    DESCRIPTIONS,
    PICKLE_MAGIC,
    SUFFIXES,
    TRUST_PICKLE_ENV,
    ZIP_MAGIC,
    Format,
    Identity,
    refuse_untrusted,
    say_trusted,
    sniff_bytes,
    split_name,
    suffix_formats,
    trusts_pickles,
)
from utilscope.models.sources import (
    FILE_DIGEST_CHARS,
    MODEL_FILE,
    ModelSource,
    a_folder,
    module_channels,
    register_source,
)

# torch.export.load's logger: when a pickle needs weights_only=False it logs a warning whose format string has one
# argument too few (torch 2.14), a "--- Logging error ---" block on stderr, or a test failure under pytest's capture
_EXPORT_SERDE_LOGGER = "torch._export.serde.serialize"


# --- what a file is ----------------------------------------------------------------------------------------------


def identify(path: str) -> Identity:
    """The file's format and digest (cached while the file's size and modification time stay); a UsageError naming
    the file when it is missing, a folder, unreadable, or not of a format its name allows."""
    info = check_input_file(path, MODEL_FILE).stat()
    return _identify(str(Path(path).resolve()), path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=64)
def _identify(resolved: str, path: str, mtime_ns: int, size: int) -> Identity:
    data = read_bytes(path, MODEL_FILE)
    found = sniff_bytes(data, path)
    return Identity(found, digest_of(data, found, Path(path)), _unsafe_globals(data, found, path))


def digest_of(data: bytes, found: Format, path: Path) -> str:
    """The SHA-256 prefix of a file's bytes, and of the external data files an ONNX model names."""
    digest = hashlib.sha256(data)
    if found is Format.ONNX:
        for extra in onnx_import.external_files(onnx_import.parse(data, path), path):
            digest.update(extra.read_bytes())
    return digest.hexdigest()[:FILE_DIGEST_CHARS]


def _unsafe_globals(data: bytes, found: Format, path: str) -> tuple[str, ...] | None:
    """The callables a torch.save archive names beyond tensors and containers (read, not run), or those of the
    pickles inside a torch.export archive; None for a file of another format, or a pickle that cannot be read so."""
    if found is Format.PT2:
        try:
            return _pt2_unsafe_globals(zipfile.ZipFile(io.BytesIO(data)))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            raise UsageError(f"{path} is a corrupt or truncated archive ({describe(exc)})") from None
    if found is not Format.PICKLE or not data.startswith(ZIP_MAGIC):
        return None
    try:
        return tuple(sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))))  # torch's: a set
    except Exception:
        return None


def _pt2_unsafe_globals(archive: zipfile.ZipFile) -> tuple[str, ...]:
    """What ``torch.export.load`` would unpickle with ``weights_only=False`` and may run: the callables named by the
    torch.save archives inside (pickled weights and constants, sample inputs), and each bare pickle (an opaque
    constant) as a whole. The raw tensor payloads its configs list are data, not pickles."""
    raw = _pt2_raw_payloads(archive)
    found: list[str] = []
    for name in archive.namelist():
        if name in raw:
            continue
        with archive.open(name) as entry:
            head = entry.read(len(ZIP_MAGIC))
        if head.startswith(ZIP_MAGIC):
            try:
                found += sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(archive.read(name))))
            except Exception:
                found.append(f"a pickle that cannot be read without running it ({name})")
        elif head.startswith(PICKLE_MAGIC):
            found.append(f"a pickled object ({name})")
    return tuple(dict.fromkeys(found))


def _pt2_raw_payloads(archive: zipfile.ZipFile) -> set[str]:
    """The entries a torch.export archive's payload configs (each beside its payloads) list as raw tensor bytes, not
    pickled."""
    raw: set[str] = set()
    for name in archive.namelist():
        if not name.endswith("_config.json"):
            continue
        try:
            config = json.loads(archive.read(name)).get("config", {})
        except (ValueError, AttributeError):
            continue
        for meta in config.values() if isinstance(config, dict) else ():
            if isinstance(meta, dict) and not meta.get("use_pickle") and meta.get("tensor_meta") is not None:
                raw.add(f"{name.rpartition('/')[0]}/{meta.get('path_name')}")
    return raw


# --- the model in a file -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputShape:
    """A file's image input: its name and sizes (batch, channels, height, width), each a number where the file
    fixes it and None where it is free; ``ranges``: the bounds a free size must keep (None: no bound above)."""

    name: str
    dims: tuple[int | None, ...]
    ranges: tuple[tuple[int, int | None], ...] | None = None  # None: a fixed size's own, else (1, None)

    def __post_init__(self) -> None:
        given = self.ranges or ((1, None),) * len(self.dims)
        bounds = tuple(
            (size, size) if size is not None else bound for size, bound in zip(self.dims, given, strict=True)
        )
        object.__setattr__(self, "ranges", bounds)


@dataclass(frozen=True)
class OpenedFile:
    """A file's model on the CPU with the file's weights; ``input`` None when the file records no input shape.
    TorchScript modules are loaded again from ``data`` for each build (they cannot be moved to the meta device)."""

    format: Format
    module: nn.Module | None
    input: InputShape | None
    data: bytes | None = None


def opened(name: str) -> OpenedFile:
    """The model of ``path#digest``, opened once per content; a UsageError when the file changed."""
    path, digest = split_name(name)
    return _opened(path, digest or identify(path).digest)


@functools.lru_cache(maxsize=2)
def _opened(path: str, digest: str) -> OpenedFile:
    with torch.device("cpu"):  # the model the file holds, on the CPU, whatever device a caller builds on
        return _open(path, digest)


def _open(path: str, digest: str) -> OpenedFile:
    identity = identify(path)
    if identity.digest != digest:
        raise UsageError(f"{path} changed while utilscope was using it (#{digest}, now #{identity.digest}): run again")
    data = read_bytes(path, MODEL_FILE)
    if identity.format is Format.ONNX:
        module, (name, dims) = onnx_import.load_module(data, Path(path))
        result = OpenedFile(Format.ONNX, module, InputShape(name, dims))
    elif identity.format is Format.PT2:
        refuse_untrusted(path, identity)
        say_trusted(path, identity)
        result = _open_pt2(data, path)
    elif identity.format is Format.TORCHSCRIPT:
        _check_torchscript_signature(_load_torchscript(data, path, "cpu"), path)
        result = OpenedFile(Format.TORCHSCRIPT, None, None, data)
    else:
        refuse_untrusted(path, identity)
        say_trusted(path, identity)
        result = OpenedFile(Format.PICKLE, _load_pickle(data, path), None)
    if result.input is not None:
        _check_image(path, result.input)
    return result


@contextlib.contextmanager
def _logger_off(name: str):
    """The logger ``name`` emits nothing inside the block (its records are not even made)."""
    logger = logging.getLogger(name)
    before, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = before


def _quiet_load(load, path: str, what: str):
    """``load()`` with torch's deprecation warnings about the format and torch.export's fallback log hushed (a
    trusted file is said once by ``say_trusted``); a UsageError naming the file when it cannot be opened."""
    try:
        with warnings.catch_warnings(), _logger_off(_EXPORT_SERDE_LOGGER):
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return load()
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"{path} cannot be opened as {what} ({describe(exc)[:300]})") from None


def _open_pt2(data: bytes, path: str) -> OpenedFile:
    program = _quiet_load(lambda: torch.export.load(io.BytesIO(data)), path, DESCRIPTIONS[Format.PT2])
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    inputs = [placeholders[name] for name in program.graph_signature.user_inputs]
    if len(inputs) != 1:
        names = ", ".join(node.name for node in inputs)
        raise UsageError(f"{path} takes {len(inputs)} inputs ({names}): utilscope runs models of one image input")
    value = inputs[0].meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dim() != 4 or not value.dtype.is_floating_point:
        kind = f"a {value.dim()}-D {value.dtype}" if isinstance(value, torch.Tensor) else "a non-tensor"
        raise UsageError(
            f"{path} takes {kind} input '{inputs[0].name}': utilscope runs models of one image input (a 4-D float "
            "tensor, batch x channels x height x width)"
        )
    dims, ranges = zip(*(_export_dim(size, program) for size in value.shape), strict=True)
    module = _quiet_load(program.module, path, DESCRIPTIONS[Format.PT2])
    return OpenedFile(Format.PT2, module, InputShape(inputs[0].name, dims, ranges))


def _export_dim(size, program) -> tuple[int | None, tuple[int, int | None]]:
    """One size of an exported input: (the number, (it, it)) when fixed, else (None, its range's bounds)."""
    if not isinstance(size, torch.SymInt):
        return int(size), (int(size), int(size))
    bounds = program.range_constraints.get(size.node.expr)
    if bounds is None:
        return None, (1, None)
    upper = float(bounds.upper)
    return None, (max(1, int(bounds.lower)), int(upper) if math.isfinite(upper) else None)


def _load_torchscript(data: bytes, path: str, device) -> torch.jit.ScriptModule:
    load = lambda: torch.jit.load(io.BytesIO(data), map_location=device)  # noqa: E731
    return _quiet_load(load, path, DESCRIPTIONS[Format.TORCHSCRIPT])


def _check_torchscript_signature(module, path: str) -> None:
    """A TorchScript module's ``forward`` must take one tensor (a UsageError otherwise); it records no shape."""
    arguments = [argument for argument in module.forward.schema.arguments if argument.name != "self"]
    if len(arguments) != 1:
        names = ", ".join(argument.name for argument in arguments)
        raise UsageError(f"{path} takes {len(arguments)} inputs ({names}): utilscope runs models of one image input")
    if str(arguments[0].type) != "Tensor":
        raise UsageError(
            f"{path} takes a {arguments[0].type} input '{arguments[0].name}': utilscope runs models of one image "
            "input (a 4-D float tensor)"
        )


def _load_pickle(data: bytes, path: str) -> nn.Module:
    load = lambda: torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)  # noqa: E731
    loaded = _quiet_load(load, path, DESCRIPTIONS[Format.PICKLE])
    if not isinstance(loaded, nn.Module):
        raise UsageError(
            f"{path} holds a {type(loaded).__name__}, not a module: a pickle without its model's architecture; "
            "write a factory file that builds the model (path/file.py:factory)"
        )
    return loaded


def _check_image(path: str, shape: InputShape) -> None:
    """An input utilscope can feed: a square image where both sides are fixed (any channels: the file's are fed)."""
    _, _, height, width = shape.dims
    if height is not None and width is not None and height != width:
        raise UsageError(f"{path} takes {height}x{width} images: utilscope runs square images (side x side)")


def input_problem(path: str, shape: InputShape | None, batch: int | None, side: int | None) -> str | None:
    """Why the file's model cannot take a batch of ``batch`` images of ``side`` pixels (None: it can)."""
    if shape is None:
        return None
    if batch is not None and not _within(batch, shape.ranges[0]):
        allowed = _allowed(shape.ranges[0], "batch")
        return f"{path} runs only at {allowed}, not at batch {batch}"
    for axis in (2, 3):
        if side is not None and not _within(side, shape.ranges[axis]):
            low, high = shape.ranges[axis]
            if low == high:
                return f"{path} takes only {low}x{low} images (the file fixes its input's size), not {side}x{side}"
            return f"{path} takes images of {_allowed(shape.ranges[axis], 'side')} pixels, not {side}"
    return None


def _within(value: int, bounds: tuple[int, int | None]) -> bool:
    return bounds[0] <= value and (bounds[1] is None or value <= bounds[1])


def _allowed(bounds: tuple[int, int | None], what: str) -> str:
    low, high = bounds
    if low == high:
        return f"{what} {low} (the file fixes its input's {what})"
    return f"{what} {low} to {high} (the range its export allows)" if high is not None else f"{what} {low} or more"


def check_input(name: str, batch: int | None, side: int | None) -> None:
    """A UsageError when the file's model cannot take ``batch`` images of ``side`` x ``side`` pixels."""
    path = split_name(name)[0]
    problem = input_problem(path, opened(name).input, batch, side)
    if problem is not None:
        raise UsageError(problem)


def fixed_batch(name: str) -> int | None:
    """The batch the file's input fixes, None when it is free or not recorded."""
    found = opened(name)
    return found.input.dims[0] if found.input is not None else None


def native_side(name: str) -> int:
    """The image side the file fixes; a UsageError asking for ``--res`` when it is free or not recorded."""
    path = split_name(name)[0]
    found = opened(name)
    if found.input is None:
        lasting = ", or export it with torch.export (.pt2), which records it" * (found.format is Format.TORCHSCRIPT)
        raise UsageError(
            f"{path} ({DESCRIPTIONS[found.format]}) records no input size: give the resolution (--res R){lasting}"
        )
    side = found.input.dims[2] if found.input.dims[2] is not None else found.input.dims[3]
    if side is None:
        raise UsageError(
            f"{path} has a dynamic input size ({found.input.name}: {_dims_text(found.input)}): give the resolution "
            "(--res R)"
        )
    return side


def input_channels(name: str, module: nn.Module) -> int:
    """The channels of the file's input where it records them (ONNX, torch.export), else those of the model's first
    convolution (``sources.module_channels``: TorchScript and pickled modules, a free channel size)."""
    found = opened(name)
    channels = found.input.dims[1] if found.input is not None else None
    return module_channels(module) if channels is None else channels


def _dims_text(shape: InputShape) -> str:
    return " x ".join("?" if size is None else str(size) for size in shape.dims)


def build(name: str, side: int) -> nn.Module:
    """A copy of the file's model on the current default device (the meta device when the zoo counts), with a
    pre-hook that refuses inputs the file's shape does not allow."""
    path = split_name(name)[0]
    found = opened(name)
    problem = input_problem(path, found.input, None, side)
    if problem is not None:
        raise UsageError(problem)
    device = torch.get_default_device()
    if found.format is Format.TORCHSCRIPT:
        return _load_torchscript(found.data, path, device)
    module = _meta_twin(found.module) if device.type == "meta" else copy.deepcopy(found.module).to(device)
    if found.input is not None:
        module.register_forward_pre_hook(_input_guard(path, found.input))
    return module


def _meta_twin(module: nn.Module) -> nn.Module:
    """A copy whose parameters and floating-point buffers are on the meta device (no data copied); integer buffers
    (an ONNX graph's constant shapes, axes and indices, which its converted modules read) stay real."""
    memo: dict[int, torch.Tensor] = {}
    for param in module.parameters():
        memo[id(param)] = nn.Parameter(torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
    for buffer in module.buffers():
        if buffer.is_floating_point() or buffer.is_complex():
            memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    return copy.deepcopy(module, memo)


def _input_guard(path: str, shape: InputShape):
    def guard(module, args):
        image = args[0] if args else None
        if isinstance(image, torch.Tensor) and image.dim() == 4:
            problem = input_problem(path, shape, int(image.shape[0]), int(image.shape[-1]))
            if problem is not None:
                raise ModelError(problem)

    return guard


# --- the sources -------------------------------------------------------------------------------------------------


def _match(found: Format):
    """The ``match`` of the source of ``found`` files: ``path`` -> ``<resolved path>#<digest>`` when the file is of
    that format; an id with a digest must name the file's current content."""

    def match(text: str) -> str | None:
        path, digest = split_name(text)
        if suffix_formats(path) is None:
            if os.sep in text and is_folder(text):
                raise a_folder(text)
            return None
        identity = identify(path)
        if identity.format is not found:
            return None
        if found in (Format.PICKLE, Format.PT2):
            refuse_untrusted(path, identity)
        if digest and digest != identity.digest:
            raise UsageError(
                f"{path} changed since it was named {text!r} (its content is #{identity.digest} now): name it as "
                f"{path} to use the file as it is"
            )
        return f"{Path(path).resolve()}#{identity.digest}"

    return match


def expand(pattern: str) -> list[str] | None:
    """The files a glob of model files names (``exports/*.onnx``), sorted; None for a pattern of another shape."""
    if suffix_formats(pattern) is None:
        return None
    return sorted(path for path in glob.glob(pattern) if Path(path).is_file())


def _exists(name: str) -> bool:
    return suffix_formats(split_name(name)[0]) is not None and Path(split_name(name)[0]).is_file()


SOURCES = {
    found: register_source(
        ModelSource(
            found.value,
            build=build,
            native_resolution=native_side,
            exists=_exists,
            match=_match(found),
            hint="a model file (.onnx, .pt2, .pt)" if found is Format.ONNX else "",
            check=opened,
            expand=expand,
            check_input=check_input,
            fixed_batch=fixed_batch,
            input_channels=input_channels,
        )
    )
    for found in Format
}
