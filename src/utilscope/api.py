"""The Python API: what each command does, as one function a notebook calls. Each takes a model spec
(``"torchvision:resnet18"``, ``"timm:resnet50"``, ``"path/file.py:factory"``, ``"archs.jsonl:ID"``) or an
``nn.Module`` (all but ``survey``, whose workers are other processes, and ``ingest``), with the library's own
option objects or their fields as keywords, and returns a typed result with ``to_frame()`` (pandas) and
``to_dict()`` (the command's ``--json``).

=============  ============================  ==================================================================
function       command                       result
=============  ============================  ==================================================================
``count``      ``utilscope count``           ``CountResult``: per-layer FLOPs, bytes, params (no GPU)
``profile``    ``utilscope profile``         ``ProfileResult``: one row per batch size (``MeasureRequest``)
``attribute``  ``utilscope layers``          ``Explanation``: per-layer time, roofline, findings (``MeasureRequest``)
``predict``    ``utilscope predict``         ``PredictionSet``: latency and utilization on a GPU, without it
``advise``     ``utilscope advise``          ``AdviceResult``: measured rewrites and choices (``AdviseRequest``)
``survey``     ``utilscope survey``          ``SurveyOutcome``: a grid measured into a store (``SurveyRequest``)
``ingest``     ``utilscope ingest``          ``IngestResult``: published tables as rows of a store
``report``     ``utilscope report``          ``ReportResult``: a store's HTML report, the GPUs without rows predicted
=============  ============================  ==================================================================

The heavy modules (the predictor, the advisor, the survey runner) are imported when their function is first called;
this module imports torch and the counting engine (``import utilscope`` imports neither: it binds ``count``,
``profile`` and ``ingest`` from here when first asked for). Call them here (``import utilscope.api as us``): the
``utilscope`` package binds only ``count``, ``profile`` and ``ingest``, the other four names being its subpackages'.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch
from torch import nn

from utilscope.counting import CountResult
from utilscope.counting import count as _count
from utilscope.counting.counter import meta_copy
from utilscope.errors import UsageError
from utilscope.measure.settings import MeasureRequest, as_request
from utilscope.measure.sweep import ProfileResult
from utilscope.measure.sweep import profile as _profile
from utilscope.models.sources import DEFAULT_FILE_RESOLUTION, ModelSource, own_model_channels, register_source

if TYPE_CHECKING:
    from utilscope.advise.advisor import Advice, AdviseRequest, Trial
    from utilscope.attribute.explain import Explanation
    from utilscope.predict.run import PredictionSet, PredictRequest
    from utilscope.report.workflow import ReportEvents, ReportResult
    from utilscope.survey.published import IngestResult
    from utilscope.survey.workflow import SurveyEvents, SurveyOutcome, SurveyRequest

__all__ = ["AdviceResult", "advise", "attribute", "count", "ingest", "predict", "profile", "survey"]


def _split(options: dict[str, Any], *classes: type, taken: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``options`` shared out among the dataclasses' fields, in order; UsageError naming any keyword none takes (or
    one of ``taken``: a field the function fills itself)."""
    names = [{f.name for f in dataclasses.fields(cls)} - set(taken) for cls in classes]
    unknown = sorted(set(options) - set().union(*names))
    if unknown:
        valid = ", ".join(sorted(set().union(*names)))
        raise UsageError(f"unknown option{'s' * (len(unknown) > 1)} {', '.join(unknown)}; valid: {valid}")
    return [{k: v for k, v in options.items() if k in fields} for fields in names]


MODULE_SOURCE = "module"  # the model source of the modules handed to this process's API calls
_MODULES: dict[str, nn.Module] = {}


def module_spec(model: nn.Module) -> str:
    """A spec (``module:Net-1``) naming a caller's module for the functions that measure a spec (``profile``,
    ``attribute``, ``advise``), in this process only: each build is a copy (on the meta device when it is built to
    be traced), the caller's module is never changed, and its native resolution is ``DEFAULT_FILE_RESOLUTION``
    (give ``resolution`` for another)."""
    if not _MODULES:
        register_source(  # a source known by its names (``match``), so that no message lists it as a prefix
            ModelSource(
                MODULE_SOURCE,
                _build_module,
                lambda name: DEFAULT_FILE_RESOLUTION,
                _MODULES.__contains__,
                match=lambda text: text if text in _MODULES else None,
                input_channels=own_model_channels,
            )
        )
    name = f"{type(model).__name__}-{len(_MODULES) + 1}"
    _MODULES[name] = model
    return f"{MODULE_SOURCE}:{name}"


def _build_module(name: str, resolution: int) -> nn.Module:
    """A copy of the registered module, on the device the zoo builds on (meta: its parameters as meta tensors)."""
    model = _MODULES[name]
    return meta_copy(model) if torch.get_default_device().type == "meta" else copy.deepcopy(model)


def count(model: str | nn.Module, batch: int = 1, resolution: int | None = None, dtype: str = "fp32") -> CountResult:
    """Per-layer FLOPs, other FLOPs, bytes and params of one forward pass, on the meta device (no GPU, no weights).
    ``to_frame()``: one row per layer; ``class_summary()``: per op class; ``to_dict()``: ``count --json``."""
    return _count(model, batch, resolution, dtype)


def profile(model: str | nn.Module | MeasureRequest, batches: Sequence[int] | None = None, **options) -> ProfileResult:
    """Measure throughput and FLOP utilization over batch sizes (None: 1,8,32,128,256 on a GPU, 1,8 on a CPU).
    ``options``: ``MeasureRequest``'s fields (precision, backend, device, resolution, ceilings, plan, ...); a module
    is measured as ``module_spec`` names it. ``to_frame()``: one row per batch size."""
    model = module_spec(model) if isinstance(model, nn.Module) else model
    return _profile(model, batches, **options)


def attribute(model: str | nn.Module | MeasureRequest, batch: int = 1, iters: int = 3, **options) -> Explanation:
    """Measure one batch size and attribute its time to layers (eager, graph) or fused regions (compiled backends,
    CUDA only), with roofline, attainable utilization and findings (``utilscope layers``). ``options``:
    ``MeasureRequest``'s fields. ``to_frame()``: one row per layer or region; ``.attribution``: the raw record."""
    from utilscope.attribute.attribution import attribute as _attribute
    from utilscope.attribute.explain import explain

    model = module_spec(model) if isinstance(model, nn.Module) else model
    return explain(_attribute(as_request(model, **options), batch=batch, iters=iters))


def predict(
    model: str | nn.Module | Sequence[str | nn.Module] | PredictRequest,
    gpu: str | None = None,
    batches: Sequence[int] = (1, 32, 256),
    on_fit: Callable[[], None] | None = None,
    **options,
) -> PredictionSet:
    """Latency, throughput and utilization on ``gpu`` (a GPU of the spec table, or ``all``) from a device profile,
    on any machine: the shipped H200 profile, transferred by datasheet to other GPUs. ``model``: a spec, a glob,
    a module, several, or a ``PredictRequest``; ``options``: its other fields (profile, precision, backend,
    channels_last, resolution, prices, anchors, host_profile; ``measured=False``: the layer models alone, also for
    a network a profiled GPU measured whole in the condition). The first call per profile fits it (seconds;
    ``on_fit`` is told), cached.
    ``to_frame()``: one row per model, batch size and GPU; ``layers_frame()``: per layer."""
    from utilscope.predict.run import PredictRequest, predict_networks

    if isinstance(model, PredictRequest):
        request = dataclasses.replace(model, **options) if options else model
    else:
        fields = _split(options, PredictRequest, taken=("models", "gpu", "batches"))[0]
        request = PredictRequest(model, gpu, batches=tuple(batches), **fields)
    return predict_networks(request, on_fit)


@dataclass
class AdviceResult:
    """``advise``'s ``Advice`` (every attribute of it reads through) with its frames: ``to_frame()`` one row per
    trial, ``ladder_frame()`` one row per batch size of the saturation ladder."""

    advice: Advice

    def __getattr__(self, name: str):
        if name == "advice":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.advice, name)

    def to_dict(self) -> dict:
        return self.advice.to_dict()

    def to_frame(self) -> pd.DataFrame:
        return _trials_frame(self.advice.trials)

    def ladder_frame(self) -> pd.DataFrame:
        return _trials_frame(self.advice.batch_ladder)


def _trials_frame(trials: list[Trial]) -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(trial) for trial in trials])


def advise(
    model: str | nn.Module | AdviseRequest, on_trial: Callable[[Trial], None] | None = None, **options
) -> AdviceResult:
    """Measure exact rewrites (channel padding, BatchNorm folding) and deployment choices (backends, precisions,
    batch sizes) against the model as given, ranked by measured gain. ``options``: the fields of ``MeasureRequest``
    (how the model runs as given) and of ``AdviseRequest`` (batches, multiple, backends, precisions, ladder,
    export, seed). ``on_trial`` sees each trial as it lands."""
    from utilscope.advise.advisor import AdviseRequest
    from utilscope.advise.advisor import advise as _advise

    if isinstance(model, AdviseRequest):
        request = dataclasses.replace(model, **options) if options else model
    else:
        measure, rest = _split(options, MeasureRequest, AdviseRequest, taken=("model", "measure"))
        model = module_spec(model) if isinstance(model, nn.Module) else model
        request = AdviseRequest(MeasureRequest(model, **measure), **rest)
    return AdviceResult(_advise(request, on_trial))


def survey(
    models: str | Sequence[str] | SurveyRequest,
    db: str | os.PathLike | None = None,
    events: SurveyEvents | None = None,
    **options,
) -> SurveyOutcome:
    """Measure a grid (models x batch sizes x precisions x backends) into the SQLite store ``db``, one worker
    subprocess per model group; a rerun resumes. ``models``: names, globs (``NAME@RES`` for a resolution of its
    own), or a ``SurveyRequest``; ``options``: the fields of ``SurveyGrid`` (batches, precisions, backends, device,
    ...), ``RunOptions`` (jobs, timeout_s, min_time_ms, ...) and ``SurveyRequest`` (executor, dry_run, ...).
    ``events``: a ``SurveyEvents`` to hear the progress. ``to_frame()``: the cells measured, with their status;
    ``Store(db).frame()`` reads every stored row."""
    from utilscope.survey.plan import SurveyGrid, select_models
    from utilscope.survey.runner import RunOptions
    from utilscope.survey.workflow import SurveyRequest, survey_grid

    if isinstance(models, SurveyRequest):
        if db is not None or options:
            raise UsageError("a SurveyRequest holds its store and options: give it alone")
        return survey_grid(models, events)
    if db is None:
        raise UsageError("give the store to measure into: survey(models, db='results.sqlite')")
    grid, run, rest = _split(options, SurveyGrid, RunOptions, SurveyRequest, taken=("models", "db", "grid", "options"))
    names = select_models([models] if isinstance(models, str) else list(models), [])
    request = SurveyRequest(SurveyGrid(tuple(names), **grid), RunOptions(str(db), **run), **rest)
    return survey_grid(request, events)


def ingest(
    files: str | os.PathLike | Sequence[str | os.PathLike],
    db: str | os.PathLike,
    count: bool = True,
    jobs: int = 1,
    on_ingested: Callable[[IngestResult], None] | None = None,
    on_model: Callable[[int, int, str], None] | None = None,
    format_name: str = "timm-benchmark",
) -> IngestResult:
    """Bring published benchmark tables of a format (``survey.formats``: ``timm-benchmark``, timm's
    ``benchmark-infer-*.csv``, e.g. data/public/timm-benchmark; ``deeplearningexamples``, NVIDIA's tables as shipped
    in data/public/deeplearningexamples) into the store ``db`` as published rows with their provenance; ``count``:
    also count each row's model by our engine (on ``jobs`` processes; ``on_model(done, total, model)`` after each).
    A table ingested before adds nothing. ``on_ingested`` sees the rows added, before counting. ``to_frame()``: one
    row per table."""
    from utilscope.survey.published import ingest_and_count

    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    return ingest_and_count(paths, db, count, jobs, on_ingested, on_model, format_name)


def report(
    db: str | os.PathLike,
    out: str | os.PathLike,
    predicted: bool = True,
    events: ReportEvents | None = None,
) -> ReportResult:
    """The HTML report of the store ``db`` in the folder ``out``: ``index.html`` (the interactive page), its figures
    and ``measurements.csv``; ``predicted``: every model also predicted on the GPUs without its row (seconds per
    hundred models, cached). ``events`` (``report.workflow.ReportEvents``) hears what it does. ``to_dict()``: the
    page's path, the predictions' condition and the models not predicted."""
    from utilscope.report.workflow import report as _report

    return _report(db, out, predicted, events)
