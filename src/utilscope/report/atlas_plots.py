"""The GPU atlas's static figures (matplotlib), each a function of the atlas rows (``atlas.atlas_rows``) returning a
figure, or a ``str`` saying why the rows do not allow it: utilization per GPU and conv class, a few models across
GPUs, the rank correlation of throughput between GPUs, and compile over eager per GPU. Each compares rows of one
condition (``atlas.main_rows``) unless it says otherwise, of CNNs only (``atlas.is_cnn``: the published tables
bring transformers and hybrids, which the interactive figures show on request). Its point clouds are interactive
(``interactive``); the GPU's names and ridge points they share are here.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.counting.architecture import CONV_CLASSES
from utilscope.report import atlas, plots

CAPTION = (
    "FLOP utilization: counted FLOPs x samples/s over the GPU's dense datasheet peak for the precision "
    "(amp: fp16 tensor cores, fp32 accumulate). Published rows: timm's tables; measured: utilscope."
)
SLOPE_MODELS = (
    "timm:resnet50",
    "timm:resnet18",
    "timm:efficientnet_b0",
    "timm:mobilenetv3_large_100",
    "timm:convnext_tiny",
    "timm:regnety_032",
    "timm:densenet121",
    "timm:resnext50_32x4d",
)


TICK_WIDTH = 18  # characters a GPU's name takes on a line of a figure's tick label


def gpu_label(gpu: str, width: int = 0) -> str:
    """A GPU's one name in reports (``hardware.gpu_display_name``: ``h200_sxm`` -> "NVIDIA H200 SXM"); ``width``:
    wrapped onto lines of at most that many characters (a figure's tick labels)."""
    name = hardware.gpu_display_name(gpu)
    return textwrap.fill(name, width, break_long_words=False) if width else name


def table_label(rows: pd.DataFrame, gpu: str) -> str:
    """``RTX 4090`` over ``timm, torch 2.9.1``: the GPU and whose table its rows are."""
    first = rows[rows["gpu"] == gpu].iloc[0]
    source = "utilscope" if first["source"] == atlas.MEASURED else "timm"
    return f"{gpu_label(gpu, TICK_WIDTH)}\n{source}, torch {first['torch']}"


def table_labels(rows: pd.DataFrame) -> dict[str, str]:
    """``table_label`` on one line for each GPU of ``rows``, in ``atlas.gpu_order``."""
    return {gpu: table_label(rows, gpu).replace("\n", ": ") for gpu in atlas.gpu_order(rows)}


def plot_class_distribution(frame: pd.DataFrame):
    """Box plots of utilization per GPU (x) and conv class (colour), one point per (model, resolution) row."""
    title = "FLOP utilization per GPU and conv class (amp, NCHW, eager, batch as published)"
    rows = atlas.main_rows(frame)
    rows = rows[atlas.is_cnn(rows)]
    if rows.empty:
        return "no counted rows in timm's condition"
    gpus, classes = atlas.gpu_order(rows), [c for c in CONV_CLASSES if c in set(rows["conv_class"])]
    figure, (axes,) = plots._figure(max(7.0, 1.6 * len(gpus) * max(1, len(classes)) / 2), 5.5)
    width = 0.8 / max(1, len(classes))
    for k, conv_class in enumerate(classes):
        data = [rows[(rows["gpu"] == gpu) & (rows["conv_class"] == conv_class)]["utilization"].dropna() for gpu in gpus]
        positions = [i - 0.4 + width * (k + 0.5) for i in range(len(gpus))]
        kept = [(p, d) for p, d in zip(positions, data, strict=True) if len(d)]
        if kept:
            box = axes.boxplot(
                [d for _, d in kept],
                positions=[p for p, _ in kept],
                widths=width * 0.9,
                patch_artist=True,
                showfliers=False,
                manage_ticks=False,
            )
            for patch in box["boxes"]:
                patch.set_facecolor(f"C{k}")
                patch.set_alpha(0.6)
        axes.scatter([], [], color=f"C{k}", label=f"{conv_class} ({sum(len(d) for d in data)} rows)")
    axes.set_xticks(range(len(gpus)), [table_label(rows, gpu) for gpu in gpus], fontsize=8)
    axes.set_ylabel("FLOP utilization")
    plots._percent_axis(axes.yaxis)
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return plots._captioned(figure, CAPTION)


def plot_slope(frame: pd.DataFrame, models=SLOPE_MODELS):
    """One line per model (at its most common resolution): utilization on each GPU, GPUs by peak."""
    title = "One model across GPUs: FLOP utilization (amp, NCHW, eager)"
    rows = atlas.main_rows(frame)
    rows = rows[atlas.is_cnn(rows)]
    chosen = rows[rows["model"].isin(models)]
    if chosen.empty or chosen["gpu"].nunique() < 2:
        return "fewer than two GPUs have rows of these models"
    gpus = atlas.gpu_order(rows)
    figure, (axes,) = plots._figure(8.0, 5.5)
    for k, (model, mine) in enumerate(chosen.groupby("model", sort=True)):
        resolution = mine["resolution"].mode().iloc[0]
        at = mine[mine["resolution"] == resolution].drop_duplicates("gpu").set_index("gpu")["utilization"]
        xs = [i for i, gpu in enumerate(gpus) if gpu in at.index]
        axes.plot(
            xs, [at[gpus[i]] for i in xs], marker="o", color=f"C{k % 10}", label=f"{plots._short(model)} @{resolution}"
        )
    axes.set_xticks(range(len(gpus)), [gpu_label(g, TICK_WIDTH) for g in gpus])
    axes.set_ylabel("FLOP utilization")
    plots._percent_axis(axes.yaxis)
    axes.set_title(title)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return plots._captioned(figure, CAPTION)


def plot_rank_correlation(frame: pd.DataFrame):
    """Spearman's rank correlation of samples/s between GPUs, over the rows each pair shares."""
    title = "Throughput rank correlation between GPUs (Spearman, shared model@resolution rows)"
    rows = atlas.main_rows(frame)
    rows = rows[atlas.is_cnn(rows)]
    matrix = atlas.rank_correlation(rows) if not rows.empty else pd.DataFrame()
    if matrix.shape[0] < 2:
        return "fewer than two GPUs"
    figure, (axes,) = plots._figure(1.3 * len(matrix) + 3, 1.1 * len(matrix) + 2)
    values = matrix.to_numpy(float)
    axes.imshow(values, vmin=0.8, vmax=1.0, cmap="viridis")
    labels = [gpu_label(g, TICK_WIDTH) for g in matrix.columns]
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    for (i, j), value in np.ndenumerate(values):
        text = "–" if np.isnan(value) else f"{value:.3f}"
        axes.text(j, i, text, ha="center", va="center", color="white" if value < 0.93 else "black", fontsize=9)
    axes.set_title(title, fontsize=10)
    return plots._captioned(figure, CAPTION)


def ridge_point(gpu: str, peak_tflops: float) -> float | None:
    """FLOPs per byte at which the GPU's peak and its memory bandwidth meet (None for a GPU the spec table lacks)."""
    spec = hardware.find_spec(gpu)
    return peak_tflops * 1e12 / (spec.memory_bandwidth_gbs * 1e9) if spec else None


def plot_dynamo_gain(frame: pd.DataFrame):
    """Per GPU (and torch): the distribution of compile / eager samples/s over the rows both tables have
    (``atlas.dynamo_gain``)."""
    title = "torch.compile over eager, per GPU (same table family, model, resolution and batch)"
    gains = atlas.dynamo_gain(frame)
    if gains.empty:
        return "no GPU has compile and eager rows of the same work"
    groups = list(gains.groupby(["gpu", "torch", "source"], sort=True))
    figure, (axes,) = plots._figure(max(6.0, 2.0 * len(groups)), 5.0)
    data = [group["gain"].to_numpy() for _, group in groups]
    axes.boxplot(data, showfliers=False)
    for i, values in enumerate(data, start=1):
        axes.scatter(
            np.full(len(values), i) + np.random.default_rng(i).uniform(-0.15, 0.15, len(values)),
            values,
            s=4,
            alpha=0.3,
            color="C0",
        )
    axes.axhline(1.0, color="#444444", linewidth=1)
    labels = [
        f"{gpu_label(gpu, TICK_WIDTH)}\ntorch {torch}\n{source} ({len(v)})"
        for (gpu, torch, source), v in zip((key for key, _ in groups), data, strict=True)
    ]
    axes.set_xticks(range(1, len(groups) + 1), labels, fontsize=8)
    axes.set_yscale("log")
    axes.set_ylabel("samples/s compile / eager")
    axes.set_title(title)
    return plots._captioned(figure, CAPTION)
