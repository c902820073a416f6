"""Timing harness: warm-up excluded, iteration count adapted to the work, median and coefficient of variation.

A *clock* times ``iters`` back-to-back calls of a function: ``CudaClock`` with CUDA events on the current stream,
``CpuClock`` with ``time.perf_counter``. Tests pass a fake clock.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

CV_LIMIT = 0.03  # rows whose coefficient of variation exceeds 3% are flagged unstable


class Clock(Protocol):
    def time_ms(self, fn: Callable[[], object], iters: int) -> float:
        """Milliseconds taken by ``iters`` consecutive calls of ``fn``."""


class CpuClock:
    def time_ms(self, fn: Callable[[], object], iters: int) -> float:
        start_s = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - start_s) * 1e3


class CudaClock:
    """CUDA events around the launches; synchronizes on the end event before reading it."""

    def __init__(self, device=None):
        import torch

        self._torch = torch
        self.device = device

    def time_ms(self, fn: Callable[[], object], iters: int) -> float:
        cuda = self._torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


@dataclass(frozen=True)
class TimingPlan:
    """How long to measure: warm-up and timed work, both in milliseconds of the function's own time."""

    warmup_iters: int = 3  # at least this many un-timed calls (cuDNN autotune, caches, lazy init)
    warmup_ms: float = 100.0  # ... and at least this much time
    samples: int = 10  # timed samples; median and CV are taken over them
    min_total_ms: float = 200.0  # the timed samples together cover at least this much work
    max_iters_per_sample: int = 10_000


@dataclass(frozen=True)
class TimingStats:
    median_ms: float  # per call
    cv: float  # standard deviation / mean of the per-call times of the samples
    samples_ms: tuple[float, ...]  # per-call time of each sample
    iters_per_sample: int
    warmup_iters: int

    @property
    def total_ms(self) -> float:
        return sum(self.samples_ms) * self.iters_per_sample

    @property
    def unstable(self) -> bool:
        return self.cv > CV_LIMIT


def warm_up(fn: Callable[[], object], clock: Clock, plan: TimingPlan) -> tuple[int, float]:
    """Run un-timed calls until both warm-up minimums are met; returns (calls made, last call's ms)."""
    calls, spent_ms, last_ms = 0, 0.0, 0.0
    while calls < plan.warmup_iters or spent_ms < plan.warmup_ms:
        last_ms = clock.time_ms(fn, 1)
        spent_ms += last_ms
        calls += 1
        if calls >= 1000:  # very fast functions: 1000 calls are warm enough
            break
    return calls, last_ms


def iters_per_sample(call_ms: float, plan: TimingPlan) -> int:
    """Calls per sample so that ``plan.samples`` samples cover ``plan.min_total_ms``."""
    per_sample_ms = plan.min_total_ms / plan.samples
    iters = math.ceil(per_sample_ms / call_ms) if call_ms > 0 else plan.max_iters_per_sample
    return max(1, min(iters, plan.max_iters_per_sample))


def summarize(samples_ms: list[float], iters: int, warmup_iters: int) -> TimingStats:
    mean = statistics.fmean(samples_ms)
    cv = statistics.pstdev(samples_ms) / mean if mean > 0 and len(samples_ms) > 1 else 0.0
    return TimingStats(statistics.median(samples_ms), cv, tuple(samples_ms), iters, warmup_iters)


def measure(
    fn: Callable[[], object],
    clock: Clock,
    plan: TimingPlan | None = None,
    during_samples: contextlib.AbstractContextManager | None = None,
) -> TimingStats:
    """Warm up, choose the iteration count from the warm call time, then time ``plan.samples`` samples.

    ``during_samples`` (e.g. an NVML sampler) is entered around the timed samples only, not the warm-up.
    """
    plan = plan or TimingPlan()
    warmup_calls, call_ms = warm_up(fn, clock, plan)
    iters = iters_per_sample(call_ms, plan)
    with during_samples or contextlib.nullcontext():
        samples_ms = [clock.time_ms(fn, iters) / iters for _ in range(plan.samples)]
    return summarize(samples_ms, iters, warmup_calls)
