"""The report's NAS figures, drawn when the store holds measurements of sampled architectures (``nas measure``):
throughput against FLOPs (interactive: a point cloud), the utilization distribution, and which design choices drive
utilization — one panel per (search space, batch size), from ``utilscope.nas.analysis``. Each figure is a function
of ``nas.analysis.nas_frame``'s rows (``FIGURES``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.nas.analysis import analyze_frame, nas_frame
from utilscope.report import interactive
from utilscope.report.figures import Figure, Kind, render
from utilscope.report.plots import _captioned, _figure

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


def plot_nas_utilization(frame: pd.DataFrame):
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
    return _captioned(figure, "dashed: the median")


def plot_nas_feature_effects(frame: pd.DataFrame):
    results = sorted(analyze_frame(frame), key=lambda r: (r.space, r.batch))
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
    return _captioned(figure, f"the {TOP_FEATURES} design features most correlated with utilization, per panel")


FIGURES = (  # each a function of nas_frame's rows, in page order
    Figure(
        "nas_throughput_vs_gflops",
        "NAS: throughput vs FLOPs",
        "Sampled architectures of each search space: how well FLOPs rank measured throughput (Spearman in the title). "
        "Hover a point to name its architecture.",
        interactive.nas_throughput_vs_gflops,
        Kind.INTERACTIVE,
    ),
    Figure(
        "nas_utilization",
        "NAS: utilization distribution",
        "FLOP utilization of the sampled architectures, per space and batch size.",
        plot_nas_utilization,
        Kind.STATIC,
    ),
    Figure(
        "nas_feature_effects",
        "NAS: what drives utilization",
        "Spearman correlation of each design feature with utilization (utilscope nas analyze).",
        plot_nas_feature_effects,
        Kind.STATIC,
    ),
)


def nas_figures(measurements: pd.DataFrame, records: dict[str, dict], out_dir: Path) -> str:
    """The NAS figures' HTML (``FIGURES``, the static ones written into ``out_dir``); "" when the store has no NAS
    measurements. ``records``: the architectures' records (``Store.model_records``)."""
    if not has_nas_rows(measurements):
        return ""
    return render(FIGURES, nas_frame(measurements, records), out_dir)
