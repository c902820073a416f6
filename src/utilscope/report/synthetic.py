"""A synthetic survey store with the columns of ``Store.frame()`` and ``Store.op_class_frame()``, for tests and the
report benchmark. The numbers are plausible, not measured: utilization grows with batch size and model size,
nvml_util stays high while FLOP utilization stays low, the largest models run out of memory at the largest batch.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from utilscope.survey.schema import KEY_COLUMNS, Configuration

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
CONFIG = Configuration("NVIDIA H200", "channels_last", "2.5.1+cu124", "90100", "550.54", True, None, False)
OP_CLASSES = ["dense_conv", "pointwise_conv", "depthwise_conv", "linear", "norm", "activation", "pool", "elementwise"]


def synthetic_models(count: int, families: int = len(FAMILIES)) -> pd.DataFrame:
    """``count`` models spread over the first ``families`` families in turn: model, family, flops_per_sample, params,
    scale (the family's utilization scale)."""
    names = list(FAMILIES)[:families]
    rows = []
    for i in range(count):
        family = names[i % len(names)]
        scale, gflops = FAMILIES[family]
        size = 1.6 ** (i // len(names))  # each further model of a family has 1.6 times the FLOPs of the last
        rows.append(
            dict(
                model=f"timm:{family.lower()}_{i // len(names)}",
                family=family,
                flops_per_sample=int(gflops * size * 1e9),
                params=int(gflops * size * 6e6),
                scale=scale,
            )
        )
    return pd.DataFrame(rows)


def synthetic_store(
    rng: np.random.Generator,
    models: int = 12,
    families: int = len(FAMILIES),
    batches: tuple[int, ...] = (1, 8, 32, 128, 256),
    backends: tuple[str, ...] = ("graph", "inference"),
    errors: int = 2,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measurements, op_classes): one measurement per model x batch x backend, op classes at the largest batch.

    The largest model of each family with more than one model runs out of memory at the largest batch; ``errors``
    further rows (drawn with ``rng``) become ``"error: ..."`` rows.
    """
    catalog = synthetic_models(models, families)
    grid = catalog.merge(pd.DataFrame({"batch": list(batches)}), how="cross")
    grid = grid.merge(pd.DataFrame({"backend": list(backends)}), how="cross")
    frame = _measure(grid, rng)
    family_flops = grid.groupby("family")["flops_per_sample"]
    largest = (grid["flops_per_sample"] == family_flops.transform("max")) & (family_flops.transform("nunique") > 1)
    frame.loc[largest & (grid["batch"] == max(batches)), "status"] = "oom"
    failing = rng.choice(np.flatnonzero(frame["status"] == "ok"), size=errors, replace=False)
    frame.loc[failing, "status"] = "error: RuntimeError: CUDA error: an illegal memory access was encountered"
    metrics = ["latency_ms", "samples_per_s", "achieved_tflops", "utilization", "utilization_vs_ceiling"]
    metrics += ["achieved_gbs", "bandwidth_utilization", "nvml_util", "cv"]
    frame.loc[frame["status"] != "ok", metrics] = np.nan
    return frame, _op_classes(frame, rng)


def _measure(grid: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    batch = grid["batch"].to_numpy(float)
    saturation = batch / (batch + 12.0)
    size = (grid["flops_per_sample"].to_numpy(float) / 1e9) ** 0.15
    boost = np.where(grid["backend"] == "inference", 1.15, 1.0)
    noise = rng.lognormal(0.0, 0.08, len(grid))
    utilization = np.clip(grid["scale"].to_numpy() * saturation * size * boost * noise, 1e-4, 0.92)
    samples_per_s = utilization * PEAK_TFLOPS * 1e12 / grid["flops_per_sample"].to_numpy(float)
    nvml = np.clip(35 + 65 * batch / (batch + 3) + rng.normal(0, 3, len(grid)), 0, 100)
    nvml[rng.random(len(grid)) < 0.05] = np.nan
    achieved_gbs = rng.uniform(200, 3000, len(grid))
    return grid.drop(columns="scale").assign(
        resolution=224,
        precision="fp16",
        **asdict(CONFIG),
        software=CONFIG.software,
        status="ok",
        latency_ms=1e3 * batch / samples_per_s,
        samples_per_s=samples_per_s,
        achieved_tflops=utilization * PEAK_TFLOPS,
        utilization=utilization,
        utilization_vs_ceiling=utilization / 0.8,
        peak_tflops=PEAK_TFLOPS,
        peak_source="datasheet",
        achieved_gbs=achieved_gbs,
        bandwidth_utilization=achieved_gbs / 4800.0,
        nvml_util=nvml,
        cv=rng.uniform(0.001, 0.04, len(grid)),
        unstable=False,
        iters_per_sample=np.maximum(1, 256 // batch.astype(int)),
        cuda_graph=grid["backend"] == "graph",
        notes=[[] for _ in range(len(grid))],
        environment=[{"driver": "550.54", "cuda": "12.4"} for _ in range(len(grid))],
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
