"""What a search space is: sample, validate, build and count architectures (JSON-serializable records).

Importing it imports no torch, pandas or numpy (a command line's parser names the spaces and strategies): a space
module imports what it builds with.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from utilscope.errors import UsageError
from utilscope.registry import Registry

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from torch import nn

Arch = dict  # a JSON-serializable architecture record; "space" names its search space
PASSED_THROUGH = ("id", "seed")  # stored next to a record by the sampler; not part of the architecture


@dataclass(frozen=True)
class Complexity:
    """Analytic cost of one sample: flops = 2 x MACs of convs and linears (the counting engine's convention)."""

    flops: int
    params: int


class Layer(NamedTuple):
    """One entry of a space's latency table: a stem, block or head configuration and its input shape.

    Networks of the space are exactly the sequence of their layers, so per-layer latencies compose per network.
    The last number of ``config`` is the input size, and the layer's module depends on the rest only
    (``nas.population`` builds a module once for all input sizes).
    """

    kind: str  # "stem" | "block" | "head"
    config: tuple  # the space's parameters of this layer, input size included (hashable, JSON-friendly)
    in_channels: int
    in_size: int  # square input's side in pixels

    @property
    def key(self) -> str:
        return layer_key(self.kind, self.config)


@functools.lru_cache(maxsize=65536)
def layer_key(kind: str, config: tuple) -> str:
    """``kind(v1,v2,...)``: the table's key for a layer (cached: prediction looks up many repeated layers)."""
    return f"{kind}({','.join(map(str, config))})"


class LayerCost(NamedTuple):
    """Analytic work of one layer at batch 1: FLOPs (2 x MAC), parameters, and the activation elements its
    convolutions read and write (a proxy of its memory traffic)."""

    flops: int
    params: int
    activations: int


def parse_layer_key(key: str) -> tuple[str, tuple]:
    """``block(24,40,5,4,2,relu,0,56)`` -> ("block", (24, 40, 5, 4, 2, "relu", 0, 56))."""
    kind, _, rest = key.partition("(")
    values = rest.rstrip(")").split(",") if rest.rstrip(")") else []
    return kind, tuple(int(v) if v.lstrip("-").isdigit() else v for v in values)


@dataclass(frozen=True)
class ArchSummary:
    """An architecture's layers, cost and design features, from one validation."""

    layers: list[Layer]
    complexity: Complexity
    features: dict[str, float]


@dataclass(frozen=True)
class Networks:
    """What prediction needs of many architectures, each validated once: the distinct layers they are made of (with
    their analytic costs), which of them each network holds and how many times, and per network its FLOPs and design
    features. The (network, layer, count) pairs come network by network, each network's in its layers' order."""

    layers: list[Layer]  # distinct, in first-seen order
    costs: list[LayerCost]  # of each layer, as the space's ``layer_cost`` gives it
    network: np.ndarray  # per pair: the network's position among the architectures
    layer: np.ndarray  # per pair: the layer's position in ``layers``
    count: np.ndarray  # per pair: how many times the network holds the layer
    flops: np.ndarray  # per network (int64)
    features: pd.DataFrame  # per network, one column per design feature


def networks_of(layer_cost: Callable[[str, tuple], LayerCost], summaries: list[ArchSummary]) -> Networks:
    """``Networks`` from per-architecture summaries (layers costed by the space's ``layer_cost``): each layer of each
    network is a pair of count 1."""
    import numpy as np
    import pandas as pd

    distinct: dict[Layer, int] = {}  # layer -> its position among the distinct layers
    positions = [distinct.setdefault(layer, len(distinct)) for summary in summaries for layer in summary.layers]
    network = np.repeat(np.arange(len(summaries)), [len(summary.layers) for summary in summaries])
    return Networks(
        layers=list(distinct),
        costs=[layer_cost(layer.kind, layer.config) for layer in distinct],
        network=network,
        layer=np.array(positions, dtype=np.intp),
        count=np.ones(len(positions), dtype=np.int64),
        flops=np.array([summary.complexity.flops for summary in summaries], dtype=np.int64),
        features=pd.DataFrame([summary.features for summary in summaries], index=range(len(summaries))),
    )


@dataclass(frozen=True)
class FunctionSpace:
    """A ``SearchSpace`` made of a space module's functions: each field is the method of the same name."""

    name: str
    sample: Callable[[np.random.Generator], Arch]
    validate: Callable[[Arch], Arch]
    build: Callable[[Arch], nn.Module]
    complexity: Callable[[Arch], Complexity]
    features: Callable[[Arch], dict[str, float]]
    layers: Callable[[Arch], list[Layer]]
    build_layer: Callable[[Layer], nn.Module]
    covering_archs: Callable[[], list[Arch]]
    networks: Callable[[list[Arch]], Networks]
    layer_cost: Callable[[str, tuple], LayerCost]

    def resolution(self, arch: Arch) -> int:
        """The validated record's ``resolution``."""
        return self.validate(arch)["resolution"]

    @classmethod
    def of_module(cls, name: str, namespace: dict) -> FunctionSpace:
        """The space whose methods are the functions of the same names in a module's ``globals()``."""
        methods = [f.name for f in dataclasses.fields(cls) if f.name != "name"]
        missing = [method for method in methods if not callable(namespace.get(method))]
        if missing:
            raise TypeError(f"search space {name} lacks the functions {missing}")
        return cls(name, *(namespace[method] for method in methods))


class SearchSpace(Protocol):
    name: str

    def sample(self, rng: np.random.Generator) -> Arch:
        """One architecture drawn with ``rng`` (the only source of randomness)."""

    def validate(self, arch: Arch) -> Arch:
        """The record, checked and normalized; UsageError naming the bad field otherwise."""

    def build(self, arch: Arch) -> nn.Module:
        """The network, with random weights."""

    def resolution(self, arch: Arch) -> int:
        """The input resolution the architecture runs at."""

    def complexity(self, arch: Arch) -> Complexity:
        """FLOPs per sample and params without building the network; equal to the traced count (tested)."""

    def features(self, arch: Arch) -> dict[str, float]:
        """Numeric design choices (kernel sizes, widths, ...) for analysis and prediction."""

    def layers(self, arch: Arch) -> list[Layer]:
        """The network as its sequence of layers (stem, blocks, head), for the per-layer latency table."""

    def build_layer(self, layer: Layer) -> nn.Module:
        """One layer as a module taking ``(batch, layer.in_channels, layer.in_size, layer.in_size)``."""

    def covering_archs(self) -> list[Arch]:
        """Architectures whose layers together are every layer of the space, or [] when there are too many."""

    def networks(self, archs: list[Arch]) -> Networks:
        """Layers, FLOPs and features of many architectures, each record validated once (the predictor's path)."""

    def layer_cost(self, kind: str, config: tuple) -> LayerCost:
        """The analytic work of a layer (for estimating layers a latency table lacks)."""


SPACES: Registry[SearchSpace] = Registry("search space")


def register_space(space: SearchSpace) -> SearchSpace:
    return SPACES.add(space.name, space)


def field_error(space: str, field: str, expected: str, got) -> UsageError:
    return UsageError(f"{space} architecture field {field!r}: expected {expected}, got {got!r}")


def int_choice(space: str, value, field: str, choices: tuple[int, ...]) -> int:
    """``value`` as a plain int if it is one of ``choices`` (bools are not ints here); UsageError otherwise."""
    if type(value) is int and value in choices:  # the common case, without the slower abstract-class check
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) not in choices:
        raise field_error(space, field, f"one of {', '.join(map(str, choices))}", value)
    return int(value)


def check_fields(space: str, arch, fields: tuple[str, ...]) -> None:
    """A record is a dict with exactly ``fields`` (plus the sampler's id and seed) and the right space name."""
    if not isinstance(arch, dict):
        raise UsageError(f"a {space} architecture must be a JSON object with fields {', '.join(fields)}, got {arch!r}")
    missing = [field for field in fields if field not in arch]
    if missing:
        raise UsageError(f"{space} architecture is missing field(s) {', '.join(map(repr, missing))}")
    unknown = sorted(set(arch) - set(fields) - set(PASSED_THROUGH), key=str)
    if unknown:
        raise UsageError(
            f"{space} architecture has unknown field(s) {', '.join(map(repr, unknown))}; "
            f"its fields are {', '.join(fields)}"
        )
    if arch["space"] != space:
        raise field_error(space, "space", repr(space), arch["space"])


def arch_id(arch: Arch) -> str:
    """A stable identity: the hash of the canonical JSON of the record (without its id and sampling seed)."""
    canonical = json.dumps(
        {k: v for k, v in arch.items() if k not in ("id", "seed")}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
