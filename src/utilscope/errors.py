"""Errors the library raises. The CLI turns a ``UsageError`` into a one-line message and exit code 2."""


class UtilscopeError(Exception):
    """Base class of every error utilscope raises on purpose."""


class UsageError(UtilscopeError, ValueError):
    """Bad input from the user: an unknown model, a batch size <= 0, an unknown dtype, ..."""


class ModelError(UsageError):
    """A model could not be built or run as asked (a factory that raises, a resolution it cannot take)."""
