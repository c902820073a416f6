"""Layer models: from a device profile's timed configs, how long one op (or one squeeze-excite gate) takes.

One scikit-learn ``HistGradientBoostingRegressor`` per group (``conv``, ``matmul``, ``memory``, ``se_gate``), kept as
``trees.Trees``, fitted on the log of measured time over the op's roofline time (``features.op_row``'s ``ref_ms``):
the trees learn an efficiency, which stays bounded where an op is larger than any calibrated one, instead of a time
they could not extrapolate. Single-op configs train the op groups; the squeeze-excite configs train the gate as a
whole (its tiny 1x1 convs and broadcast multiply are not single-op configs). A row is *extrapolated* when one of its
numbers lies above the range its group was calibrated on by more than a factor ``RANGE_MARGIN`` (below it an op is
smaller than any calibrated one and takes about the launch floor, which the calibration covers); the reason names the
number. A conv's ranges are those of its style (dense, pointwise, grouped, depthwise): the depthwise 9x9 and 1x11
kernels calibrated do not make an 11x11 dense conv (AlexNet's stem) a calibrated one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from utilscope.measure.precision import parse_precision
from utilscope.precision import Precision
from utilscope.predict.calibrate import DeviceProfile
from utilscope.predict.features import (
    CAST,
    CATEGORY_CODES,
    CONV_STYLE_CODES,
    LAYOUT_COPY,
    RADIX_SUM,
    Gpu,
    config_events,
    fold_casts,
    op_row,
)
from utilscope.predict.ops import OpConfig
from utilscope.predict.trees import Trees

ITERATIONS = 300
RANDOM_STATE = 0
MIN_ROWS = 8  # fewer timed rows of a group: no model
RANGE_MARGIN = 1.5
FEATURES = {  # log-scaled numbers, then plain ones
    "conv": (
        (
            "flops",
            "bytes",
            "ref_ms",
            "batch",
            "channels",
            "out_channels",
            "size",
            "out_size",
            "kernel",
            "kernel_w",
            "stride",
            "dilation",
            "groups",
            "per_group",
            "m",
            "n",
            "k",
            "waves",
            "in_multiple",
            "out_multiple",
        ),
        ("style", "aligned_in", "aligned_out", "wave_efficiency", "strided"),
    ),
    "matmul": (
        ("flops", "bytes", "ref_ms", "m", "n", "k", "waves", "in_multiple", "out_multiple"),
        ("aligned_in", "aligned_out", "wave_efficiency"),
    ),
    "memory": (
        ("bytes", "in_bytes", "out_bytes", "ref_ms", "channels", "norm_rows"),
        ("code", "kernel", "stride", "broadcast", "aligned", "strided"),
    ),
    "se_gate": (("bytes", "ref_ms", "batch", "channels", "size", "hidden"), ()),
}
RANGED = {
    "conv": ("batch", "channels", "out_channels", "size", "kernel", "kernel_w", "m", "n", "k"),
    "matmul": ("m", "n", "k"),
    "memory": ("in_bytes", "out_bytes"),
    "se_gate": ("batch", "channels", "size"),
}
RANGES_PER = {"conv": "style"}  # a group whose ranges are kept per value of this column
# a memory category a profile may lack (timed from a later sample version on), and the one it is predicted as then
FALLBACK_CATEGORIES = {LAYOUT_COPY: "copy", RADIX_SUM: "mean", CAST: "copy"}
STYLE_NAMES = {code: op_class.value.removesuffix("_conv") for op_class, code in CONV_STYLE_CODES.items()}


def matrix(rows: pd.DataFrame, group: str) -> np.ndarray:
    logged, plain = FEATURES[group]
    frame = rows.assign(code=rows["category"].map(CATEGORY_CODES)) if group == "memory" else rows
    return np.column_stack([np.log1p(frame[list(logged)].to_numpy(float)), frame[list(plain)].to_numpy(float)])


def se_row(rows: list[dict], gpu: Gpu) -> dict:
    """One squeeze-excite gate's row from its ops' rows: the pooled input's batch, channels and size, the
    reduction's width, and the gate's bytes (its input read twice, its output written once)."""
    pooled = next((row for row in rows if row["group"] == "memory"), rows[0])
    first_conv = next((row for row in rows if row["group"] != "memory"), None)
    batch, channels, size = pooled.get("batch", 1), pooled.get("channels", 1), pooled.get("size", 1)
    total_bytes = sum(row["bytes"] for row in rows)
    hidden = first_conv.get("out_channels", first_conv.get("n", channels)) if first_conv else channels
    return {
        "op": "se_gate",
        "group": "se_gate",
        "flops": sum(row["flops"] for row in rows),
        "bytes": total_bytes,
        "ref_ms": max(total_bytes / gpu.bandwidth_bytes * 1e3, sum(row["ref_ms"] for row in rows)),
        "batch": batch,
        "channels": channels,
        "size": size,
        "hidden": hidden,
    }


def profile_precision(profile: DeviceProfile) -> Precision:
    """The precision the profile timed its configs in (``config_events`` traces them in it)."""
    return parse_precision(profile.precision)


def calibration_rows(profile: DeviceProfile, gpu: Gpu) -> pd.DataFrame:
    """One row per timed config: a single-op config's op row, or a squeeze-excite gate's row, with its ``ms``.
    Multi-op configs of other kinds (chains, shuffles as a copy are single-op) are left to ``chain_rows``."""
    rows, precision = [], profile_precision(profile)
    channels_last = profile.memory_format == "channels_last"
    for key, ms in profile.latency_ms.items():
        config = OpConfig(**profile.configs[key])
        if config.kind == "chain":
            continue
        events = fold_casts(config_events(config, precision, channels_last))
        op_rows = [op_row(event, gpu, casts) for event, casts in events]
        if config.kind == "se_gate":
            rows.append({**se_row(op_rows, gpu), "ms": ms})
        elif config.kind in (LAYOUT_COPY, CAST):  # its op is a clone or a cast, a category of its own
            rows.append({**op_rows[0], "category": config.kind, "ms": ms})
        elif len(op_rows) == 1:
            rows.append({**op_rows[0], "ms": ms})
    return pd.DataFrame(rows)


@dataclass
class LayerModels:
    gpu: Gpu
    models: dict  # group -> its fitted trees
    ranges: dict  # group -> {None, or a conv style: {number: (low, high)}}
    categories: tuple[str, ...] = ()  # the memory categories calibrated

    def times_ms(self, rows: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """Milliseconds per row, and per row the reason it is extrapolated ("" when it is not)."""
        ms, reasons = np.full(len(rows), np.nan), [""] * len(rows)
        if "category" in rows:  # a category the profile lacks as the one it stands in for
            lacking = {name: to for name, to in FALLBACK_CATEGORIES.items() if name not in self.categories}
            rows = rows.assign(category=rows["category"].replace(lacking))
        for group, part in rows.groupby("group", sort=False):
            where = rows.index.get_indexer(part.index)
            model = self.models.get(group)
            if model is None:
                ms[where] = part["ref_ms"].to_numpy(float)
                for i in where:
                    reasons[i] = f"no {group} configs calibrated: roofline time"
                continue
            ms[where] = part["ref_ms"].to_numpy(float) * np.exp(model.predict(matrix(part, group)))
            for i, reason in zip(where, self.out_of_range(part, group), strict=True):
                reasons[i] = reason
        return ms, reasons

    def out_of_range(self, part: pd.DataFrame, group: str) -> list[str]:
        reasons = [""] * len(part)
        per = RANGES_PER.get(group)
        keys = part[per].to_numpy() if per else [None] * len(part)
        for key in set(keys):
            where = np.flatnonzero(keys == key) if per else np.arange(len(part))
            what = f"{STYLE_NAMES.get(key, key)} conv " if per else ""
            ranges = self.ranges[group].get(key)
            if ranges is None:
                for i in where:
                    reasons[i] = f"no {what.strip()}s calibrated"
                continue
            for name, (low, high) in ranges.items():
                values = part[name].to_numpy(float)
                for i in where[values[where] > high * RANGE_MARGIN]:
                    reasons[i] = (
                        reasons[i] or f"{what}{name} {values[i]:.0f} outside the calibrated {low:.0f}-{high:.0f}"
                    )
        return reasons


def calibrated_ranges(part: pd.DataFrame, group: str) -> dict:
    """{key: {number: (low, high)}} of a group's timed rows; the key is None, or per ``RANGES_PER`` a value."""

    def span(rows: pd.DataFrame) -> dict:
        return {name: (float(rows[name].min()), float(rows[name].max())) for name in RANGED[group]}

    per = RANGES_PER.get(group)
    return {key: span(rows) for key, rows in part.groupby(per)} if per else {None: span(part)}


def _boosted_trees(features: np.ndarray, target: np.ndarray, categorical: list[bool] | None) -> Trees:
    """scikit-learn's boosted trees fitted, kept as ``Trees`` (predicted without importing scikit-learn)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(
        max_iter=ITERATIONS, random_state=RANDOM_STATE, min_samples_leaf=5, categorical_features=categorical
    )
    return Trees.of(model.fit(features, target))


def fit_layer_models(rows: pd.DataFrame, gpu: Gpu) -> LayerModels:
    """Per group with at least MIN_ROWS timed rows: trees on ``matrix`` for log(ms / ref_ms), and its ranges."""
    models, ranges = {}, {}
    for group, part in rows.groupby("group"):
        if len(part) < MIN_ROWS:
            continue
        logged, plain = FEATURES[group]
        categorical = [False] * len(logged) + [name == "code" for name in plain] if group == "memory" else None
        target = np.log(part["ms"].to_numpy(float) / part["ref_ms"].to_numpy(float))
        models[group] = _boosted_trees(matrix(part, group), target, categorical)
        ranges[group] = calibrated_ranges(part, group)
    categories = rows.loc[rows["group"] == "memory", "category"].unique() if "category" in rows else ()
    return LayerModels(gpu, models, ranges, tuple(sorted(categories)))
