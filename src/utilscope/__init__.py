"""utilscope: how much of a GPU a CNN's inference really uses, why, and how to design networks that use more.

The Python API (``utilscope.api``): ``count``, ``profile``, ``attribute``, ``predict``, ``advise``, ``survey`` and
``ingest``, one per command, each returning a result with ``to_frame()`` and ``to_dict()``."""

import importlib

# The subpackages named like API functions are imported first (their __init__ files are empty), so that the
# functions bound below keep those names: a subpackage imported for the first time later would rebind its name here.
from utilscope import advise as _advise_package  # noqa: F401
from utilscope import attribute as _attribute_package  # noqa: F401
from utilscope import predict as _predict_package  # noqa: F401
from utilscope import survey as _survey_package  # noqa: F401
from utilscope._version import __version__
from utilscope.api import AdviceResult, advise, attribute, count, ingest, predict, profile, survey
from utilscope.counting import CountResult
from utilscope.errors import ModelError, UsageError, UtilscopeError
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
    "AdviceResult", "CountResult", "CudnnSettings", "MeasureRequest", "ModelError", "ProfileResult", "UsageError",
    "UtilscopeError", "__version__", "advise", "attribute", "count", "ingest", "predict", "profile", "survey",
    *_LAZY,
]  # fmt: skip
