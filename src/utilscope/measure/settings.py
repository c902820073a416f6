"""What a measurement is asked to do, as frozen objects checked once, when they are made, and passed whole.

``CudnnSettings``  how cuDNN picks convolution algorithms: autotuning, its limit, the depthwise exception.
``MeasureRequest`` what to measure: model, precision, backend, device, resolution, memory layout, peak, ceilings,
                   timing plan, cuDNN settings and torch's thread count; ``profile``, ``prepare_sweep``,
                   ``attribute``, the survey worker and the NAS latency table all take one.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from utilscope.errors import UsageError
from utilscope.hardware import Ceilings, check_peak_tflops
from utilscope.limits import check_benchmark_limit, check_threads, check_timed_ms
from utilscope.measure.backends import get_backend
from utilscope.measure.precision import parse_precision
from utilscope.measure.timing import TimingPlan
from utilscope.models import zoo
from utilscope.torch_flags import cudnn_mode, heuristic_for_depthwise

HEURISTIC_BACKENDS = ("eager", "graph")  # backends that run the model's own convolutions
CEILINGS_POLICIES = ("measure", "skip")


@dataclass(frozen=True)
class CudnnSettings:
    """cuDNN's algorithm choice for convolutions. ``benchmark``: autotune each new shape (torch's
    ``cudnn.benchmark``); ``benchmark_limit``: try at most this many algorithms per shape (None: torch's default,
    0: all); ``depthwise_heuristic``: depthwise convolutions take cuDNN's heuristic algorithm, all others autotune.
    Each combination is a configuration of its own in a results store."""

    benchmark: bool = True
    benchmark_limit: int | None = None
    depthwise_heuristic: bool = False

    def __post_init__(self) -> None:
        for name in ("benchmark", "depthwise_heuristic"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"cuDNN setting {name} must be true or false, got {getattr(self, name)!r}")
        if check_benchmark_limit(self.benchmark_limit) is not None and not self.benchmark:
            raise UsageError(
                "--cudnn-benchmark-limit limits autotuning, which --no-cudnn-benchmark turns off: give one"
            )
        if self.depthwise_heuristic and not self.benchmark:
            raise UsageError(
                "--cudnn-depthwise-heuristic keeps autotuning for the other convs, which "
                "--no-cudnn-benchmark turns off: give one"
            )

    def check_backend(self, backend: str) -> None:
        """The depthwise exception needs a backend that runs the model's own convolutions."""
        if self.depthwise_heuristic and backend not in HEURISTIC_BACKENDS:
            raise UsageError(f"--cudnn-depthwise-heuristic applies to the eager and graph backends, not {backend}")

    @contextlib.contextmanager
    def applied(self, module: nn.Module | None = None, example: torch.Tensor | None = None) -> Iterator[None]:
        """Inside: cuDNN autotunes (or not) with this limit; restored after. With the depthwise exception, one
        forward pass of ``module`` on ``example`` first decides (and caches) every conv shape's algorithm."""
        with cudnn_mode(self.benchmark, self.benchmark_limit):
            if self.depthwise_heuristic and module is not None and example is not None:
                with heuristic_for_depthwise(module), torch.inference_mode():
                    module(example)
            yield

    def label(self) -> str:
        """How a results table names a non-default setting ("" for full autotuning)."""
        if not self.benchmark:
            return "cudnn.benchmark off"
        parts = [] if self.benchmark_limit is None else [f"cudnn.benchmark_limit {self.benchmark_limit}"]
        return " · ".join(parts + (["depthwise heuristic"] if self.depthwise_heuristic else []))

    def to_dict(self) -> dict:
        """The environment's keys for these settings (also the results store's columns)."""
        return {
            "cudnn_benchmark": self.benchmark,
            "cudnn_benchmark_limit": self.benchmark_limit,
            "cudnn_depthwise_heuristic": self.depthwise_heuristic,
        }

    @classmethod
    def from_dict(cls, doc: dict) -> CudnnSettings:
        """From ``to_dict`` output or a recorded environment (missing keys: torch's defaults)."""
        return cls(
            bool(doc.get("cudnn_benchmark", True)),
            doc.get("cudnn_benchmark_limit"),
            bool(doc.get("cudnn_depthwise_heuristic", False)),
        )


def timing_window(min_time_ms: float | None) -> TimingPlan | None:
    """A timing plan whose timed samples cover ``min_time_ms`` with a warm-up of at most 100 ms; None: the
    measurement's default plan."""
    if min_time_ms is None:
        return None
    check_timed_ms(min_time_ms)
    return TimingPlan(warmup_ms=min(100.0, min_time_ms), min_total_ms=float(min_time_ms))


def apply_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count for this process (``torch.set_num_threads``; it stays set); None: leave it."""
    if check_threads(threads) is not None:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class MeasureRequest:
    """One model to measure, and how. Checked when made: a bad backend, precision name, resolution, peak or cuDNN
    combination is a ``UsageError`` before anything is built. ``precision`` None: fp16 on a GPU, fp32 on a CPU;
    ``device`` None: cuda if present; ``resolution`` None: the model's native one. ``ceilings``: "measure" (measured
    once per device and cached), "skip", or measured ``Ceilings`` to use. ``plan`` None: the measurement's
    default timing plan. ``threads``: torch's intra-op thread count, set for the whole process when the
    measurement is prepared (a CPU cell's condition; on a GPU only the host's work uses it); None: torch's own."""

    model: str
    precision: str | None = None
    backend: str = "graph"
    device: str | None = None
    resolution: int | None = None
    channels_last: bool = True
    peak_tflops: float | None = None
    ceilings: Ceilings | str = "measure"
    plan: TimingPlan | None = None
    cudnn: CudnnSettings = field(default_factory=CudnnSettings)
    threads: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise UsageError(f"give a model to measure, got {self.model!r}")
        backend = get_backend(self.backend)
        if self.precision is not None:
            parse_precision(self.precision)
        if self.resolution is not None:
            zoo.check_resolution(self.resolution)
        if self.peak_tflops is not None:
            check_peak_tflops(self.peak_tflops)
        if not isinstance(self.ceilings, Ceilings) and self.ceilings not in CEILINGS_POLICIES:
            raise UsageError(f"ceilings must be measured Ceilings or one of {CEILINGS_POLICIES}, got {self.ceilings!r}")
        if not isinstance(self.cudnn, CudnnSettings):
            raise UsageError(f"cudnn must be CudnnSettings, got {type(self.cudnn).__name__}")
        self.cudnn.check_backend(backend.name)
        check_threads(self.threads)

    def replace(self, **changes) -> MeasureRequest:
        """A copy with some fields changed (and checked again)."""
        return dataclasses.replace(self, **changes)


def as_request(model: MeasureRequest | str, **options) -> MeasureRequest:
    """A request from a request, or from a model string and the request's fields as keywords."""
    if isinstance(model, MeasureRequest):
        return model.replace(**options) if options else model
    return MeasureRequest(model, **options)
