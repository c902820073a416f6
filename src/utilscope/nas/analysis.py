"""Utilization inside a search space: how well FLOPs rank throughput, and which design choices drive utilization.

Input: the store's measurements of sampled architectures (``utilscope nas measure``), one row per architecture and
batch size. Correlations are Spearman's (Pearson on ranks; no scipy needed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from utilscope.errors import UsageError
from utilscope.nas.spaces import get_space

EQUAL_FLOPS_TOLERANCE = 0.05  # architectures within ±5% FLOPs of each other count as equal-FLOPs
MIN_ARCHITECTURES = 3  # fewer: no rank correlation (nan) and no feature effects (quarters of one or two values)


def spearman(x: pd.Series, y: pd.Series) -> float:
    both = pd.DataFrame({"x": x, "y": y}).dropna()
    if len(both) < MIN_ARCHITECTURES:
        return float("nan")
    ranks = both.rank()
    return float(ranks["x"].corr(ranks["y"]))


def nas_frame(measurements: pd.DataFrame, records: dict[str, dict]) -> pd.DataFrame:
    """The successful NAS rows, with each architecture's design features (from its record,
    ``Store.model_records``) as columns (``feature:<name>``)."""
    rows = measurements[measurements["model"].str.startswith("nas:") & (measurements["status"] == "ok")]
    if rows.empty:
        raise UsageError("the store has no successful measurements of sampled architectures (utilscope nas measure)")
    features = {}
    for model in rows["model"].unique():
        if model not in records:
            raise UsageError(f"the store holds no architecture record of {model}")
        record = records[model]
        features[model] = {f"feature:{k}": v for k, v in get_space(record["space"]).features(record).items()}
        features[model]["space"] = record["space"]
    return rows.join(pd.DataFrame.from_dict(features, orient="index"), on="model")


def equal_flops_spread(frame: pd.DataFrame, tolerance: float = EQUAL_FLOPS_TOLERANCE) -> pd.DataFrame:
    """Throughput spread among architectures of (nearly) equal FLOPs: log-spaced bins of width ±tolerance."""
    edges = np.log(frame["flops_per_sample"]) / np.log1p(2 * tolerance)
    groups = frame.assign(bin=np.floor(edges)).groupby("bin")
    spread = groups.agg(
        architectures=("model", "nunique"),
        gflops=("flops_per_sample", lambda f: f.median() / 1e9),
        min_samples_per_s=("samples_per_s", "min"),
        max_samples_per_s=("samples_per_s", "max"),
    )
    spread["max_over_min"] = spread["max_samples_per_s"] / spread["min_samples_per_s"]
    return spread[spread["architectures"] > 1].reset_index(drop=True)


def feature_effects(frame: pd.DataFrame) -> pd.DataFrame:
    """Per design feature: Spearman correlation with utilization, and the median utilization of the architectures
    in the feature's top quarter relative to its bottom quarter (the effect size). No rows for fewer than
    ``MIN_ARCHITECTURES`` architectures."""
    rows = []
    ranked = frame["model"].nunique() >= MIN_ARCHITECTURES if "model" in frame else len(frame) >= MIN_ARCHITECTURES
    for column in (c for c in frame.columns if c.startswith("feature:") and ranked):
        values = frame[column].astype(float)
        if values.nunique() < 2:
            continue
        low, high = values.quantile(0.25), values.quantile(0.75)
        bottom = frame.loc[values <= low, "utilization"].median()
        top = frame.loc[values >= high, "utilization"].median()
        rows.append(
            {
                "feature": column.removeprefix("feature:"),
                "spearman": spearman(values, frame["utilization"]),
                "top_over_bottom": top / bottom if bottom else float("nan"),
            }
        )
    effects = pd.DataFrame(rows, columns=["feature", "spearman", "top_over_bottom"])
    return effects.reindex(effects["spearman"].abs().sort_values(ascending=False).index).reset_index(drop=True)


@dataclass
class SpaceAnalysis:
    space: str
    batch: int
    architectures: int
    flops_throughput_spearman: float  # how well FLOPs rank throughput (negative: more FLOPs, fewer samples/s)
    utilization_quantiles: dict[str, float]
    spread: pd.DataFrame
    effects: pd.DataFrame  # empty when there are too few architectures

    @property
    def too_few_architectures(self) -> bool:
        """Fewer than ``MIN_ARCHITECTURES``: nothing is ranked (the Spearman is nan, there are no effects)."""
        return self.architectures < MIN_ARCHITECTURES

    def to_dict(self) -> dict:
        """The JSON of ``utilscope nas analyze --json`` (a nan, e.g. the Spearman of too few, is written null)."""
        frames = {"spread": self.spread.to_dict(orient="records"), "effects": self.effects.to_dict(orient="records")}
        return {**vars(self), "too_few_architectures": self.too_few_architectures, **frames}


def analyze(measurements: pd.DataFrame, records: dict[str, dict]) -> list[SpaceAnalysis]:
    """One analysis per (space, batch size, precision, backend) measured; largest groups first."""
    return analyze_frame(nas_frame(measurements, records))


def analyze_frame(frame: pd.DataFrame) -> list[SpaceAnalysis]:
    """``analyze`` of ``nas_frame``'s rows."""
    results = []
    for (space, batch, _, _), group in frame.groupby(["space", "batch", "precision", "backend"]):
        quantiles = group["utilization"].quantile([0.05, 0.25, 0.5, 0.75, 0.95])
        architectures = group["model"].nunique()
        results.append(
            SpaceAnalysis(
                space=space,
                batch=int(batch),
                architectures=architectures,
                flops_throughput_spearman=spearman(group["flops_per_sample"], group["samples_per_s"]),
                utilization_quantiles={f"p{int(q * 100)}": float(v) for q, v in quantiles.items()},
                spread=equal_flops_spread(group),
                effects=feature_effects(group),
            )
        )
    return sorted(results, key=lambda r: -r.architectures)
