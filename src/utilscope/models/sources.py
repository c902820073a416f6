"""Model sources: where a model name comes from (torchvision, timm, a factory file, a model file, a NAS record), in
a registry.

The built-in sources ``torchvision``, ``timm`` and ``file`` (a factory function in a Python file) are registered
here, first; the model files' (``onnx``, ``pt2``, ``torchscript``, ``pickle``) by ``models.model_files``, which the
zoo imports. Sources of the packages above this one are registered with ``register_source`` by those packages,
never named here: the NAS package's ``nas`` source by a loader the ``utilscope`` package's init adds
(``add_plugin``), called on the first lookup, so every process that imports utilscope has it, installed or not.
Third-party sources may also be declared as entry points of the ``utilscope.model_sources`` group: their modules are
imported on the first lookup (after the package's own) and register themselves. This module imports no torch (the
``utilscope`` package imports it to add its loader).

Weights are always random (torchvision ``weights=None``, timm ``pretrained=False``): nothing is downloaded.
Native resolutions: the crop size of torchvision's default weights, timm's pretrained config ``input_size``, or
for a factory file its ``RESOLUTION`` constant (``DEFAULT_FILE_RESOLUTION`` if absent).

Input channels (the input is batch x channels x side x side; ``input_channels`` is the one rule): a zoo's model
(torchvision, timm, a NAS architecture) takes RGB images, ``IMAGE_CHANNELS``; a model of the user's own (a factory
file's, a TorchScript or pickled module's, an ``nn.Module`` given to the Python API) takes as many channels as its
first 2-D convolution in registration order expects (``first_conv_channels``), else ``IMAGE_CHANNELS``; a model file
that records its input's channels (ONNX, torch.export) takes those.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import hashlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from utilscope.errors import ModelError, UsageError, describe
from utilscope.files import read_text
from utilscope.registry import Registry

if TYPE_CHECKING:
    from torch import nn

ENTRY_POINT_GROUP = "utilscope.model_sources"
DEFAULT_FILE_RESOLUTION = 224  # of a factory file without a RESOLUTION constant, and of a module counted as is
IMAGE_CHANNELS = 3  # a zoo model's input: RGB images, batch x 3 x side x side
CONV_2D = ("Conv2d", "ConvTranspose2d")  # the convolutions whose input channels a module's input takes (it is 4-D)

REPARAM = "+reparam"  # a spec's suffix: the model reparameterized for inference (``zoo.reparameterize``)


def _no_names() -> tuple[str, ...]:
    return ()


def _no_family(name: str) -> str | None:
    return None


def _no_record(name: str) -> dict | None:
    return None


def _same_name(name: str) -> str:
    return name


def _no_check(name: str) -> None:
    return None


def _any_input(name: str, batch: int | None, side: int | None) -> None:
    return None


def _no_fixed_batch(name: str) -> int | None:
    return None


def _image_channels(name: str, module: nn.Module) -> int:
    return IMAGE_CHANNELS


def first_conv_channels(module: nn.Module) -> int | None:
    """The input channels of ``module``'s first 2-D convolution (an ``nn.Conv2d`` or ``nn.ConvTranspose2d``, a
    subclass, a TorchScript module of one) in registration order (``module.modules()``), None when it has none. A
    traced TorchScript conv keeps no ``in_channels``: its weight's (a transposed conv's rows; a conv's columns times
    its ``groups``, 1 when not kept). A lazy conv not yet run (0 channels) is passed over."""
    for layer in module.modules():
        kind = _conv_2d_kind(layer)
        if kind is None:
            continue
        channels = getattr(layer, "in_channels", None)
        weight = getattr(layer, "weight", None)
        if channels is None and weight is not None and weight.dim() == 4:
            channels = weight.shape[0] if kind == "ConvTranspose2d" else weight.shape[1] * getattr(layer, "groups", 1)
        if isinstance(channels, int) and channels > 0:
            return channels
    return None


def _conv_2d_kind(layer: nn.Module) -> str | None:
    """``"Conv2d"`` or ``"ConvTranspose2d"`` for a 2-D convolution (a TorchScript module's by its original class),
    None for any other module."""
    from torch import nn

    if isinstance(layer, nn.ConvTranspose2d):
        return "ConvTranspose2d"
    if isinstance(layer, nn.Conv2d):
        return "Conv2d"
    original = getattr(layer, "original_name", None)
    return original if original in CONV_2D else None


def module_channels(module: nn.Module) -> int:
    """The input channels of a model of the user's own: its first 2-D convolution's, else ``IMAGE_CHANNELS``."""
    channels = first_conv_channels(module)
    return IMAGE_CHANNELS if channels is None else channels


def own_model_channels(name: str, module: nn.Module) -> int:
    """The ``input_channels`` of a source of the user's own models (factory files, modules given to the API)."""
    return module_channels(module)


@dataclass(frozen=True)
class ModelSource:
    """One source of models. ``name`` prefixes the ids of its models (``torchvision:resnet18``); the functions take
    a model's name within the source (``resnet18``, ``path/file.py:factory``)."""

    name: str
    build: Callable[[str, int], nn.Module]  # (name, resolution in pixels) -> the model, random weights, on the
    # current default device (the zoo chooses it and the init mode, and puts it in eval mode)
    native_resolution: Callable[[str], int]  # the input side in pixels the model was designed for
    exists: Callable[[str], bool]  # whether the name is a model of this source
    list_names: Callable[[], Sequence[str]] = _no_names  # every name, for globs and suggestions (none for files)
    # A spec recognised by its shape, without the ``name:`` prefix (``path/file.py:factory``): the model's name,
    # checked (UsageError saying what is wrong), or None when the text does not have this source's shape.
    match: Callable[[str], str | None] | None = None
    bare_names: bool = False  # whether a bare NAME tries this source (in registration order)
    family: Callable[[str], str | None] = _no_family  # a family model_sets.toml cannot tell ("NAS mbv3")
    hint: str = ""  # how the unknown-source message names a source found by its shape ("a .py file")
    # What a results store keeps so that the model can be known without its file (a NAS architecture's record),
    # and how another process names it (a worker rebuilds it from that name).
    record: Callable[[str], dict | None] = _no_record
    portable: Callable[[str], str] = _same_name
    # Check what can be checked without building the model (a factory file: imported, its factory found); raises.
    check: Callable[[str], object] = _no_check
    # A glob of this source's shape (``exports/*.onnx``): the specs it names, or None when the pattern does not have
    # this source's shape (the zoo then matches the names the sources list).
    expand: Callable[[str], Sequence[str] | None] | None = None
    # Whether the model takes a batch of ``batch`` images of ``side`` x ``side`` pixels (None: either); raises a
    # UsageError saying what it takes (a model file whose input shape is fixed).
    check_input: Callable[[str, int | None, int | None], None] = _any_input
    fixed_batch: Callable[[str], int | None] = _no_fixed_batch  # the only batch the model runs at (None: any)
    # (name, the model built) -> the channels of the input it takes: RGB images unless it is the user's own model
    # (``module_channels``) or its file says
    input_channels: Callable[[str, nn.Module], int] = _image_channels


SOURCES: Registry[ModelSource] = Registry("model source")
_PENDING: list[Callable[[], object]] = []  # the loaders ``add_plugin`` was given, not called yet
_LOADING = threading.RLock()  # one thread calls them; the others' lookups wait for their sources


def register_source(source: ModelSource) -> ModelSource:
    """Add a source (the built-ins below, a plug-in module when imported); a name registered twice is a
    ``ValueError``. Registration order is the order bare names try sources and messages list them."""
    return SOURCES.add(source.name, source)


def add_plugin(load: Callable[[], object]) -> None:
    """Have ``load`` (a function that registers sources) called on the next lookup of the model sources, before the
    entry points' plug-ins are loaded: how a package above this one adds its sources without importing them into
    every process that imports utilscope."""
    _PENDING.append(load)


@functools.cache
def _load_plugins() -> None:
    from importlib import metadata

    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry_point.load()  # a module already imported is not imported again


def model_sources() -> Registry[ModelSource]:
    """Every model source, in registration order, the package's own plug-ins (``add_plugin``) and third-party ones
    loaded."""
    with _LOADING:
        while _PENDING:
            _PENDING.pop(0)()
        _load_plugins()
    return SOURCES


# --- torchvision -----------------------------------------------------------------------------------------------

# torchvision builders whose architecture is fixed to one input size: the keyword that sets it.
_TORCHVISION_SIZE_KWARG: dict[str, Callable[[int], tuple[str, object]]] = {
    "vit_": lambda res: ("image_size", res),
    "maxvit_": lambda res: ("input_size", (res, res)),
}


@functools.cache
def _torchvision_names() -> tuple[str, ...]:
    import torchvision.models as tvm

    return tuple(tvm.list_models(module=tvm))


def _torchvision_resolution(name: str) -> int:
    import torchvision.models as tvm

    return int(tvm.get_model_weights(name).DEFAULT.transforms.keywords["crop_size"])


def _torchvision_build(name: str, resolution: int) -> nn.Module:
    import torchvision.models as tvm

    kwargs = dict(kw(resolution) for prefix, kw in _TORCHVISION_SIZE_KWARG.items() if name.startswith(prefix))
    return tvm.get_model(name, weights=None, **kwargs)


TORCHVISION = register_source(
    ModelSource(
        "torchvision",
        build=_torchvision_build,
        native_resolution=_torchvision_resolution,
        exists=lambda name: name in _torchvision_names(),
        list_names=_torchvision_names,
        bare_names=True,
    )
)


# --- timm ------------------------------------------------------------------------------------------------------


@functools.cache
def _timm_names() -> tuple[str, ...]:
    import timm

    return tuple(timm.list_models())


def _timm_exists(name: str) -> bool:
    import timm

    return timm.is_model(name)  # also accepts pretrained tags: resnet50.a1_in1k


def _timm_resolution(name: str) -> int:
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    return int(cfg.input_size[-1]) if cfg is not None else 224


def _timm_build(name: str, resolution: int) -> nn.Module:
    import timm
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    kwargs = {"img_size": resolution} if cfg is not None and cfg.fixed_input_size else {}
    return timm.create_model(name, pretrained=False, **kwargs)


TIMM = register_source(
    ModelSource(
        "timm",
        build=_timm_build,
        native_resolution=_timm_resolution,
        exists=_timm_exists,
        list_names=_timm_names,
        bare_names=True,
    )
)


# --- factory files ---------------------------------------------------------------------------------------------

# A factory file's model is named by the file's resolved path, the factory and the first characters of the SHA-256
# of the file's content: ``/abs/path/file.py:factory#<digest>``. Another file of the same name elsewhere, or the file
# edited, is another model (measured again); an id without a digest (as stores written before kept them) still
# names the file as it is now.
FILE_DIGEST_CHARS = 12
FACTORY_FILE = "factory file"
MODEL_FILE = "model file"  # what a model file (ONNX, torch.export, TorchScript, pickle) is called in messages


def _file_parts(text: str) -> tuple[str, str, str]:
    """``path.py:factory#digest`` -> (path, factory, digest); the digest may be ''."""
    path, _, factory = text.rpartition(":") if ".py:" in text else (text, "", "")
    factory, _, digest = factory.partition("#")
    return path, factory, digest


def _file_source(path: str) -> tuple[str, str]:
    """The text of a factory file and its digest; UsageError naming the file when it cannot be read as Python
    source (missing, a folder, unreadable, empty, binary)."""
    text = read_text(path, FACTORY_FILE)
    return text, hashlib.sha256(text.encode()).hexdigest()[:FILE_DIGEST_CHARS]


def _file_match(text: str) -> str | None:
    """``path/file.py:factory`` -> ``<resolved path>:factory#<digest>``, the file read (the factory is checked by
    ``_file_check``); an id with a digest must name the file's current content."""
    if ".py:" not in text and not text.endswith(".py"):
        return None
    path, factory, digest = _file_parts(text)
    if not factory:
        raise UsageError(f"factory file model '{text}' needs a factory name: path/to/file.py:factory")
    _, current = _file_source(path)
    if digest and digest != current:
        raise UsageError(
            f"{path} changed since it was named {text!r} (its content is #{current} now): name it "
            f"as {path}:{factory} to use the file as it is"
        )
    return f"{Path(path).resolve()}:{factory}#{current}"


def _file_exists(name: str) -> bool:
    path, factory, _ = _file_parts(name)
    return bool(factory) and path.endswith(".py") and Path(path).is_file()


def _factory_module(name: str):
    path, _, digest = _file_parts(name)
    return _load_factory_module(path, digest or _file_source(path)[1])


@functools.cache
def _load_factory_module(path: str, digest: str):
    """The factory file imported, once per content: its code is the text whose digest names the model. An import
    that fails, or exits (``sys.exit``), is a ModelError naming the file."""
    text, current = _file_source(path)
    if current != digest:
        raise UsageError(f"{path} changed while utilscope was using it (#{digest}, now #{current}): run again")
    code = _compiled(text, path)
    module_name = f"utilscope_factory_{digest}_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None:
        raise UsageError(f"cannot import {FACTORY_FILE} {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        del sys.modules[module_name]
        raise ModelError(f"importing {path} exited with code {exc.code} (sys.exit)") from None
    except Exception as exc:
        del sys.modules[module_name]
        raise ModelError(f"importing {path} raised {describe(exc)}") from exc
    return module


def _compiled(text: str, path: str):
    """A factory file's code; a file that does not compile (a SyntaxError) is the ModelError its import is."""
    try:
        return compile(text, path, "exec")
    except Exception as exc:
        raise ModelError(f"importing {path} raised {describe(exc)}") from exc


def _file_resolution(name: str) -> int:
    """The file's ``RESOLUTION``, which must be a whole number of pixels (``2.5``, ``True``, ``"big"`` are refused,
    not rounded; the zoo checks its range)."""
    path = _file_parts(name)[0]
    resolution = getattr(_factory_module(name), "RESOLUTION", DEFAULT_FILE_RESOLUTION)
    if not isinstance(resolution, int) or isinstance(resolution, bool):
        raise UsageError(f"{path}: RESOLUTION must be a whole number of pixels, got {resolution!r}")
    return resolution


def _file_check(name: str):
    """The factory function, the file imported (the model is not built)."""
    path, factory_name, _ = _file_parts(name)
    factory = getattr(_factory_module(name), factory_name, None)
    if not callable(factory):
        raise UsageError(f"{path} has no callable '{factory_name}'")
    return factory


def check_factory_file(text: str) -> None:
    """What a factory file's model (``path.py:factory``) can be refused for without running the file, with the
    messages building it gives: the file cannot be read as Python source, names no factory or an older content
    (``_file_match``), or does not compile (``_compiled``: the whole file is compiled before any of it runs, so this
    is the first error importing it meets). What only running it tells (an import that fails, an exit, a factory
    it lacks: the run may fail first) is checked when the model is built."""
    name = _file_match(text)
    if name is not None:
        path = _file_parts(name)[0]
        _compiled(_file_source(path)[0], path)


def _file_build(name: str, resolution: int) -> nn.Module:
    """Call the factory, with no arguments (the resolution is only the input's)."""
    from torch import nn

    model = _file_check(name)()
    if not isinstance(model, nn.Module):
        raise ModelError(
            f"factory {_file_parts(name)[0]}:{_file_parts(name)[1]} returned {type(model).__name__}, not an nn.Module"
        )
    return model


FILE = register_source(
    ModelSource(
        "file",
        build=_file_build,
        native_resolution=_file_resolution,
        exists=_file_exists,
        match=_file_match,
        hint="a .py file",
        check=_file_check,
        input_channels=own_model_channels,
    )
)


def unknown_model(text: str, names: dict[str, Sequence[str]], name: str) -> UsageError:
    """The one-line error for a model ``text`` no source has: the four names nearest ``name`` among each source's
    ``names`` (source -> its model names), best first."""
    scored = [
        (difflib.SequenceMatcher(None, name, candidate).ratio(), f"{source}:{candidate}")
        for source, candidates in names.items()
        for candidate in difflib.get_close_matches(name, candidates, n=4, cutoff=0.5)
    ]
    close = [spec for _, spec in sorted(scored, key=lambda item: -item[0])[:4]]
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    return UsageError(f"unknown model '{text}'{hint}")


def is_glob(pattern: str) -> bool:
    """Whether a model spec is a glob of model names or files (``timm:resnet*``, ``exports/*.onnx``); a factory
    file's ``X.py:FN`` never is."""
    return any(ch in pattern for ch in "*?[") and ".py:" not in pattern


def matching(names: Sequence[str], glob: str) -> list[str]:
    """The ``names`` a glob of model names matches (``zoo.list_models``: case-sensitive, ``fnmatch``'s syntax)."""
    return [name for name in names if fnmatch.fnmatchcase(name, glob)]


def no_match(pattern: str) -> UsageError:
    """The one-line error for a glob (or ``models``' pattern) that matches no model."""
    return UsageError(f"no model matches '{pattern}'")


def glob_of_shaped(source: str, named: Sequence[str], hint: str) -> UsageError:
    """The one-line error for a glob of a source recognised by its shape (``nas:*``, ``file:*``): it has no list of
    names to match; its models are named one at a time, as its ``hint`` says."""
    return UsageError(
        f"a glob matches {' and '.join(named)} models, not {source} ones: name {source} models one at a time, as {hint}"
    )


def unknown_glob_source(source: str, named: Sequence[str]) -> UsageError:
    """The one-line error for a glob whose prefix ``source`` names no source (``nope:*``)."""
    return UsageError(f"unknown model source '{source}'; use one of: {', '.join(named)}")


def not_of_source(source: str, text: str, hint: str) -> UsageError:
    """The one-line error for a spec whose prefix names a source recognised by its shape and whose rest ``text`` is
    not of that shape (``nas:mbv3``, ``file:resnet``); a source without a hint of its own (``pt2``, ``torchscript``,
    ``pickle``: the model files' formats) asks for a model file."""
    return UsageError(f"'{source}:{text}' is not a {source} model: give {hint or 'a model file of that format'}")


def empty_name(text: str) -> UsageError:
    """The one-line error for a model ``text`` that names a source and no model (``''``, ``timm:``)."""
    return UsageError(f"empty model name in '{text}'")


def a_folder(text: str) -> UsageError:
    """The one-line error for a model ``text`` that names a folder (of model files, most likely): a file in it, or a
    glob of its files."""
    return UsageError(f"{text} is a folder: name a model file in it, or a glob such as '{text.rstrip('/')}/*.onnx'")


def unknown_source(source: str, text: str, named: Sequence[str], hints: Sequence[str]) -> UsageError:
    """The one-line error for a model ``text`` whose prefix ``source`` names no source: the ``named`` sources (those
    addressed as ``source:NAME``) and the ``hints`` of those recognised by their shape ("a .py file")."""
    choices = ", ".join(named) + "".join(f", or {hint}" for hint in hints)
    return UsageError(f"unknown model source '{source}' in '{text}'; use one of: {choices}")
