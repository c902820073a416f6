"""Presentation: rich tables and text for results the library computed. Nothing here computes results."""

from __future__ import annotations

from utilscope.errors import UsageError


def check_top(top: int | None) -> int | None:
    """A table's ``--top K`` (None: every row); K < 1 is a UsageError (a slice by 0 or -3 would silently show
    nothing or drop the last rows)."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise UsageError(f"--top must be at least 1, got {top!r}")
    return top
