"""The numbers a user gives (seeds, counts, seconds): one rule for each kind, one helper that checks it.

Library objects check what they take with these helpers; the command line applies the same helpers while it parses
(``utilscope.cli.parser.checked``), so a bad number is refused before any file is read or model built. A count is
bounded by what can run (a sample size whose drawing would take hours, a timeout of a year): the message says the
bound and why.
"""

from __future__ import annotations

import math
import os

from utilscope.errors import UsageError

MAX_SEED = 2**32 - 1  # numpy's generators, torch.manual_seed, Python's random and every JSON / SQLite reader take it
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: longer is a hang, not a timeout


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_seed(seed, name: str = "the seed") -> int:
    """A seed: a whole number, 0 <= seed <= 2**32 - 1 (what numpy's legacy RandomState takes; numpy's
    ``default_rng`` refuses negative seeds, and a store keeps the seed as a 64-bit integer)."""
    if not _whole(seed) or not 0 <= seed <= MAX_SEED:
        raise UsageError(f"{name} must be a whole number from 0 to {MAX_SEED} (2**32 - 1), got {seed!r}")
    return seed


def check_count(value, name: str, low: int = 1, high: int | None = None, why: str = "") -> int:
    """A whole number ``low <= value <= high`` (``high`` None: no upper bound); ``why`` says where ``high`` comes
    from, e.g. "sampling more takes minutes"."""
    if _whole(value) and value >= low and (high is None or value <= high):
        return value
    bound = f"at least {low}" + ("" if high is None else f" and at most {high}" + (f" ({why})" if why else ""))
    kind = "" if _whole(value) else ", a whole number"
    raise UsageError(f"{name} must be {bound}{kind}, got {value!r}")


def check_positive(value, name: str, unit: str, high: float | None = None, why: str = "") -> float:
    """A finite number ``0 < value <= high`` of ``unit`` (NaN, infinities, zero, negatives and bools refused)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and value > 0 and (high is None or value <= high):
        return float(value)
    if high is None:
        raise UsageError(f"{name} must be positive and finite ({unit}), got {value!r}")
    reason = f" ({why})" if why else ""
    raise UsageError(f"{name} must be positive and at most {high:g} {unit}{reason}, got {value!r}")


def cpu_cores() -> int:
    """The cores this process may run on (its affinity where the system says it, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


__all__ = ["MAX_SEED", "MAX_TIMEOUT_S", "check_count", "check_positive", "check_seed", "cpu_cores"]
