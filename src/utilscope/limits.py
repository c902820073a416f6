"""The numbers a user gives (seeds, counts, seconds): one rule for each kind, one helper that checks it.

Library objects check what they take with these helpers; the command line applies the same helpers while it parses
(``utilscope.cli.values.checked``), so a bad number is refused before any file is read or model built. A count is
bounded by what can run (a sample size whose drawing would take hours, a timeout of a year): the message says the
bound and why. This module imports nothing heavy: the command line's parser reads it.
"""

from __future__ import annotations

import math
import numbers
import os

from utilscope.errors import UsageError

MAX_SEED = 2**32 - 1  # numpy's generators, torch.manual_seed, Python's random and every JSON / SQLite reader take it
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: longer is a hang, not a timeout
MAX_BATCH = 1 << 16
FIT_RULES = ("halve", "timm")  # how a batch size that ran out of memory is shrunk (``measure.sweep.smaller_batch``)
MAX_CONFIGS = 15_000  # a device profile's largest calibration sample (``predict.ops``): its smallest kind, the
# classifier heads (1.8% of a sample), has only 315 distinct configs, so a sample of about 17,700 could never be drawn
# (each kind's configs are distinct)
MAX_CONFIGS_WHY = "the classifier-head kind has only 315 distinct configurations: a larger sample cannot be drawn"
MAX_ARCHITECTURES = 100_000  # one sample (nas sample -n, a search's --pool-size, a fit's --prior-archs): drawing
# 100000 RegNets takes about half a minute, and their JSONL file is some 40 MB
ARCHITECTURES_WHY = "sampling more takes minutes; sample several files with different seeds instead"
MIN_RESOLUTION = 8  # the smallest input a CNN spec runs at: a 7x7 stem (ResNets', the largest common stem
# kernel) sees a whole image; below, an image has fewer pixels than the first layer's kernel. A model whose layers
# need more (a stride-32 network without padding) fails at building or counting, naming its layer.
MAX_RESOLUTION = 4096
MAX_TIMED_MS = 60_000.0  # --min-time-ms: a minute of timed calls per cell (a survey's default timeout is 15 minutes)
WORKERS_WHY = "this machine's cores: more workers than cores disturb each other's timings"
BUDGET_WHY = f"a measurement per architecture, and a pool holds at most {MAX_ARCHITECTURES}"
MAX_MULTIPLE = 128  # tensor cores want 8 (fp16/bf16) or 16 (int8); 128 covers a GEMM tile, more only adds work
MULTIPLE_WHY = "tensor cores want 8 or 16; a larger multiple only adds work"


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


def check_batch(batch) -> int:
    """The batch size as a Python int: any integer type (numpy's from a frame too), not a bool, 1 to MAX_BATCH."""
    if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
        raise UsageError(f"batch size must be an integer between 1 and {MAX_BATCH}, got {batch!r}")
    return int(batch)


def check_batches(batches) -> list[int]:
    """At least one batch size, each ``check_batch``-ed."""
    batches = list(batches)
    if not batches:
        raise UsageError("give at least one batch size")
    return [check_batch(b) for b in batches]


def check_resolution(resolution: int, minimum: int = MIN_RESOLUTION) -> int:
    """An input resolution in pixels, ``minimum <= resolution <= MAX_RESOLUTION``: the one place that says which
    sizes a model spec is run at (``--res``, a factory file's RESOLUTION, a NAS record's). ``minimum`` 1 is for a
    module counted from Python, which may be one layer fed a layer's output (a 1x1 pooled map), not an image."""
    if not isinstance(resolution, int) or isinstance(resolution, bool):
        raise UsageError(f"resolution must be an integer, got {resolution!r}")
    if not minimum <= resolution <= MAX_RESOLUTION:
        raise UsageError(f"resolution must be between {minimum} and {MAX_RESOLUTION} pixels, got {resolution}")
    return resolution


def check_positive(value, name: str, unit: str, high: float | None = None, why: str = "") -> float:
    """A finite number ``0 < value <= high`` of ``unit`` (NaN, infinities, zero, negatives and bools refused)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and value > 0 and (high is None or value <= high):
        return float(value)
    if high is None:
        raise UsageError(f"{name} must be positive and finite ({unit}), got {value!r}")
    reason = f" ({why})" if why else ""
    raise UsageError(f"{name} must be positive and at most {high:g} {unit}{reason}, got {value!r}")


def check_timeout(timeout_s) -> float:
    """Seconds one group of a survey's cells may take (``--timeout``): positive, at most a week."""
    return check_positive(timeout_s, "--timeout", "seconds", MAX_TIMEOUT_S, "a week")


def check_timed_ms(min_time_ms) -> float:
    """Total timed milliseconds per cell (``--min-time-ms``): positive, at most a minute."""
    return check_positive(min_time_ms, "--min-time-ms", "ms", MAX_TIMED_MS, "a minute of timing per cell")


def check_jobs(jobs, why: str = WORKERS_WHY) -> int:
    """Worker processes at a time (``--jobs``): 1 to this machine's cores (``cpu_cores``); ``why`` says why not more."""
    return check_count(jobs, "--jobs", 1, cpu_cores(), why)


def check_budget(budget) -> int:
    """A search's GPU measurements (``--budget``): 1 to MAX_ARCHITECTURES."""
    return check_count(budget, "--budget", 1, MAX_ARCHITECTURES, BUDGET_WHY)


def check_multiple(multiple) -> int:
    """A channel multiple to pad to (``--multiple``): 1 to MAX_MULTIPLE."""
    return check_count(multiple, "the channel multiple (--multiple)", 1, MAX_MULTIPLE, MULTIPLE_WHY)


def check_threads(threads: int | None) -> int | None:
    """A torch intra-op thread count to measure with (None: torch's own); UsageError unless a positive integer."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise UsageError(f"--threads must be a positive integer, got {threads!r}")
    return threads


def check_benchmark_limit(limit: int | None) -> int | None:
    """cuDNN's autotuning limit (``--cudnn-benchmark-limit``; None: torch's default): 0 (all algorithms) or more."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise UsageError(f"--cudnn-benchmark-limit must be 0 (all algorithms) or more, got {limit}")
    return limit


def check_flops(bound: float | None, name: str) -> float | None:
    """A bound in FLOPs per sample (``--flops-min``, ``--flops-max``; None: none): finite, not negative."""
    if bound is not None and not (math.isfinite(bound) and bound >= 0):
        raise UsageError(f"{name} must be a finite number of FLOPs per sample >= 0, got {bound}")
    return bound


def check_flops_band(flops_min: float | None, flops_max: float | None) -> None:
    """Bounds in FLOPs per sample, each optional: finite, not negative, the lower one not above the upper one."""
    check_flops(flops_min, "--flops-min")
    check_flops(flops_max, "--flops-max")
    if flops_min is not None and flops_max is not None and flops_min > flops_max:
        raise UsageError(f"--flops-min ({flops_min:g}) is above --flops-max ({flops_max:g}): no architecture fits")


def cpu_cores() -> int:
    """The cores this process may run on (its affinity where the system says it, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


__all__ = [
    "ARCHITECTURES_WHY",
    "BUDGET_WHY",
    "FIT_RULES",
    "MAX_ARCHITECTURES",
    "MAX_BATCH",
    "MAX_CONFIGS",
    "MAX_CONFIGS_WHY",
    "MAX_MULTIPLE",
    "MAX_SEED",
    "MAX_TIMED_MS",
    "MAX_TIMEOUT_S",
    "WORKERS_WHY",
    "check_batch",
    "check_batches",
    "check_benchmark_limit",
    "check_budget",
    "check_count",
    "check_flops",
    "check_flops_band",
    "check_jobs",
    "check_multiple",
    "check_positive",
    "check_seed",
    "check_threads",
    "check_timed_ms",
    "check_timeout",
    "cpu_cores",
]
