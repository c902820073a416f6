"""Populations of a search space's architectures on any GPU of the spec table: ``utilscope predict``'s numbers for
each network, in one batched pass.

``predict`` of one network traces it on the meta device, turns each op into a row (``predict.predictor
.network_rows``), times the rows by the device profile's layer models, carries them to the target GPU by its
datasheet (``predict.transfer``), and adds ``gap_ms`` per row. Every one of those steps is per row, and a network of
a space is exactly the sequence of its layers (stem, blocks, head: ``SearchSpace.layers``), whose rows are the rows
of the layer traced alone. So a population's distinct layers are each built, traced and turned into rows once, all
their rows are timed and transferred in one call, and a network's latency is the sum of its layers' row times plus
``gap_ms`` per row: the number ``predict`` gives for the network (tested to float rounding), at a fraction of the
cost, since networks of a space share most of their layers.

Only the ``graph`` and ``eager`` backends compose so: the fused backends' rows depend on what the next layer does with
a layer's output (``counting.counter.fusion_savings``). On ``eager`` with a host profile (``predict.host``) each
layer also gives its host work and its kernels' end after its host work began (``Predictor.parts_eager``), and a
network's timeline chains its layers': its last kernel ends at ``max_l(host before l + that end of l + the device
time of the layers after l)``, as ``predict``'s per-kernel timeline does, within a percent (tested): the module
calls above a space's layers (its stages) are no layer's, and each layer's own containers are spread over its own
leaves, not the network's.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from utilscope.counting.autocast import autocast_tracer
from utilscope.counting.counter import check_dtype, trace_on_meta
from utilscope.counting.tracer import Tracer, shared_meta_memo
from utilscope.errors import UsageError
from utilscope.hardware.utilization import achieved_tflops, utilization
from utilscope.nas.space import Arch, Layer, SearchSpace
from utilscope.nas.spaces import get_space
from utilscope.predict.features import Gpu

COMPOSED_BACKENDS = ("graph", "eager")  # a network's time is its layers' (see the module's docstring)


@dataclass(frozen=True)
class LayerTimes:
    """What a network takes from one of its layers: the layer's rows' milliseconds on the target, summed; its rows
    (each launches a kernel: ``gap_ms`` each); its FLOPs at the batch size (2 x MACs, as ``count`` counts them)."""

    ms: float
    rows: int
    flops: int
    host_ms: float = 0.0  # eager with a host profile: the layer's host work
    ends_ms: float = 0.0  # ... and when its last kernel ends, after its host work began, on an idle GPU


@dataclass
class PopulationPredictor:
    """A device profile's predictor (``predict.fit_cache.load_predictor``) for one space, batch size, precision and
    target GPU (None: the profile's own), with the times of every layer it has met (a search asks again and again)."""

    predictor: object  # predict.predictor.Predictor
    space: SearchSpace
    batch: int
    precision: str
    target: Gpu | None = None
    backend: str = "graph"
    layers: dict[Layer, LayerTimes] = field(default_factory=dict, repr=False)
    modules: dict[tuple, torch.nn.Module] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in COMPOSED_BACKENDS:
            raise UsageError(
                f"a population is predicted on the {' or '.join(COMPOSED_BACKENDS)} backend, not {self.backend}: "
                "on a fused backend a layer's kernels depend on the next layer"
            )
        self.predictor.check_condition(self.precision, self.backend, True)

    @property
    def gpu(self) -> Gpu:
        return self.target or self.predictor.gpu

    @property
    def transferred_from(self) -> str:
        """The profile's GPU when the target is another one (predicted by transfer), else ""."""
        return "" if self.target is None or self.target == self.predictor.gpu else self.predictor.device

    def predict_frame(self, archs: list[Arch]) -> pd.DataFrame:
        """One row per architecture: id, gflops (per sample), latency_ms, samples_per_s and utilization (of the
        target's dense peak in the precision), as ``predict`` gives them for each network."""
        if not archs:
            raise UsageError("no architectures given")
        networks = self.space.networks(archs)
        self.time_layers([layer for layer in networks.layers if layer not in self.layers])
        times = [self.layers[layer] for layer in networks.layers]
        each = np.repeat(np.arange(len(networks.layer)), networks.count)  # every layer of every network
        network, layer = networks.network[each], networks.layer[each]
        size = len(archs)
        ms = np.bincount(network, weights=np.array([t.ms for t in times])[layer], minlength=size)
        rows = np.bincount(network, weights=np.array([t.rows for t in times], dtype=float)[layer], minlength=size)
        flops = np.bincount(network, weights=np.array([t.flops for t in times], dtype=float)[layer], minlength=size)
        latency_ms = per_forward_ms = self.predictor.with_gaps(ms, rows)
        if self.eager_host:
            device_ms = np.array([t.ms + self.predictor.gap_ms * t.rows for t in times])[layer]
            host = np.array([t.host_ms for t in times])[layer]
            ends = np.array([t.ends_ms for t in times])[layer]
            latency_ms, per_forward_ms = self.eager_ms(network, device_ms, host, ends, size)
        return pd.DataFrame(
            {
                "id": [arch.get("id", "") for arch in archs],
                "gflops": flops / self.batch / 1e9,
                "latency_ms": latency_ms,
                "samples_per_s": self.batch / per_forward_ms * 1e3,
                "utilization": utilization(achieved_tflops(flops, per_forward_ms), self.gpu.peak_flops / 1e12),
            }
        )

    @property
    def eager_host(self) -> bool:
        """Whether eager's host side is modelled (a host profile: ``predict.host``)."""
        return self.backend == "eager" and self.predictor.host is not None

    def eager_ms(self, network, device_ms, host_ms, ends_ms, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Each network's lone-forward latency and back-to-back forward time from its layers' (in order, each
        with its network's index): the module's docstring; the network's own module call is host work first."""
        from utilscope.predict.host import FORWARD, MODULE

        call_ms = {kind: self.predictor.host.call_ms(kind) for kind in (MODULE, FORWARD)}
        frame = pd.DataFrame({"network": network, "device": device_ms, "host": host_ms, "ends": ends_ms})
        grouped = frame.groupby("network", sort=False)
        before = grouped["host"].cumsum() - frame["host"] + call_ms[MODULE]
        after = grouped["device"].transform("sum") - grouped["device"].cumsum()  # the layers after each
        last_kernel = (before + frame["ends"] + after).groupby(frame["network"]).max()
        host_total = grouped["host"].sum() + call_ms[MODULE]
        device_total = grouped["device"].sum()
        index = np.arange(size)
        lone = np.maximum(last_kernel, host_total).reindex(index).to_numpy() + call_ms[FORWARD]
        return lone, np.maximum(device_total, host_total).reindex(index).to_numpy()

    def time_layers(self, layers: list[Layer]) -> None:
        """Trace each layer, and time and transfer all their rows in one call of the layer models."""
        if not layers:
            return
        gc.freeze()  # as ``predict`` does: the long-lived objects are not rescanned by the traces' collections
        try:
            with shared_meta_memo():
                traced = [self.trace(layer) for layer in layers]
        finally:
            gc.unfreeze()
        if self.eager_host:  # the host's side too, from the same layer-model call
            timed = self.predictor.parts_eager(traced, self.target)
        else:
            timed = [(*piece, 0.0, 0.0) for piece in self.predictor.parts_ms(traced, self.backend, self.target)]
        for layer, recorded, (layer_ms, layer_rows, host_ms, ends_ms) in zip(layers, traced, timed, strict=True):
            flops = sum(event.cost.flops for event in recorded.events)
            self.layers[layer] = LayerTimes(float(layer_ms), int(layer_rows), int(flops), host_ms, ends_ms)

    def module(self, layer: Layer) -> torch.nn.Module:
        """The layer's module on the meta device, built once for all input sizes: in both spaces a layer's module
        is its configuration's but for the last number, its input size (``Layer``)."""
        key = (layer.kind, layer.config[:-1])
        if key not in self.modules:
            with torch.device("meta"):
                self.modules[key] = self.space.build_layer(layer)
        return self.modules[key]

    def trace(self, layer: Layer):
        """The layer alone on the meta device, as ``count_traced`` traces a network for ``predict``: in the precision
        (amp: under autocast's casts when the profile timed them), channels_last."""
        parsed = self.predictor.check_precision(self.precision)
        dtype, tracer_class = check_dtype(parsed.count_dtype), Tracer
        if parsed.autocast_dtype is not None and self.predictor.timed_casts:
            tracer_class, dtype = autocast_tracer(dtype), torch.float32
        module = self.module(layer)
        shape = (self.batch, layer.in_channels, layer.in_size, layer.in_size)
        return trace_on_meta(module, shape, dtype, True, tracer_class)


def population_predictor(
    space: str, gpu: str, batch: int, precision: str = "fp16", profile: str | None = None, backend: str = "graph"
) -> PopulationPredictor:
    """The ``PopulationPredictor`` of a GPU of the spec table (one, not ``all`` or a list) from the device profile
    ``predict`` would use (``profile``: a file instead): its own GPU's, else one transferred by datasheet. UsageError
    for a precision no profile expresses, or one the GPU lacks."""
    from utilscope.hardware.specs import gpu_names
    from utilscope.limits import check_batch
    from utilscope.predict import fit_cache, profiles, selection

    check_batch(batch)
    names = gpu_names(gpu)
    if len(names) != 1 or names[0].casefold() == "all":
        raise UsageError(f"--gpu {gpu!r}: a population is predicted for one GPU of the spec table at a time")
    path = selection.select_profile(gpu, profile, precision, "graph", True)
    precision = profiles.predicted_as(precision, profiles.read(path))  # fp32_strict's math on a GPU without TF32
    predictor = fit_cache.load_predictor(path)
    targets = selection.transfer_targets(gpu, predictor)
    target = targets[0] if targets else None
    return PopulationPredictor(predictor, get_space(space), batch, precision, target, backend)


@dataclass(frozen=True)
class PopulationResult:
    """``utilscope nas predict``'s answer: one row per architecture (``frame``), the GPU, and which predictor gave
    it: ``table`` (a NAS profile's latency table and correction, ``nas.table_predictor``) or ``general``
    (``predict``'s device profile, transferred by datasheet when ``transferred_from`` names its GPU)."""

    space: str
    gpu: str
    batch: int
    precision: str
    predictor: str  # "table" | "general"
    profile: str
    transferred_from: str
    frame: pd.DataFrame
    backend: str = "graph"
    host: str = ""  # eager: the host assumed (``HostProfile.describe``); "" where none is modelled

    def to_dict(self) -> dict:
        return {
            "space": self.space,
            "device": self.gpu,
            "batch": self.batch,
            "precision": self.precision,
            "predictor": self.predictor,
            "profile": self.profile,
            "transferred_from": self.transferred_from or None,
            "backend": self.backend,
            "host": self.host or None,
            "predictions": self.frame.to_dict(orient="records"),
        }


def predict_population(
    path: str,
    gpu: str | None,
    batch: int,
    precision: str = "fp16",
    profile: str | None = None,
    backend: str = "graph",
) -> PopulationResult:
    """The architectures of a JSONL file on a GPU: by the NAS profile given (``profile``) or shipped for the GPU and
    space in that precision (the H200's, fp16, measured on ``graph``), else, and on ``eager``, by ``predict``'s
    general model (``population_predictor``), eager with the host side where a host profile is shipped."""
    from utilscope.limits import check_batch
    from utilscope.nas.table_predictor import load_population, select_table_predictor, shipped_table_predictor

    check_batch(batch)
    space, archs = load_population(path)
    if gpu is None and profile is None:
        raise UsageError("give --gpu (a GPU of the spec table) or --profile (a profile from `utilscope nas fit`)")
    if backend != "graph" and profile is not None:
        raise UsageError(f"a NAS profile's latency table was measured on graph: predict {backend} without --profile")
    table = None
    if backend == "graph":
        table = (
            select_table_predictor(profile, gpu, space)
            if profile is not None
            else shipped_table_predictor(gpu, space, precision)
        )
    if table is not None:
        if table.table.precision != precision:
            raise UsageError(f"the predictor profile {profile} was timed in {table.table.precision}, not {precision}")
        frame = table.predict_frame(archs, batch)
        return PopulationResult(space, table.table.device, batch, precision, "table", str(profile or ""), "", frame)
    general = population_predictor(space, gpu, batch, precision, backend=backend)
    frame = general.predict_frame(archs)
    return PopulationResult(
        space,
        general.gpu.name,
        batch,
        precision,
        "general",
        str(general.predictor.profile_path),
        general.transferred_from,
        frame,
        backend,
        general.predictor.host.describe() if general.eager_host else "",
    )
