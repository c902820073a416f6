"""``predict`` as one library call: networks (specs, globs or modules) at batch sizes on one GPU, several or all of
them, from a device profile, with samples per dollar where prices are given. ``PredictRequest`` checks itself when
made (before a profile is read or fitted); ``predict_networks`` runs it; ``PredictionSet`` holds what came back."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
from torch import nn

from utilscope.errors import UsageError, UtilscopeError
from utilscope.hardware.specs import lookup_gpu
from utilscope.limits import check_batches
from utilscope.measure.backends import get_backend
from utilscope.measure.precision import parse_precision
from utilscope.models import model_files, zoo
from utilscope.predict import fit_cache, measured, network_scales, profiles, selection
from utilscope.predict.anchors import Anchor, AnchorFit, check_anchors, fit_anchors, parse_anchor
from utilscope.predict.batched import (
    CountedNetwork,
    counted_network,
    keep_networks,
    known_networks,
    predict_counted_networks,
)
from utilscope.predict.features import Gpu
from utilscope.predict.host import load_host
from utilscope.predict.options import check_host_backend, check_prices, check_target
from utilscope.predict.predictor import Prediction, Predictor

DEFAULT_BATCHES = (1, 32, 256)


@dataclass(frozen=True)
class PredictRequest:
    """What to predict, checked when made: ``models`` (a spec, a glob, an ``nn.Module``, or a sequence of them);
    ``gpu`` (a GPU of the spec table, or ``all``) and/or ``profile`` (a device profile file; None: the one shipped
    for ``gpu``, else one to transfer from); batch sizes; precision (fp16, or amp over an fp16 profile); backend;
    memory format; resolution (None: each model's native one); ``prices``: ``{GPU: USD per hour}``;
    ``host_profile``: a host profile file (``calibrate --host``) for eager, instead of the shipped one of the
    profile's machine (``profiles.host_of``); ``measured``: a network that a profiled GPU measured in the
    same condition is predicted from that measurement (``predict.measured``; not with anchors)."""

    models: str | nn.Module | Sequence[str | nn.Module]
    gpu: str | None = None
    profile: str | None = None
    batches: tuple[int, ...] = DEFAULT_BATCHES
    precision: str = "fp16"
    backend: str = "graph"
    channels_last: bool = True
    resolution: int | None = None
    prices: dict[str, float] = field(default_factory=dict)
    anchors: tuple[Anchor, ...] = ()
    host_profile: str | None = None
    measured: bool = True

    def __post_init__(self) -> None:
        given = [self.models] if isinstance(self.models, (str, nn.Module)) else list(self.models)
        if not given:
            raise UsageError("give at least one model to predict")
        names = [n for m in given for n in (zoo.model_names(m) if isinstance(m, str) else [m])]
        object.__setattr__(self, "models", tuple(names))
        object.__setattr__(self, "batches", tuple(check_batches(self.batches)))
        object.__setattr__(self, "prices", check_prices(self.prices))
        object.__setattr__(
            self, "anchors", tuple(a if isinstance(a, Anchor) else parse_anchor(a) for a in self.anchors)
        )
        parse_precision(self.precision)
        get_backend(self.backend)
        check_host_backend(self.host_profile, self.backend)
        if self.host_profile is not None:
            load_host(self.host_profile)  # a bad file is said before the profile is fitted
        if self.resolution is not None:
            zoo.check_resolution(self.resolution)
        if len(names) == 1 and isinstance(names[0], str):  # a bad model is said before the profile is fitted
            spec = zoo.parse_spec(names[0])
            zoo.check_model(spec)
            fixed = zoo.fixed_batch(spec)  # a model file whose batch is fixed runs at it unless asked otherwise
            if fixed is not None and self.batches == DEFAULT_BATCHES:
                object.__setattr__(self, "batches", (fixed,))
            for batch in self.batches:
                zoo.check_input(spec, batch, self.resolution)
        specs = check_target(self.gpu, self.profile, self.precision, bool(self.anchors))  # GPUs, profile, anchors
        if self.anchors:
            check_anchors(list(self.anchors), specs[0].key, self.precision, self.backend)


@dataclass
class PredictionSet:
    """The predictions (per model, batch size and GPU, in that order), the failures of a glob's models, the profile
    they came from and its GPU, and the prices asked for."""

    predictions: list[Prediction]
    failures: list[str]
    profile_path: str
    device: str
    prices: dict[str, float] = field(default_factory=dict)
    anchor_fit: AnchorFit | None = None  # the target's parameters fitted to the request's anchors
    scales_note: str = ""  # one line when the profile's times are scaled per op category (``network_scales``)
    profile_note: str = ""  # which profile predicts, of which GPU and condition, and why (``profiles.describe_choice``)
    file_notes: list[str] = field(default_factory=list)  # what a model file's network lacks (``folded_notes``)

    def records(self) -> list[dict]:
        """Each prediction as a dict with every layer, ``usd_per_hour`` and ``samples_per_usd`` (None where no price
        is given); on several GPUs the fastest first per model and batch size (the ``predict --json`` list)."""
        return ranked([p.to_dict() for p in self.predictions], self.prices)

    def to_dict(self) -> dict:
        return {
            "profile": self.profile_path,
            "profile_note": self.profile_note,
            "file_notes": list(self.file_notes),
            "device": self.device,
            "predictions": self.records(),
            "failures": list(self.failures),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per model, batch size and GPU, without the per-layer lists (``layers_frame`` has them)."""
        return pd.DataFrame([{k: v for k, v in r.items() if k != "layers"} for r in self.records()])

    def layers_frame(self) -> pd.DataFrame:
        """One row per predicted layer of every prediction, keyed by model, GPU and batch size."""
        rows = [
            {"model": p.model, "gpu_key": p.gpu_key, "batch": p.batch, **layer}
            for p in self.predictions
            for layer in p.layers
        ]
        return pd.DataFrame(rows)


def ranked(records: list[dict], prices: dict[str, float]) -> list[dict]:
    """The records with ``usd_per_hour`` and ``samples_per_usd`` where a price is given; several GPUs: fastest first
    (per model and batch size, in their order)."""
    for record in records:
        usd = prices.get(record["gpu_key"])
        record["usd_per_hour"] = usd
        record["samples_per_usd"] = record["samples_per_s"] * 3600 / usd if usd else None
    order = {key: i for i, key in enumerate(dict.fromkeys((r["model"], r["batch"]) for r in records))}
    return sorted(records, key=lambda r: (order[(r["model"], r["batch"])], -r["samples_per_s"]))


@dataclass(frozen=True)
class Prepared:
    """What a request predicts with: its profile's predictor (the request's host profile, or the anchors' host
    speed, in place of its own), the GPUs (None: the profile's own alone), the precision the profile predicts for
    the request's (``profiles.predicted_as``), the anchors' fit (None without anchors) and the profile's entry."""

    predictor: Predictor
    targets: list[Gpu | None] | None
    precision: str
    fit: AnchorFit | None
    entry: profiles.Profile


def prepare(request: PredictRequest, on_fit: Callable[[], None] | None = None) -> Prepared:
    """The request's ``Prepared``: its profile selected and its predictor fitted or read from the cache (``on_fit``
    is called before a fit), the condition checked, the anchors fitted."""
    profile = selection.select_profile(
        request.gpu, request.profile, request.precision, request.backend, request.channels_last
    )
    predictor = fit_cache.load_predictor(profile, on_fit=on_fit)
    if request.host_profile is not None:
        predictor = replace(predictor, host=load_host(request.host_profile))
    entry = profiles.read(profile)
    precision = profiles.predicted_as(request.precision, entry)
    predictor.check_condition(precision, request.backend, request.channels_last)
    targets = selection.transfer_targets(request.gpu, predictor) if request.gpu else None
    fit = anchored(request, predictor, targets, precision)
    targets = [fit.target] if fit is not None else targets
    if fit is not None and fit.host_speed is not None:
        predictor = replace(predictor, host=predictor.host.at_speed(fit.host_speed))
    return Prepared(predictor, targets, precision, fit, entry)


def predict_networks(request: PredictRequest, on_fit: Callable[[], None] | None = None) -> PredictionSet:
    """Every model of the request at every batch size on every GPU asked for; a network is counted once per batch
    size. One model that fails raises; several: the failures are kept and the others predicted. ``on_fit`` is
    called before a profile is fitted (seconds, once: cached after)."""
    prepared = prepare(request, on_fit)
    predictor = prepared.predictor

    def predict_one(model) -> list[Prediction]:
        return [p for batch in request.batches for p in with_measured(request, prepared, model, batch)]

    predictions, failures = each_model(request.models, predict_one)
    for prediction in predictions:
        prediction.validation = profiles.validation_of(prediction)
    return PredictionSet(
        predictions,
        failures,
        str(predictor.profile_path),
        predictor.device,
        dict(request.prices),
        prepared.fit,
        scales_note(predictor),
        profiles.describe_choice(prepared.entry, selection.one_gpu(request.gpu), request.precision),
        folded_notes(predictions),
    )


def with_measured(request: PredictRequest, prepared: Prepared, model, batch: int) -> list[Prediction]:
    """A model's predictions at one batch size on the request's GPUs, each from a whole-network measurement where
    one serves it (``measured.ordered``, ``measured.corrected``): the network counted once, predicted on the
    measuring GPUs beside the targets for their ratios, from its layer models' own times (a network's measured ratio
    stands for the per-category network scales); where none serves, or its cell does not (a host-bound one), as
    usual."""
    predictor, targets = prepared.predictor, prepared.targets or [None]
    found, own = measured_cells(request, prepared, model, batch), predictor.gpu.key
    serving = {key: measured.ordered(found, key, own) for key in [(t or predictor.gpu).key for t in targets]}
    if all(cells.empty for cells in serving.values()):
        conditions = (request.resolution, request.backend, prepared.precision, request.channels_last)
        return predictor.predict_on(model, batch, targets, *conditions)
    network = predictor.counted_network(model, batch, request.resolution, prepared.precision, request.channels_last)
    unscaled = predictor if predictor.category_scales is None else replace(predictor, category_scales=None)
    extra = measuring_targets(pd.concat(serving.values()), set(serving), predictor)
    made = unscaled.predict_network(network, targets + extra, request.backend, prepared.precision)
    on_gpu = {p.gpu_key: p for p in made}
    taken = [measured.corrected(p, serving[p.gpu_key], on_gpu) for p in made[: len(targets)]]
    if all(p.measured for p in taken) or predictor.category_scales is None:
        return taken
    scaled = predictor.predict_network(network, targets, request.backend, prepared.precision)  # where none served
    return [mine if mine.measured else usual for mine, usual in zip(taken, scaled, strict=True)]


def measured_cells(request: PredictRequest, prepared: Prepared, model, batch: int) -> pd.DataFrame:
    """The measured cells of a spec in the request's condition (``measured.cells``); none when the request asks
    for none, has anchors, gives its own host for eager, or the model is a module."""
    own_host = request.host_profile is None or request.backend != "eager"  # eager cells timed the lent machine's host
    if not (request.measured and own_host) or prepared.fit is not None or not isinstance(model, str):
        return measured.table().iloc[:0]
    layout = "channels_last" if request.channels_last else "contiguous"
    return measured.cells(model, batch, prepared.precision, layout, request.backend)


def measuring_targets(found: pd.DataFrame, asked: set[str], predictor: Predictor) -> list[Gpu | None]:
    """The GPUs that measured ``found`` and are not ``asked`` (spec keys), as ``predict_on`` targets (None: the
    profile's own GPU); one without a peak in the profile's precision is left out."""
    extra = []
    for key in dict.fromkeys(found["gpu"]):
        spec = lookup_gpu(key, predictor.precision)
        if key in asked or spec is None:
            continue
        extra.append(None if key == predictor.gpu.key else Gpu.from_spec(spec, predictor.precision))
    return extra


def predict_table(
    request: PredictRequest,
    resolutions: Mapping[str, int] | None = None,
    on_model: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """``predict_networks``'s samples/s, utilization and bound of every model of the request at every batch size
    on every GPU asked for, as one table (``batched.COLUMNS``), and the failures ("model: why"): each network
    counted once per batch size (or read from the cache of networks, ``batched.known_networks``), then all of them
    predicted together (``predict.batched``), equal to
    ``predict_networks``'s to float rounding. ``resolutions``: a model's resolution by its name, where it is not
    the request's. One model that fails raises; several: the failures are kept. ``on_model`` is told each model
    before it is counted."""
    prepared = prepare(request)
    predictor, precision = prepared.predictor, prepared.precision
    cells = {
        model: [
            (model, batch, (resolutions or {}).get(_name(model), request.resolution), precision, request.channels_last)
            for batch in request.batches
        ]
        for model in request.models
    }
    known = known_networks(predictor, [cell for model_cells in cells.values() for cell in model_cells])
    counted = {}

    def count_one(model) -> list[CountedNetwork]:
        if on_model is not None:
            on_model(_name(model))
        networks = [known.get(cell) or counted_network(predictor, *cell) for cell in cells[model]]
        counted.update(
            (cell, network) for cell, network in zip(cells[model], networks, strict=True) if cell not in known
        )
        return networks

    networks, failures = each_model(request.models, count_one)
    keep_networks(predictor, counted)
    table = predict_counted_networks(predictor, networks, prepared.targets or [None], request.backend, precision)
    return table, failures


def _name(model) -> str:
    """A model's name in failures and callbacks: its spec, or a module's class."""
    return model if isinstance(model, str) else type(model).__name__


def each_model(models: tuple, work: Callable[[object], list]) -> tuple[list, list[str]]:
    """``work``'s results of every model, one after another, and the failures ("model: why") of those that raise a
    ``UtilscopeError``; a model alone raises. The objects alive before (torch, timm, scikit-learn, the layer
    models: ~600k) are frozen meanwhile: a full collection started by a large network's trace does not rescan them
    (0.35 s of a 0.8 s prediction)."""
    gc.freeze()
    results, failures = [], []
    try:
        for model in models:
            try:
                results += work(model)
            except UtilscopeError as exc:
                if len(models) == 1:
                    raise
                failures.append(f"{_name(model)}: {' '.join(str(exc).split())}")
    finally:
        gc.unfreeze()
    return results, failures


def folded_notes(predictions: list[Prediction]) -> list[str]:
    """One line per ONNX file whose network has convolutions and no BatchNorm: ONNX exporters (PyTorch's among
    them) fold each BatchNorm into the conv before it, so the file predicts faster than the module it came from."""
    notes = {}
    for prediction in predictions:
        source, _, name = prediction.model.partition(":")
        types = {layer["type"] for layer in prediction.layers}
        if source == model_files.Format.ONNX.value and "Conv2d" in types and not any("BatchNorm" in t for t in types):
            path = model_files.split_name(name)[0]
            notes[path] = (
                f"{path}: an ONNX file's network as exported, with no BatchNorm: its exporter folded each into the "
                "conv before it, as PyTorch's does, so it runs less memory-bound work than the module it came from "
                "(predict the module, or its .pt2, for the network as PyTorch runs it)"
            )
    return list(notes.values())


def scales_note(predictor) -> str:
    """What the profile's network scales say, or "" for a profile without them."""
    if not predictor.category_scales:
        return ""
    name = network_scales.scales_file(Path(predictor.profile_path)).name
    return (
        f"{predictor.device}'s layer times scaled per op category to its whole networks measured in this condition"
        f' ({name}: docs/predict.md, "Network scales")'
    )


def anchored(request: PredictRequest, predictor, targets, precision: str) -> AnchorFit | None:
    """The request's GPU fitted to its anchors (``predict.anchors``) in ``precision`` (the request's, or the
    profile's standing in for it: ``profiles.predicted_as``), or None without anchors; UsageError for the profile's
    own GPU, which its layer models predict and no transfer parameter moves."""
    if not request.anchors:
        return None
    if not targets or targets[0] is None:
        raise UsageError(
            f"{predictor.device} is predicted from its own device profile: anchors fit a GPU predicted by transfer"
        )
    return fit_anchors(predictor, list(request.anchors), targets[0], precision, request.backend, request.channels_last)
