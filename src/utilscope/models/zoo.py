"""Model zoo: turn ``torchvision:NAME``, ``timm:NAME`` or ``path/file.py:factory`` into an ``nn.Module``.

Weights are always random (torchvision ``weights=None``, timm ``pretrained=False``): nothing is downloaded.
Each model also has a *native* input resolution: the crop size of torchvision's default weights, timm's
pretrained config ``input_size``, or for a factory file its ``RESOLUTION`` constant (224 if absent).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from utilscope.errors import ModelError, UsageError, describe

SOURCES = ("torchvision", "timm")
MAX_RESOLUTION = 4096
DEFAULT_FILE_RESOLUTION = 224

# torchvision builders whose architecture is fixed to one input size: the keyword that sets it.
_TORCHVISION_SIZE_KWARG: dict[str, Callable[[int], tuple[str, object]]] = {
    "vit_": lambda res: ("image_size", res),
    "maxvit_": lambda res: ("input_size", (res, res)),
}


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model name: ``source`` is torchvision, timm or file; ``name`` the builder or path:factory."""

    source: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.source}:{self.name}"

    def __str__(self) -> str:
        return self.id


@functools.cache
def _torchvision_names() -> tuple[str, ...]:
    import torchvision.models as tvm

    return tuple(tvm.list_models(module=tvm))


@functools.cache
def _timm_names() -> tuple[str, ...]:
    import timm

    return tuple(timm.list_models())


def _names(source: str) -> tuple[str, ...]:
    return _torchvision_names() if source == "torchvision" else _timm_names()


def _unknown(text: str, sources: tuple[str, ...], name: str) -> UsageError:
    scored = [
        (difflib.SequenceMatcher(None, name, candidate).ratio(), f"{source}:{candidate}")
        for source in sources
        for candidate in difflib.get_close_matches(name, _names(source), n=4, cutoff=0.5)
    ]
    close = [spec for _, spec in sorted(scored, key=lambda item: -item[0])[:4]]
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    return UsageError(f"unknown model '{text}'{hint}")


def _exists(source: str, name: str) -> bool:
    if source == "timm":
        import timm

        return timm.is_model(name)  # also accepts pretrained tags: resnet50.a1_in1k
    return name in _names(source)


def parse_spec(text: str) -> ModelSpec:
    """Resolve a model string. A bare NAME tries torchvision first, then timm; ``file:``/``nas:`` prefixes are
    optional. ``archs.jsonl:ID`` is the architecture ``ID`` of a file written by ``utilscope nas sample``."""
    text = text.strip().removeprefix("file:").removeprefix("nas:")
    if ".jsonl:" in text:
        path, _, arch = text.rpartition(":")
        nas_record(ModelSpec("nas", f"{path}:{arch}"))  # checks the file and the id
        return ModelSpec("nas", f"{path}:{arch}")
    if ".py:" in text or text.endswith(".py"):
        path, _, factory = text.rpartition(":") if ".py:" in text else (text, "", "")
        if not factory:
            raise UsageError(f"factory file model '{text}' needs a factory name: path/to/file.py:factory")
        if not Path(path).is_file():
            raise UsageError(f"factory file not found: {path}")
        return ModelSpec("file", f"{path}:{factory}")
    source, sep, name = text.partition(":")
    if not sep:
        source, name = "", text
    if source and source not in SOURCES:
        raise UsageError(
            f"unknown model source '{source}' in '{text}'; use one of: {', '.join(SOURCES)}, or a .py file"
        )
    if not name:
        raise UsageError(f"empty model name in '{text}'")
    sources = (source,) if source else SOURCES
    for candidate in sources:
        if _exists(candidate, name):
            return ModelSpec(candidate, name)
    raise _unknown(text, sources, name)


def list_models(pattern: str = "torchvision:*") -> list[str]:
    """Model ids matching a glob: ``torchvision:*``, ``timm:efficientnet*``; a bare glob searches both."""
    source, sep, glob = pattern.partition(":")
    if not sep:
        source, glob = "", pattern
    if source and source not in SOURCES:
        raise UsageError(f"unknown model source '{source}'; use one of: {', '.join(SOURCES)}")
    sources = (source,) if source else SOURCES
    return [f"{s}:{n}" for s in sources for n in _names(s) if fnmatch.fnmatchcase(n, glob)]


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[") and ".py:" not in pattern


def expand_models(patterns: list[str]) -> list[ModelSpec]:
    """Specs for a list of names and globs, in order, without duplicates. A glob matching nothing is an error."""
    specs: dict[str, ModelSpec] = {}
    for pattern in patterns:
        if is_glob(pattern):
            matched = list_models(pattern)
            if not matched:
                raise UsageError(f"no model matches '{pattern}'")
            specs.update({m: parse_spec(m) for m in matched})
        else:
            spec = parse_spec(pattern)
            specs[spec.id] = spec
    return list(specs.values())


@functools.cache
def _nas_file(path: str, mtime_ns: int) -> dict[str, dict]:
    from utilscope.nas.sampler import load_jsonl

    return {arch["id"]: arch for arch in load_jsonl(path) if "id" in arch}


def nas_record(spec: ModelSpec) -> dict:
    """The architecture record behind a ``nas`` spec (``path.jsonl:ID``)."""
    path, _, arch = spec.name.rpartition(":")
    if not Path(path).is_file():
        raise UsageError(f"architecture file not found: {path}")
    records = _nas_file(path, Path(path).stat().st_mtime_ns)
    if arch not in records:
        raise UsageError(f"no architecture with id {arch!r} in {path} ({len(records)} architectures)")
    return records[arch]


def native_resolution(spec: ModelSpec) -> int:
    """The input resolution the model was designed for."""
    if spec.source == "nas":
        from utilscope.nas.space import get_space

        record = nas_record(spec)
        return get_space(record["space"]).resolution(record)
    if spec.source == "torchvision":
        import torchvision.models as tvm

        crop = tvm.get_model_weights(spec.name).DEFAULT.transforms.keywords["crop_size"]
        return int(crop)
    if spec.source == "timm":
        from timm.models import get_pretrained_cfg

        cfg = get_pretrained_cfg(spec.name)
        return int(cfg.input_size[-1]) if cfg is not None else 224
    module = _load_factory_module(spec.name.rpartition(":")[0])
    return int(getattr(module, "RESOLUTION", DEFAULT_FILE_RESOLUTION))


def check_resolution(resolution: int) -> int:
    if not isinstance(resolution, int) or isinstance(resolution, bool):
        raise UsageError(f"resolution must be an integer, got {resolution!r}")
    if not 1 <= resolution <= MAX_RESOLUTION:
        raise UsageError(f"resolution must be between 1 and {MAX_RESOLUTION} pixels, got {resolution}")
    return resolution


def resolve_resolution(spec: ModelSpec, resolution: int | None) -> int:
    """The requested resolution, checked, or the model's native one when none is given."""
    return check_resolution(native_resolution(spec) if resolution is None else resolution)


@functools.cache
def _load_factory_module(path: str):
    module_name = f"utilscope_factory_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import factory file {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ModelError(f"importing {path} raised {describe(exc)}") from exc
    sys.modules[module_name] = module
    return module


def _construct(spec: ModelSpec, resolution: int) -> nn.Module:
    """Call the model's builder; the caller chooses the device and init mode."""
    if spec.source == "torchvision":
        import torchvision.models as tvm

        kwargs = dict(kw(resolution) for prefix, kw in _TORCHVISION_SIZE_KWARG.items() if spec.name.startswith(prefix))
        return tvm.get_model(spec.name, weights=None, **kwargs)
    if spec.source == "timm":
        import timm
        from timm.models import get_pretrained_cfg

        cfg = get_pretrained_cfg(spec.name)
        kwargs = {"img_size": resolution} if cfg is not None and cfg.fixed_input_size else {}
        return timm.create_model(spec.name, pretrained=False, **kwargs)
    if spec.source == "nas":
        from utilscope.nas.space import get_space

        record = nas_record(spec)
        return get_space(record["space"]).build(record)
    path, _, factory_name = spec.name.rpartition(":")
    factory = getattr(_load_factory_module(path), factory_name, None)
    if not callable(factory):
        raise UsageError(f"{path} has no callable '{factory_name}'")
    model = factory()
    if not isinstance(model, nn.Module):
        raise ModelError(f"factory {spec.name} returned {type(model).__name__}, not an nn.Module")
    return model


def build_model(spec: ModelSpec, resolution: int | None = None) -> nn.Module:
    """Build the model on the CPU with freshly initialized random weights, in eval mode."""
    resolution = resolve_resolution(spec, resolution)
    try:
        return _construct(spec, resolution).eval()
    except UsageError:
        raise
    except Exception as exc:
        raise ModelError(f"building {spec} raised {describe(exc)}") from exc


class _SkipInit(TorchFunctionMode):
    """Skip weight initialization (values do not matter when the model is only traced for shapes)."""

    _INIT_FUNCS = frozenset(
        "uniform_ normal_ zero_ fill_ erfinv_ trunc_normal_ constant_ ones_ zeros_ orthogonal_ "
        "kaiming_uniform_ kaiming_normal_ xavier_uniform_ xavier_normal_".split()
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")
        if getattr(func, "__name__", "") in self._INIT_FUNCS and isinstance(target, torch.Tensor):
            return target
        return func(*args, **kwargs)


def build_uninitialized(spec: ModelSpec, resolution: int | None = None) -> nn.Module:
    """Build the model on the CPU without initializing its weights: for tracing shapes, not for numbers."""
    resolution = resolve_resolution(spec, resolution)
    try:
        with _SkipInit():
            return _construct(spec, resolution).eval()
    except UsageError:
        raise
    except Exception as exc:
        raise ModelError(f"building {spec} raised {describe(exc)}") from exc


def build_on_meta(spec: ModelSpec, resolution: int | None = None) -> tuple[nn.Module, str]:
    """Build the model with its parameters on the meta device (no memory, no init time).

    Returns the model and where it was built: ``meta`` directly, or ``cpu`` when the builder needs real
    tensors (torchvision's RegNets compute widths with tensor ops); then it is built uninitialized and moved.
    """
    resolution = resolve_resolution(spec, resolution)
    try:
        with torch.device("meta"):
            return _construct(spec, resolution).eval(), "meta"
    except UsageError:
        raise
    except Exception:
        pass  # retried on the CPU: a real failure surfaces there with its message
    return build_uninitialized(spec, resolution).to("meta"), "cpu"
