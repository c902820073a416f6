"""Model zoo: turn a model spec (``torchvision:NAME``, ``timm:NAME``, ``path/file.py:factory``, a model file such as
``path/model.onnx``, ``archs.jsonl:ID``) into an ``nn.Module`` at a resolution, through the registered model sources
(``utilscope.models.sources``, ``utilscope.models.model_files``). A spec's ``id`` is how stores key the model:
``torchvision:resnet50``; a factory file's names its resolved path and content
(``file:/abs/path/file.py:factory#<sha256 prefix>``), a model file's too (``onnx:/abs/path/model.onnx#<sha256
prefix>``), a NAS architecture's its space and record (``nas:mbv3:<ID>``).

Weights are always random: nothing is downloaded. Each model also has a *native* input resolution, which its
source gives (the crop size of torchvision's default weights, timm's pretrained ``input_size``, ...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from utilscope.errors import ModelError, UsageError, describe
from utilscope.files import is_folder
from utilscope.limits import MAX_RESOLUTION, MIN_RESOLUTION, check_resolution  # noqa: F401  (zoo's names too)
from utilscope.models import model_files  # noqa: F401  (registers the model-file sources after the built-ins)
from utilscope.models.sources import (
    REPARAM,
    ModelSource,
    a_folder,
    empty_name,
    glob_of_shaped,
    is_glob,
    matching,
    model_sources,
    module_channels,
    no_match,
    not_of_source,
    unknown_glob_source,
    unknown_model,
    unknown_source,
)

REPARAM_METHODS = ("fuse", "reparameterize", "switch_to_deploy")  # what timm's reparameterize_model calls


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model name: ``source`` is a registered source's name, ``name`` the model's name within it;
    ``reparam``: built reparameterized (``timm:mobileone_s0+reparam``), a network of its own in a store."""

    source: str
    name: str
    reparam: bool = False

    @property
    def id(self) -> str:
        return f"{self.source}:{self.name}{REPARAM if self.reparam else ''}"

    def __str__(self) -> str:
        return self.id


def _named_sources() -> dict[str, ModelSource]:
    """The sources addressed as ``source:NAME`` (the others are recognised by the shape of their specs)."""
    return {source.name: source for source in model_sources().values() if source.match is None}


def _bare_sources() -> list[ModelSource]:
    return [source for source in model_sources().values() if source.bare_names]


def _unknown(text: str, sources: Sequence[ModelSource], name: str) -> UsageError:
    if is_folder(text):  # a folder of model files, named without a path separator
        return a_folder(text)
    return unknown_model(text, {source.name: source.list_names() for source in sources}, name)


def _unknown_source(source: str, text: str) -> UsageError:
    hints = [s.hint for s in model_sources().values() if s.match is not None and s.hint]
    return unknown_source(source, text, list(_named_sources()), hints)


def parse_spec(text: str) -> ModelSpec:
    """Resolve a model string. A bare NAME tries torchvision first, then timm; a spec a source recognises by its
    shape needs no prefix (``file:``/``nas:`` are optional). ``archs.jsonl:ID`` is the architecture ``ID`` of a
    file written by ``utilscope nas sample``. A ``+reparam`` suffix asks for the model reparameterized."""
    text = text.strip()
    if text.endswith(REPARAM):
        return dataclasses.replace(parse_spec(text.removesuffix(REPARAM)), reparam=True)
    shaped = [source for source in model_sources().values() if source.match is not None]
    prefixed = next((source for source in shaped if text.startswith(f"{source.name}:")), None)
    for source in shaped:
        text = text.removeprefix(f"{source.name}:")
    for source in shaped:
        name = source.match(text)
        if name is not None:
            return ModelSpec(source.name, name)
    if prefixed is not None:  # "nas:mbv3": the prefix names the source, and its spec is not of that shape
        raise not_of_source(prefixed.name, text, prefixed.hint)
    prefix, sep, name = text.partition(":")
    if not sep:
        prefix, name = "", text
    named = _named_sources()
    if prefix and prefix not in named:
        raise _unknown_source(prefix, text)
    if not name:
        raise empty_name(text)
    sources = [named[prefix]] if prefix else _bare_sources()
    for source in sources:
        if source.exists(name):
            return ModelSpec(source.name, name)
    raise _unknown(text, sources, name)


def list_models(pattern: str = "torchvision:*") -> list[str]:
    """Model ids matching a glob: ``torchvision:*``, ``timm:efficientnet*``; a bare glob searches both; a glob of
    model files (``exports/*.onnx``) names the files it matches."""
    files = _expand_files(pattern)
    if files is not None:
        return files
    prefix, sep, glob = pattern.partition(":")
    if not sep:
        prefix, glob = "", pattern
    named = _named_sources()
    if prefix in model_sources() and prefix not in named:  # nas:, file:: no list of names to match
        raise glob_of_shaped(prefix, list(named), model_sources().get(prefix).hint)
    if prefix and prefix not in named:
        raise unknown_glob_source(prefix, list(named))
    sources = [named[prefix]] if prefix else _bare_sources()
    return [f"{s.name}:{n}" for s in sources for n in matching(s.list_names(), glob)]


def _expand_files(pattern: str) -> list[str] | None:
    """The ids of the files a glob of a source's shape names (model files), or None when no source expands it."""
    text = pattern.strip()
    for source in model_sources().values():
        if source.match is not None:
            text = text.removeprefix(f"{source.name}:")
    for source in model_sources().values():
        paths = source.expand(text) if source.expand is not None else None
        if paths is not None:
            return [_file_id(path) for path in paths]
    return None


def _file_id(path: str) -> str:
    """A matched file's id; a file that cannot be used as it is stays its path, so that the command that uses it
    names it and its reason among the others' results (one bad file never hides the rest of a glob)."""
    try:
        return parse_spec(path).id
    except UsageError:
        return path


def model_names(spec: str) -> list[str]:
    """The models ``spec`` names: a glob's matches (``timm:resnet*``; none is a UsageError), else ``[spec]``."""
    if not is_glob(spec):
        return [spec]
    names = list_models(spec)
    if not names:
        raise no_match(spec)
    return names


def expand_models(patterns: list[str]) -> list[ModelSpec]:
    """Specs for a list of names and globs, in order, without duplicates. A glob matching nothing is an error."""
    specs: dict[str, ModelSpec] = {}
    for pattern in patterns:
        if is_glob(pattern):
            matched = list_models(pattern)
            if not matched:
                raise no_match(pattern)
            specs.update({m: parse_spec(m) for m in matched})
        else:
            spec = parse_spec(pattern)
            specs[spec.id] = spec
    return list(specs.values())


def source_family(model_id: str) -> str | None:
    """The family a model's source gives it (a NAS architecture's is "NAS <space>"), or None."""
    prefix, _, name = model_id.partition(":")
    source = model_sources().get(prefix, None)
    return source.family(name) if source is not None else None


def model_record(spec: ModelSpec) -> dict | None:
    """What a store keeps of the model so it is known without its file (None for most sources)."""
    return model_sources().get(spec.source).record(spec.name)


def portable_spec(spec: ModelSpec) -> str:
    """A spec another process parses back to this model (a NAS architecture: its file and id)."""
    portable = model_sources().get(spec.source).portable(spec.name)
    return f"{spec.source}:{portable}{REPARAM if spec.reparam else ''}"


def check_model(spec: ModelSpec) -> None:
    """Check what can be checked without building the model (a factory file imported and its factory found);
    raises a UsageError (a ModelError for a file that fails to import) naming the problem."""
    model_sources().get(spec.source).check(spec.name)


def check_input(spec: ModelSpec, batch: int | None = None, resolution: int | None = None) -> None:
    """Whether the model takes a batch of ``batch`` images of ``resolution`` pixels (None: either): a model file
    whose input shape is fixed runs only at that shape; raises a UsageError saying what it takes."""
    model_sources().get(spec.source).check_input(spec.name, batch, resolution)


def fixed_batch(spec: ModelSpec) -> int | None:
    """The only batch size the model runs at (a model file whose input's batch is fixed), None for any."""
    return model_sources().get(spec.source).fixed_batch(spec.name)


def native_resolution(spec: ModelSpec) -> int:
    """The input resolution the model was designed for."""
    return model_sources().get(spec.source).native_resolution(spec.name)


def input_channels(module: nn.Module, spec: ModelSpec | None = None) -> int:
    """The channels of the input utilscope feeds ``module`` (batch x channels x side x side), the model of ``spec``
    as built (None: a module of the user's, given as is), by the one rule of ``models.sources``: a zoo's model takes
    RGB images (3 channels), a user's model its first 2-D convolution's input channels (else 3), a model file those
    its input records."""
    if spec is None:
        return module_channels(module)
    return model_sources().get(spec.source).input_channels(spec.name, module)


def resolve_resolution(spec: ModelSpec, resolution: int | None) -> int:
    """The requested resolution, checked, or the model's native one when none is given."""
    return check_resolution(native_resolution(spec) if resolution is None else resolution)


def _construct(spec: ModelSpec, resolution: int) -> nn.Module:
    """Call the model's builder (and reparameterize it for a ``+reparam`` spec); the caller chooses the device and
    init mode."""
    module = model_sources().get(spec.source).build(spec.name, resolution)
    return reparameterize(module, spec) if spec.reparam else module


def reparameterizable(module: nn.Module) -> bool:
    """Whether ``reparameterize`` changes the model: a submodule has one of the ``REPARAM_METHODS``."""
    return any(hasattr(child, name) for child in list(module.modules())[1:] for name in REPARAM_METHODS)


def reparameterize(module: nn.Module, spec: ModelSpec) -> nn.Module:
    """The model with its training-time branches merged for inference, by timm's ``reparameterize_model`` (what
    timm's benchmark ``--reparam`` does: MobileOne, RepVGG, FastViT, RepGhost, GhostNetV3, ...); a UsageError for
    a model with nothing to reparameterize."""
    from timm.utils import reparameterize_model

    if not reparameterizable(module):
        raise UsageError(f"{spec.source}:{spec.name} has nothing to reparameterize: drop {REPARAM}")
    return reparameterize_model(module.eval(), inplace=True)


def build_model(spec: ModelSpec, resolution: int | None = None) -> nn.Module:
    """Build the model on the CPU with freshly initialized random weights, in eval mode."""
    resolution = resolve_resolution(spec, resolution)
    try:
        return _construct(spec, resolution).eval()
    except UsageError:
        raise
    except (Exception, SystemExit) as exc:  # a factory that calls sys.exit is a model that cannot be built
        raise ModelError(f"building {spec} raised {describe(exc)}") from exc


class _SkipInit(TorchFunctionMode):
    """Skip weight initialization (values do not matter when the model is only traced for shapes): the init
    functions on any tensor, and on a meta tensor the in-place arithmetic they are written with (timm's
    ``trunc_normal_`` scales, shifts and clamps what ``uniform_`` drew: meta's ``clamp_`` is a Python decomposition,
    about 2 ms a call and three fifths of building a timm model on meta), which changes neither its shape nor its
    strides nor its dtype, and computes nothing there."""

    _INIT_FUNCS = frozenset(
        "uniform_ normal_ zero_ fill_ erfinv_ trunc_normal_ constant_ ones_ zeros_ orthogonal_ "
        "kaiming_uniform_ kaiming_normal_ xavier_uniform_ xavier_normal_".split()
    )
    _META_VALUE_OPS = frozenset("add_ sub_ mul_ div_ clamp_ clamp_min_ clamp_max_ copy_".split())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = args[0] if args else kwargs.get("tensor")
        name = getattr(func, "__name__", "")
        if isinstance(target, torch.Tensor) and (
            name in self._INIT_FUNCS or (name in self._META_VALUE_OPS and target.is_meta)
        ):
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
    except (Exception, SystemExit) as exc:  # a factory that calls sys.exit is a model that cannot be built
        raise ModelError(f"building {spec} raised {describe(exc)}") from exc


def build_on_meta(spec: ModelSpec, resolution: int | None = None) -> tuple[nn.Module, str]:
    """Build the model with its parameters on the meta device (no memory; weight initialization skipped, which on
    meta computes nothing yet went through every init function: ResNet-RS-420's build took 1.0 s, now 0.3 s).

    Returns the model and where it was built: ``meta`` directly, or ``cpu`` when the builder needs real
    tensors (torchvision's RegNets compute widths with tensor ops); then it is built uninitialized and moved.
    """
    resolution = resolve_resolution(spec, resolution)
    try:
        with torch.device("meta"), _SkipInit():
            return _construct(spec, resolution).eval(), "meta"
    except UsageError:
        raise
    except (Exception, SystemExit):
        pass  # retried on the CPU: a real failure surfaces there with its message
    return build_uninitialized(spec, resolution).to("meta"), "cpu"
