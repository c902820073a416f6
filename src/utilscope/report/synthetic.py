"""A synthetic survey store with the columns of ``Store.frame()`` and ``Store.op_class_frame()``, for tests and the
report benchmark. The numbers are plausible, not measured: utilization grows with batch size and model size,
nvml_util stays high while FLOP utilization stays low, the largest models run out of memory at the largest batch.
With several ``devices`` the same grid is measured on each GPU in turn (a store of one survey per GPU type).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from utilscope.errors import UsageError
from utilscope.survey.schema import GPU_THREADS, KEY_COLUMNS, Configuration

FAMILIES = {  # family: (utilization scale, GFLOPs per sample of its smallest model)
    "ResNet": (0.20, 1.8),
    "EfficientNet": (0.05, 0.4),
    "MobileNetV3": (0.025, 0.06),
    "ConvNeXt": (0.22, 4.5),
    "RegNet": (0.14, 0.8),
    "DenseNet": (0.08, 2.9),
    "VGG": (0.28, 7.6),
    "ViT": (0.30, 4.4),
}
PEAK_TFLOPS = 989.5  # H200 dense bf16/fp16 tensor
CONFIG = Configuration("NVIDIA H200", "channels_last", "2.5.1+cu124", "90100", "550.54", True, None, False, GPU_THREADS)
DEVICES = ((CONFIG.device, PEAK_TFLOPS),)  # (name, dense fp16 peak TFLOP/s) of each GPU the grid is measured on
OTHER_DRIVER = "535.183.01"  # the driver of every device after the first: its software label differs too
FILL_EXPONENT = 0.3  # a GPU with k times less peak reaches k ** 0.3 times the utilization of the first one
GROWTH = 1.6  # each further model of a family has 1.6 times the FLOPs of the last (the first ten)
OP_CLASSES = ["dense_conv", "pointwise_conv", "depthwise_conv", "linear", "norm", "activation", "pool", "elementwise"]


def family_parameters(families: int) -> dict[str, tuple[float, float]]:
    """The first ``families`` families: ``FAMILIES`` in order, then generated ones (``"Family 09"``, ...) whose
    utilization scale and smallest GFLOPs are those of a named family (in turn) times fixed factors between 0.7 and 1.3
    (utilization) and 0.5 and 2 (GFLOPs): deterministic, no random draw."""
    if families < 1:
        raise UsageError(f"families must be 1 or more; got {families!r}")
    found = dict(list(FAMILIES.items())[:families])
    named = list(FAMILIES.values())
    for i in range(len(FAMILIES), families):
        scale, gflops = named[i % len(named)]
        fraction = (i * 0.618034) % 1.0  # golden-ratio steps: evenly spread, never repeating
        found[f"Family {i + 1:02d}"] = (scale * (0.7 + 0.6 * fraction), gflops * 2.0 ** (2 * fraction - 1))
    return found


def family_sizes(count: int, families: int, skew: float = 0.0) -> list[int]:
    """Models per family: ``count`` shared out over ``families`` in proportion to ``1 / rank ** skew`` (largest
    remainders), every family at least one when ``count >= families``; ``skew = 0`` gives equal shares, the first
    families one more."""
    if count < 0 or skew < 0:
        raise UsageError(f"count and skew must be 0 or more; got count {count!r}, skew {skew!r}")
    weights = 1.0 / np.arange(1, families + 1) ** skew
    floor = min(1, count // families) if families else 0
    shares = floor + (count - floor * families) * weights / weights.sum()
    sizes = np.floor(shares).astype(int)
    by_remainder = np.argsort(-(shares - sizes), kind="stable")  # ties: the earlier family
    sizes[by_remainder[: count - sizes.sum()]] += 1
    return [int(size) for size in sizes]


def synthetic_models(count: int, families: int = len(FAMILIES), skew: float = 0.0) -> pd.DataFrame:
    """``count`` models over the first ``families`` families (``family_parameters``; more than the 8 named ones are
    generated), ``family_sizes(count, families, skew)`` of each: model, family, flops_per_sample, params, scale (the
    family's utilization scale). Rows go round the families (the first model of each, then the second, ...).

    The k-th model of a family has ``GROWTH ** (k % 10) * 1.05 ** (k // 10)`` times the FLOPs of its first, so a
    family of hundreds stays within a few hundred times its smallest model."""
    parameters = family_parameters(families)
    sizes = dict(zip(parameters, family_sizes(count, families, skew), strict=True))
    rows = []
    for k in range(max(sizes.values(), default=0)):
        for family in [name for name, size in sizes.items() if size > k]:
            scale, gflops = parameters[family]
            size = GROWTH ** (k % 10) * 1.05 ** (k // 10)
            rows.append(
                dict(
                    model=f"timm:{family.lower().replace(' ', '')}_{k}",
                    family=family,
                    flops_per_sample=int(gflops * size * 1e9),
                    params=int(gflops * size * 6e6),
                    scale=scale,
                )
            )
    return pd.DataFrame(rows, columns=["model", "family", "flops_per_sample", "params", "scale"])


def synthetic_store(
    rng: np.random.Generator,
    models: int = 12,
    families: int = len(FAMILIES),
    batches: tuple[int, ...] = (1, 8, 32, 128, 256),
    backends: tuple[str, ...] = ("graph", "inference"),
    errors: int = 2,
    devices: tuple[tuple[str, float], ...] = DEVICES,
    skew: float = 0.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measurements, op_classes): one measurement per model x batch x backend x device, op classes at the largest
    batch.

    ``devices`` are (GPU name, dense peak TFLOP/s) pairs, e.g. ``(("NVIDIA H200", 989.5), ("NVIDIA L4", 121.0))``;
    a device after the first has driver ``OTHER_DRIVER`` and ``(first peak / its peak) ** FILL_EXPONENT`` times the
    utilization. ``families`` and ``skew`` share the models out as ``synthetic_models`` does (``skew = 1``: a few large
    families and many small ones, as in timm). The largest model of each family with more than one model runs out of
    memory at the largest batch (on every device); ``errors`` further rows (drawn with ``rng``) become
    ``"error: ..."`` rows.
    """
    _check_devices(devices)
    catalog = synthetic_models(models, families, skew)
    grid = catalog.merge(pd.DataFrame({"batch": list(batches)}), how="cross")
    grid = grid.merge(pd.DataFrame({"backend": list(backends)}), how="cross")
    first_peak = devices[0][1]
    frames = []
    for i, (name, peak) in enumerate(devices):
        config = replace(CONFIG, device=name, driver=CONFIG.driver if i == 0 else OTHER_DRIVER)
        frames.append(_measure(grid, rng, config, peak, (first_peak / peak) ** FILL_EXPONENT))
    frame = pd.concat(frames, ignore_index=True)
    family_flops = frame.groupby("family")["flops_per_sample"]
    largest = (frame["flops_per_sample"] == family_flops.transform("max")) & (family_flops.transform("nunique") > 1)
    frame.loc[largest & (frame["batch"] == max(batches)), "status"] = "oom"
    failing = rng.choice(np.flatnonzero(frame["status"] == "ok"), size=errors, replace=False)
    frame.loc[failing, "status"] = "error: RuntimeError: CUDA error: an illegal memory access was encountered"
    metrics = ["latency_ms", "samples_per_s", "achieved_tflops", "utilization", "utilization_vs_ceiling"]
    metrics += ["achieved_gbs", "bandwidth_utilization", "nvml_util", "cv"]
    frame.loc[frame["status"] != "ok", metrics] = np.nan
    return frame, _op_classes(frame, rng)


def _check_devices(devices: tuple[tuple[str, float], ...]) -> None:
    names = [name for name, _ in devices]
    if not devices or len(set(names)) < len(names):
        raise UsageError(f"devices must be one or more (name, peak TFLOP/s) pairs with distinct names; got {devices!r}")
    bad = [peak for _, peak in devices if not (isinstance(peak, numbers.Real) and math.isfinite(peak) and peak > 0)]
    if bad:
        raise UsageError(f"a device's peak must be a finite number of TFLOP/s above 0; got {bad[0]!r}")


def _measure(
    grid: pd.DataFrame,
    rng: np.random.Generator,
    config: Configuration = CONFIG,
    peak: float = PEAK_TFLOPS,
    fill: float = 1.0,
) -> pd.DataFrame:
    batch = grid["batch"].to_numpy(float)
    saturation = batch / (batch + 12.0)
    size = (grid["flops_per_sample"].to_numpy(float) / 1e9) ** 0.15
    boost = np.where(grid["backend"] == "inference", 1.15, 1.0)
    noise = rng.lognormal(0.0, 0.08, len(grid))
    utilization = np.clip(grid["scale"].to_numpy() * saturation * size * boost * noise * fill, 1e-4, 0.92)
    samples_per_s = utilization * peak * 1e12 / grid["flops_per_sample"].to_numpy(float)
    nvml = np.clip(35 + 65 * batch / (batch + 3) + rng.normal(0, 3, len(grid)), 0, 100)
    nvml[rng.random(len(grid)) < 0.05] = np.nan
    achieved_gbs = rng.uniform(200, 3000, len(grid))
    return grid.drop(columns="scale").assign(
        resolution=224,
        precision="fp16",
        **asdict(config),
        software=config.software,
        status="ok",
        latency_ms=1e3 * batch / samples_per_s,
        samples_per_s=samples_per_s,
        achieved_tflops=utilization * peak,
        utilization=utilization,
        utilization_vs_ceiling=utilization / 0.8,
        peak_tflops=peak,
        peak_source="datasheet",
        achieved_gbs=achieved_gbs,
        bandwidth_utilization=achieved_gbs / 4800.0,
        nvml_util=nvml,
        cv=rng.uniform(0.001, 0.04, len(grid)),
        unstable=False,
        iters_per_sample=np.maximum(1, 256 // batch.astype(int)),
        cuda_graph=grid["backend"] == "graph",
        notes=[[] for _ in range(len(grid))],
        environment=[{"driver": config.driver, "cuda": "12.4"} for _ in range(len(grid))],
        measured_at="2025-01-01T00:00:00+00:00",
        wall_s=rng.uniform(2, 20, len(grid)),
    )


def _op_classes(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Op-class shares of every successful series at its largest successful batch (Dirichlet-drawn shares)."""
    keys = [*KEY_COLUMNS, "software"]
    ok = frame[frame["status"] == "ok"].sort_values("batch")
    tops = ok.groupby([k for k in keys if k != "batch"], sort=False, dropna=False).tail(1)
    rows = []
    for row in tops.itertuples(index=False):
        flop_share = rng.dirichlet(np.ones(len(OP_CLASSES)))
        time_share = rng.dirichlet(np.ones(len(OP_CLASSES)))
        for op_class, flops, time in zip(OP_CLASSES, flop_share, time_share, strict=True):
            values = dict(op_class=op_class, flop_share=flops, time_share=time, time_ms=time * row.latency_ms)
            rows.append({k: getattr(row, k) for k in keys} | values)
    return pd.DataFrame(rows, columns=keys + ["op_class", "flop_share", "time_share", "time_ms"])
