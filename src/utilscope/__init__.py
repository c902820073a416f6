"""utilscope: how much of a GPU a CNN's inference really uses, why, and how to design networks that use more.

The Python API is ``utilscope.api``: ``count``, ``profile``, ``attribute``, ``predict``, ``advise``, ``survey`` and
``ingest``, one per command, each returning a result with ``to_frame()`` and ``to_dict()``
(``import utilscope.api as us; us.predict("timm:resnet50", gpu="all")``). ``count``, ``profile`` and ``ingest`` are
bound here too; ``attribute``, ``predict``, ``advise`` and ``survey`` are the names of subpackages, which a
function bound over them would hide from ``import utilscope.predict.predictor``."""

import importlib

from utilscope import api
from utilscope._version import __version__
from utilscope.api import AdviceResult, count, ingest, profile
from utilscope.counting import CountResult
from utilscope.errors import ModelError, StorageError, UsageError, UtilscopeError
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import ProfileResult
from utilscope.nas import source as _nas_source

_nas_source.register()  # the `nas` model source (archs.jsonl:ID), in every process that imports utilscope

# The option and result types of the heavier modules, imported when first asked for (``utilscope.AdviseRequest``).
_LAZY = {
    "AdviseRequest": "utilscope.advise.advisor",
    "Advice": "utilscope.advise.advisor",
    "Explanation": "utilscope.attribute.explain",
    "PredictRequest": "utilscope.predict.run",
    "PredictionSet": "utilscope.predict.run",
    "IngestResult": "utilscope.survey.published",
    "SurveyGrid": "utilscope.survey.plan",
    "RunOptions": "utilscope.survey.runner",
    "SurveyRequest": "utilscope.survey.workflow",
    "SurveyEvents": "utilscope.survey.workflow",
    "SurveyOutcome": "utilscope.survey.workflow",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'utilscope' has no attribute {name!r}")


__all__ = [
    "AdviceResult",
    "CountResult",
    "CudnnSettings",
    "MeasureRequest",
    "ModelError",
    "ProfileResult",
    "StorageError",
    "UsageError",
    "UtilscopeError",
    "__version__",
    "api",
    "count",
    "ingest",
    "profile",
    *_LAZY,
]
