"""utilscope: how much of a GPU a CNN's inference really uses, why, and how to design networks that use more."""

from utilscope._version import __version__
from utilscope.counting import CountResult, count
from utilscope.errors import ModelError, UsageError, UtilscopeError
from utilscope.nas import source as _nas_source

_nas_source.register()  # the `nas` model source (archs.jsonl:ID), in every process that imports utilscope

__all__ = ["CountResult", "ModelError", "UsageError", "UtilscopeError", "count", "__version__"]
