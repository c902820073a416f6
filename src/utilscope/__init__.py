"""utilscope: how much of a GPU a CNN's inference really uses, why, and how to design networks that use more."""

from utilscope.counting import CountResult, count
from utilscope.errors import ModelError, UsageError, UtilscopeError

__version__ = "0.1.0"
__all__ = ["CountResult", "ModelError", "UsageError", "UtilscopeError", "count", "__version__"]
