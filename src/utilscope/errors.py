"""Errors the library raises. The CLI turns a ``UsageError`` into a one-line message and exit code 2."""


class UtilscopeError(Exception):
    """Base class of every error utilscope raises on purpose."""


class UsageError(UtilscopeError, ValueError):
    """Bad input from the user: an unknown model, a batch size <= 0, an unknown dtype, ..."""


class StorageError(UtilscopeError):
    """The machine refused a write: a full disk, an I/O error. Not bad input: the CLI exits 74 (sysexits'
    EX_IOERR), and what was written before stays."""


RESUME = "run the same command again to resume"


class SurveyIncomplete(UtilscopeError):
    """A survey that stopped before every cell it claimed was stored (its cluster was lost): what it stored stays,
    rerunning resumes. Not the user's input: the CLI exits 75 (sysexits' EX_TEMPFAIL)."""

    def __init__(self, reason: str, tally: str):
        super().__init__(f"{reason}; {tally}; {RESUME}")


class ModelError(UsageError):
    """A model could not be built or run as asked (a factory that raises, a resolution it cannot take)."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line (library exceptions often carry several lines)."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())
