"""utilscope: how much of a GPU a CNN's inference really uses, why, and how to design networks that use more.

The Python API is ``utilscope.api``: ``count``, ``profile``, ``attribute``, ``predict``, ``advise``, ``survey`` and
``ingest``, one per command, each returning a result with ``to_frame()`` and ``to_dict()``
(``import utilscope.api as us; us.predict("timm:resnet50", gpu="all")``). ``count``, ``profile`` and ``ingest`` are
bound here too; ``attribute``, ``predict``, ``advise`` and ``survey`` are the names of subpackages, which a
function bound over them would hide from ``import utilscope.predict.predictor``.

Importing the package imports no torch, pandas or numpy (a command line's usage error is said before they load):
every name below but the errors and ``__version__`` is bound when first asked for (``from utilscope import count``).
"""

import importlib

from utilscope._version import __version__
from utilscope.errors import ModelError, StorageError, UsageError, UtilscopeError
from utilscope.lazy import module_getattr
from utilscope.models import sources as _sources


def _register_nas_source() -> None:
    from utilscope.nas import source

    source.register()


_sources.add_plugin(_register_nas_source)  # the `nas` model source (archs.jsonl:ID), in every process that imports
# utilscope, registered on the first lookup of the model sources

# The functions, option and result types, imported when first asked for (``utilscope.AdviseRequest``).
_LAZY = {
    "AdviceResult": "utilscope.api",
    "count": "utilscope.api",
    "ingest": "utilscope.api",
    "profile": "utilscope.api",
    "CountResult": "utilscope.counting",
    "CudnnSettings": "utilscope.measure.settings",
    "MeasureRequest": "utilscope.measure.settings",
    "ProfileResult": "utilscope.measure.sweep",
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


_lazy_getattr = module_getattr(__name__, globals(), _LAZY)


def __getattr__(name: str):
    if name == "api":  # the submodule (importing it binds it here)
        return importlib.import_module("utilscope.api")
    return _lazy_getattr(name)


__all__ = [
    "ModelError",
    "StorageError",
    "UsageError",
    "UtilscopeError",
    "__version__",
    "api",
    *_LAZY,
]
