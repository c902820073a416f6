"""Presentation: rich tables and text for results the library computed. Nothing here computes results."""

from __future__ import annotations

from utilscope.errors import UsageError
from utilscope.models.sources import IMAGE_CHANNELS


def check_top(top: int | None) -> int | None:
    """A table's ``--top K`` (None: every row); K < 1 is a UsageError (a slice by 0 or -3 would silently show
    nothing or drop the last rows)."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise UsageError(f"--top must be at least 1, got {top!r}")
    return top


def input_phrases(resolution: int, channels: int) -> list[str]:
    """How a title says a model's input: its side in pixels, and its channels unless it is an RGB image
    (``["224px"]``, ``["56px", "64 channels"]``)."""
    return [f"{resolution}px"] + ([f"{channels} channels"] if channels != IMAGE_CHANNELS else [])
