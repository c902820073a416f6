"""Measured ceilings of the device at hand: the best large-GEMM FLOP/s per precision and device copy bandwidth.

A datasheet peak is what the silicon could do at its rated clock; the ceiling is what a large, well-tuned
GEMM (cuBLAS / oneDNN through torch) actually reaches here. Utilization is reported against both.

Each ceiling is the best of several repetitions; their spread (worst, median, best) is recorded beside it, since a
CPU's ceiling moves with the machine's load. Results are cached as JSON, one file per device (a CPU's with torch's
thread count: ``ceilings_device``, as a CPU ceiling depends on it) + torch version, under
``cache_dir()`` (``utilscope.cache``: ``~/.cache/utilscope/ceilings`` by default, under ``$XDG_CACHE_HOME`` or
``$UTILSCOPE_CACHE_DIR`` when set), on a CPU as on a GPU; ``refresh=True`` re-measures.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import statistics
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from utilscope import cache
from utilscope.errors import UsageError
from utilscope.hardware.devices import check_device
from utilscope.hardware.specs import PRECISIONS, DeviceSpec, detect, normalize_precision
from utilscope.precision import Precision
from utilscope.torch_flags import tf32_mode
from utilscope.units import now_iso

GPU_GEMM_N = 8192
CPU_GEMM_N = 1024
GPU_COPY_MIB = 1024
CPU_COPY_MIB = 256
GPU_REPS, GPU_WARMUP = 10, 3
CPU_REPS, CPU_WARMUP = 10, 1
CPU_BUDGET_S = 1.0  # per measurement (measured once, then cached): fp32 GEMM, bf16 GEMM and copy ~3 s at most
GPU_BUDGET_S = 5.0
SEED = 0


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings. ``gemm_tflops`` maps precision -> best GEMM TFLOP/s (int8: tera-ops/s)."""

    device_name: str
    device_kind: str  # "cuda" | "cpu"
    gemm_tflops: Mapping[str, float] = field(hash=False)
    copy_gbs: float
    measured_at: str  # ISO 8601, UTC
    torch_version: str
    note: str
    gemm_n: int = 0  # GEMM size used (n x n x n)
    copy_mib: int = 0  # source tensor size of the copy measurement
    # precision -> {"min", "median", "max": TFLOP/s, "reps": n} over the repetitions; {}: not recorded (older cache)
    gemm_spread_tflops: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False)
    copy_spread_gbs: Mapping[str, float] = field(default_factory=dict, hash=False)  # the same for the copy, GB/s

    def __post_init__(self) -> None:
        object.__setattr__(self, "gemm_tflops", MappingProxyType(dict(self.gemm_tflops)))
        spread = {prec: MappingProxyType(dict(s)) for prec, s in self.gemm_spread_tflops.items()}
        object.__setattr__(self, "gemm_spread_tflops", MappingProxyType(spread))
        object.__setattr__(self, "copy_spread_gbs", MappingProxyType(dict(self.copy_spread_gbs)))

    def tflops(self, precision: str) -> float:
        """The measured GEMM ceiling for ``precision``; UsageError listing the measured ones if absent."""
        prec = normalize_precision(precision)
        if prec not in self.gemm_tflops:
            have = ", ".join(self.gemm_tflops) or "none"
            raise UsageError(f"no measured {prec} ceiling on {self.device_name}; measured: {have}")
        return self.gemm_tflops[prec]

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["gemm_tflops"] = dict(self.gemm_tflops)
        out["gemm_spread_tflops"] = {prec: dict(s) for prec, s in self.gemm_spread_tflops.items()}
        out["copy_spread_gbs"] = dict(self.copy_spread_gbs)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ceilings:
        """From ``to_dict`` output; the spreads, which older records lack, read as not recorded."""
        names = {f.name for f in fields(cls)}
        missing = names - set(data) - {"gemm_spread_tflops", "copy_spread_gbs"}
        if missing:
            raise ValueError(f"ceilings record lacks {sorted(missing)}")
        return cls(**{k: data[k] for k in names if k in data})


def cache_dir() -> Path:
    """Where ceilings are cached: ``utilscope.cache.cache_dir("ceilings")``."""
    return cache.cache_dir("ceilings")


def cache_path(device_name: str, torch_version: str | None = None) -> Path:
    """The JSON file holding the ceilings of ``device_name`` under ``torch_version`` (default: this torch)."""
    version = torch_version or torch.__version__
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", f"{device_name}__torch-{version}").strip("-")
    return cache_dir() / f"{slug}.json"


def ceilings_cached(device: str | torch.device | None = None) -> bool:
    """Whether ``get_ceilings(device)`` would read its cache rather than measure (at the default sizes)."""
    dev = resolve_device(device)
    n, mib = _sizes(dev, None, None)
    cached = _read_cache(cache_path(ceilings_device(dev)))
    return cached is not None and (cached.gemm_n, cached.copy_mib) == (n, mib)


def get_ceilings(
    device: str | torch.device | None = None,
    refresh: bool = False,
    *,
    gemm_n: int | None = None,
    copy_mib: int | None = None,
) -> Ceilings:
    """Cached ceilings of ``device`` (default: cuda if available, else cpu); measured when absent or stale.

    ``refresh=True`` re-measures. A cached record made with other sizes than asked is re-measured too.
    """
    dev = resolve_device(device)
    n, mib = _sizes(dev, gemm_n, copy_mib)
    path = cache_path(ceilings_device(dev))
    if not refresh:
        cached = _read_cache(path)
        if cached is not None and (cached.gemm_n, cached.copy_mib) == (n, mib):
            return cached
    result = measure_ceilings(dev, gemm_n=n, copy_mib=mib)
    _write_cache(path, result)
    return result


def measure_ceilings(
    device: str | torch.device | None = None, *, gemm_n: int | None = None, copy_mib: int | None = None
) -> Ceilings:
    """Measure now (no cache): best GEMM TFLOP/s per available precision and copy GB/s."""
    dev = resolve_device(device)
    n, mib = _sizes(dev, gemm_n, copy_mib)
    gemm_spread: dict[str, dict[str, float]] = {}
    skipped: list[str] = []
    for prec in _gemm_precisions(dev, skipped):
        try:
            gemm_spread[prec] = measure_gemm_spread(dev, prec, n)
        except RuntimeError as exc:  # e.g. int8 GEMM unsupported by this torch/GPU: recorded, not fatal
            first_line = (str(exc).splitlines() or [""])[0][:120]
            skipped.append(f"{prec} ({type(exc).__name__}: {first_line})")
    copy_spread = measure_copy_spread(dev, mib)
    return Ceilings(
        device_name=ceilings_device(dev),
        device_kind=dev.type,
        gemm_tflops={prec: spread["max"] for prec, spread in gemm_spread.items()},
        copy_gbs=copy_spread["max"],
        measured_at=now_iso(),
        torch_version=torch.__version__,
        note=_note(dev, n, mib, skipped),
        gemm_n=n,
        copy_mib=mib,
        gemm_spread_tflops=gemm_spread,
        copy_spread_gbs=copy_spread,
    )


def spread(rates: list[float]) -> dict[str, float]:
    """{"min", "median", "max", "reps"} of repeated rates (TFLOP/s, GB/s): the ceiling is the max."""
    return {"min": min(rates), "median": statistics.median(rates), "max": max(rates), "reps": len(rates)}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """None -> cuda if available else cpu. Only cpu and cuda are supported: a name is checked by
    ``devices.check_device`` (the command line's rule) before torch makes it."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, str):
        check_device(device)
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UsageError(f"bad device {device!r}; use cpu, cuda or cuda:N") from exc
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"unsupported device {device!r}; use cpu, cuda or cuda:N")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("CUDA is not available on this machine; use --device cpu")
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise UsageError(f"no CUDA device {index}; this machine has {torch.cuda.device_count()}")
        dev = torch.device("cuda", index)
    return dev


def device_name(dev: torch.device) -> str:
    """CUDA: the name torch reports (what specs.detect matches). CPU: its model name (the thread count a measurement
    ran with is recorded beside it, not in it)."""
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return _cpu_model()


def device_spec(dev: torch.device) -> DeviceSpec | None:
    """The spec table's row of a CUDA device (``specs.detect`` on its name); None for a CPU or an unknown GPU."""
    return detect(device_name(dev)) if dev.type == "cuda" else None


def with_threads(name: str, threads: int) -> str:
    """A CPU's name with a torch thread count, "AMD EPYC 9654 (16 threads)", "(1 thread)": how a CPU's ceilings are
    cached and a CPU measurement is shown (and how stores of schema 1 and 2 named a CPU, "(1 threads)" too)."""
    return f"{name} ({threads} thread{'' if threads == 1 else 's'})"


def ceilings_device(dev: torch.device) -> str:
    """What ceilings are cached and recorded under: the device's name, a CPU's with torch's thread count now."""
    return device_name(dev) if dev.type == "cuda" else with_threads(device_name(dev), torch.get_num_threads())


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def _sizes(dev: torch.device, gemm_n: int | None, copy_mib: int | None) -> tuple[int, int]:
    gpu = dev.type == "cuda"
    n = gemm_n if gemm_n is not None else (GPU_GEMM_N if gpu else CPU_GEMM_N)
    mib = copy_mib if copy_mib is not None else (GPU_COPY_MIB if gpu else CPU_COPY_MIB)
    for label, value in (("gemm_n", n), ("copy_mib", mib)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{label} must be a positive integer, got {value!r}")
    return n, mib


def _gemm_precisions(dev: torch.device, skipped: list[str]) -> list[str]:
    """Precisions worth measuring here; appends the reason for each one left out to ``skipped``."""
    if dev.type == "cpu":
        if _cpu_bf16_is_fast():
            return ["fp32", "bf16"]
        skipped.append("bf16 (slower than fp32 on this CPU: no native bf16 GEMM)")
        return ["fp32"]
    major, _ = torch.cuda.get_device_capability(dev)
    if major < 8:
        skipped.append("tf32, bf16 (no such tensor-core unit before compute capability 8.0)")
        return ["fp32", "fp16", "int8"]
    return list(PRECISIONS)


def _cpu_bf16_is_fast(n: int = 256) -> bool:
    """A quick probe: is a bf16 GEMM at least as fast as an fp32 one (native AMX/AVX512-BF16 kernels)?"""
    dev = torch.device("cpu")
    fp32_s = min(_time_reps_s(_make_gemm(dev, "fp32", n), dev, reps=3, warmup=1, budget_s=0.05))
    bf16_s = min(_time_reps_s(_make_gemm(dev, "bf16", n), dev, reps=3, warmup=1, budget_s=0.05))
    return bf16_s <= fp32_s


def measure_gemm_tflops(dev: torch.device, precision: str, n: int) -> float:
    """Best-of-reps TFLOP/s (int8: TOPS) of an n x n x n GEMM, warm-up excluded; 2*n^3 operations."""
    return measure_gemm_spread(dev, precision, n)["max"]


def measure_gemm_spread(dev: torch.device, precision: str, n: int) -> dict[str, float]:
    """TFLOP/s (int8: TOPS) of repeated n x n x n GEMMs, warm-up excluded, 2*n^3 operations each: ``spread``."""
    prec = normalize_precision(precision)
    gpu = dev.type == "cuda"
    with _matmul_precision(prec), torch.inference_mode():
        run = _make_gemm(dev, prec, n)
        times_s = _time_reps_s(
            run,
            dev,
            reps=GPU_REPS if gpu else CPU_REPS,
            warmup=GPU_WARMUP if gpu else CPU_WARMUP,
            budget_s=GPU_BUDGET_S if gpu else CPU_BUDGET_S,
        )
    return spread([2.0 * n**3 / t / 1e12 for t in times_s])


def _make_gemm(dev: torch.device, precision: str, n: int) -> Callable[[], Any]:
    gen = torch.Generator(device=dev).manual_seed(SEED)
    dtype = Precision(precision).dtype
    if precision == "int8":
        a = torch.randint(-8, 8, (n, n), generator=gen, device=dev, dtype=dtype)
        b = torch.randint(-8, 8, (n, n), generator=gen, device=dev, dtype=dtype)
        return lambda: torch._int_mm(a, b)
    a = torch.randn(n, n, generator=gen, device=dev, dtype=torch.float32).to(dtype)
    b = torch.randn(n, n, generator=gen, device=dev, dtype=torch.float32).to(dtype)
    return lambda: torch.mm(a, b)


def measure_copy_gbs(dev: torch.device, mib: int) -> float:
    """Device copy bandwidth: (read + write bytes) / best time of ``dst.copy_(src)``, src ``mib`` MiB."""
    return measure_copy_spread(dev, mib)["max"]


def measure_copy_spread(dev: torch.device, mib: int) -> dict[str, float]:
    """GB/s (read + write bytes) of repeated ``dst.copy_(src)``, src ``mib`` MiB: ``spread``."""
    gpu = dev.type == "cuda"
    gen = torch.Generator(device=dev).manual_seed(SEED)
    numel = mib * (1 << 20) // 4
    with torch.inference_mode():
        src = torch.randn(numel, generator=gen, device=dev, dtype=torch.float32)
        dst = torch.empty_like(src)
        times_s = _time_reps_s(
            lambda: dst.copy_(src),
            dev,
            reps=GPU_REPS * 2 if gpu else CPU_REPS,
            warmup=GPU_WARMUP if gpu else CPU_WARMUP,
            budget_s=GPU_BUDGET_S if gpu else CPU_BUDGET_S,
        )
    return spread([2.0 * src.nbytes / t / 1e9 for t in times_s])


def _time_reps_s(run: Callable[[], Any], dev: torch.device, reps: int, warmup: int, budget_s: float) -> list[float]:
    """Seconds of each of up to ``reps`` timed calls of ``run()`` (at least 2; stops once over budget)."""
    for _ in range(warmup):
        run()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    times_s: list[float] = []
    for _ in range(max(reps, 2)):
        times_s.append(_time_once_s(run, dev))
        if len(times_s) >= 2 and sum(times_s) > budget_s:
            break
    return times_s


def _time_once_s(run: Callable[[], Any], dev: torch.device) -> float:
    if dev.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    start_s = time.perf_counter()
    run()
    return time.perf_counter() - start_s


def _matmul_precision(precision: str):
    """fp32 GEMMs in true FP32, tf32 ones on TF32 tensor cores; the previous setting is restored after."""
    return tf32_mode(precision == "tf32")


def _note(dev: torch.device, n: int, mib: int, skipped: list[str]) -> str:
    clock = "CUDA events" if dev.type == "cuda" else "time.perf_counter"
    parts = [
        f"best of repeated {n}x{n}x{n} GEMMs after warm-up ({clock}; their spread is recorded); copy = "
        f"read+write bytes of a {mib} MiB copy_()",
    ]
    if dev.type == "cpu":
        parts.insert(0, "CPU: there is no datasheet peak; the measured ceiling is the peak")
    parts += [f"not measured: {reason}" for reason in skipped]
    return "; ".join(parts)


_warned_paths: set[Path] = set()


def _read_cache(path: Path) -> Ceilings | None:
    if not path.is_file():
        return None
    try:
        return Ceilings.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        if path not in _warned_paths:  # warn once per file, then re-measure and overwrite
            _warned_paths.add(path)
            warnings.warn(f"ignoring unreadable ceilings cache {path}: {exc}", stacklevel=3)
        return None


def _write_cache(path: Path, result: Ceilings) -> None:
    cache.keep(path, json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n")
