"""The report's NAS figures, drawn when the store holds measurements of sampled architectures (``nas measure``):
throughput against FLOPs, the utilization distribution, and which design choices drive utilization — one panel per
(search space, batch size), from ``utilscope.nas.analysis``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.nas.analysis import analyze, nas_frame
from utilscope.report.plots import _figure, _save

TOP_FEATURES = 8


def has_nas_rows(measurements: pd.DataFrame) -> bool:
    ok = measurements[measurements["status"] == "ok"]
    return bool(ok["model"].str.startswith("nas:").any())


def _fine_percent_axis(axis, largest: float) -> None:
    """Percent ticks with enough decimals for small utilizations (0.05% must not read 0%)."""
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=2 if largest < 0.01 else 1 if largest < 0.1 else 0))


def _groups(frame: pd.DataFrame):
    return [(key, group) for key, group in frame.groupby(["space", "batch"])]


def plot_nas_throughput_vs_gflops(frame: pd.DataFrame, path: Path) -> Path:
    groups = _groups(frame)
    figure, panels = _figure(5.5 * len(groups), 4.5, columns=len(groups), sharey=False)
    for axes, ((space, batch), group) in zip(panels, groups, strict=True):
        axes.scatter(group["flops_per_sample"] / 1e9, group["samples_per_s"], s=10, alpha=0.6)
        rho = group["flops_per_sample"].rank().corr(group["samples_per_s"].rank())
        axes.set_title(f"{space}, batch {batch}: Spearman {rho:+.2f}")
        axes.set_xlabel("GFLOPs per sample")
        axes.grid(alpha=0.3)
        axes.tick_params(labelleft=True)
    panels[0].set_ylabel("measured samples/s")
    return _save(figure, path, f"{frame['model'].nunique()} architectures; one point per architecture")


def plot_nas_utilization(frame: pd.DataFrame, path: Path) -> Path:
    groups = _groups(frame)
    figure, panels = _figure(5.5 * len(groups), 4.0, columns=len(groups), sharey=False)
    for axes, ((space, batch), group) in zip(panels, groups, strict=True):
        axes.hist(group["utilization"], bins=30)
        median = group["utilization"].median()
        axes.axvline(median, color="black", linestyle="--", linewidth=1)
        axes.set_title(f"{space}, batch {batch}: median {median:.2%}")
        _fine_percent_axis(axes.xaxis, float(group["utilization"].max()))
        axes.set_xlabel("FLOP utilization")
        axes.tick_params(labelleft=True)
    panels[0].set_ylabel("architectures")
    return _save(figure, path, "dashed: the median")


def plot_nas_feature_effects(measurements: pd.DataFrame, records: dict[str, dict], path: Path) -> Path:
    results = sorted(analyze(measurements, records), key=lambda r: (r.space, r.batch))
    figure, panels = _figure(6.5 * len(results), 4.5, columns=len(results), sharey=False)
    for axes, result in zip(panels, results, strict=True):
        effects = result.effects.head(TOP_FEATURES).iloc[::-1]
        colors = np.where(effects["spearman"] >= 0, "#2a7", "#c44")
        axes.barh(effects["feature"], effects["spearman"], color=colors)
        axes.set_xlim(-1, 1)
        axes.axvline(0, color="black", linewidth=0.8)
        axes.set_title(f"{result.space}, batch {result.batch}")
        axes.set_xlabel("Spearman with utilization")
        axes.tick_params(labelleft=True)
    return _save(figure, path, f"the {TOP_FEATURES} design features most correlated with utilization, per panel")


NAS_FIGURES = (
    (
        "nas_throughput_vs_gflops.png",
        "NAS: throughput vs FLOPs",
        plot_nas_throughput_vs_gflops,
        "Sampled architectures of each search space: how well FLOPs rank measured throughput (Spearman in the title).",
    ),
    (
        "nas_utilization.png",
        "NAS: utilization distribution",
        plot_nas_utilization,
        "FLOP utilization of the sampled architectures, per space and batch size.",
    ),
)
NAS_EFFECTS_FIGURE = (
    "nas_feature_effects.png",
    "NAS: what drives utilization",
    "Spearman correlation of each design feature with utilization (utilscope nas analyze).",
)


def write_nas_figures(measurements: pd.DataFrame, out_dir: Path, records: dict[str, dict]) -> list[tuple]:
    """``(title, path, text)`` per NAS figure; none when the store has no NAS measurements. ``records``: the
    architectures' records (``Store.model_records``)."""
    if not has_nas_rows(measurements):
        return []
    frame = nas_frame(measurements, records)
    figures = [(title, draw(frame, out_dir / name), text) for name, title, draw, text in NAS_FIGURES]
    name, title, text = NAS_EFFECTS_FIGURE
    figures.append((title, plot_nas_feature_effects(measurements, records, out_dir / name), text))
    return figures
