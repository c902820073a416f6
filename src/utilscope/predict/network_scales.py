"""Network scales: per op category, how much a device profile's layer models over- or underpredict that category's
time inside whole networks, fitted on the profile GPU's own measurements of whole networks in the profile's
condition. The layer models are timed on isolated ops; in a network the same op may run faster or slower (caches
warm from the op before, autocast's casts, the kernels cuDNN picks for a network's shapes). A category's scale
multiplies its ops' times on the profile's GPU (``Predictor.profile_ms``), which a transfer then carries to another
GPU as it carries the rest (the datasheet bounds stay the target's own).

The fit: the scales s_c minimising, over the measured networks, the squared log error of
sum_c s_c x (the network's predicted ms of category c) + the composition gap, against its measured ms, over
``NETWORK_SD``, plus each log s_c over ``PRIOR_SD`` squared (a category the networks hardly use stays near 1).
``PRIOR_SD`` was chosen by leaving each model family out in turn (``leave_families_out``; the script prints it).

``scripts/fit_network_scales.py PROFILE STORE`` writes a profile's ``.scales.csv`` beside it from the ok cells of a
results store in the profile's precision and layout at batches of ``MIN_BATCH`` and more (eager at such batches runs
the kernels a ``graph`` profile times).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.predict.features import CONV_STYLE_CODES

NETWORK_SD = 0.10  # the log error of one network's measurement and composition, before the scales
PRIOR_SD = 0.20  # how far (log) a category's scale is expected from 1 (chosen by leaving families out)
PRIOR_SD_GRID = (0.05, 0.1, 0.2, 0.3, 0.5)
SCALE_RANGE = (0.25, 4.0)
MIN_BATCH = 64
# a conv's style code (``features.CONV_STYLE_CODES``) -> its category: conv_dense, conv_pointwise, ...
CONV_STYLES = {code: "conv_" + op_class.value.removesuffix("_conv") for op_class, code in CONV_STYLE_CODES.items()}
MEMORY_CATEGORIES = {
    "batch_norm": "batch_norm",
    "layer_norm": "row_norm",
    "group_norm": "row_norm",
    "relu": "activation",
    "silu": "activation",
    "gelu": "activation",
    "hardswish": "activation",
    "sigmoid": "activation",
    "add": "elementwise",
    "mul": "elementwise",
    "copy": "copy",
    "concat": "copy",
    "layout_copy": "copy",
    "cast": "copy",
    "max_pool": "pool_reduce",
    "avg_pool": "pool_reduce",
    "mean": "pool_reduce",
    "radix_sum": "pool_reduce",
}
SUFFIX = ".scales.csv"


def row_categories(rows: pd.DataFrame) -> np.ndarray:
    """Each row's scale category: a conv's style (``_cl`` when it is fed channels_last, timed by the channels_last
    profile's models), ``matmul``, ``se_gate``, or a memory op's class of ``MEMORY_CATEGORIES``."""
    group = rows["group"].astype(str).to_numpy()
    out = group.astype(object).copy()
    if "style" in rows:
        style = rows["style"].map(CONV_STYLES).astype(object).to_numpy()
        fed = rows["channels_last_input"].eq(1).to_numpy() if "channels_last_input" in rows else False
        conv = group == "conv"
        out[conv] = np.where(fed, style.astype(str) + "_cl", style)[conv]
    if "category" in rows:
        memory = group == "memory"
        out[memory] = rows["category"].map(MEMORY_CATEGORIES).fillna("memory_other").to_numpy()[memory]
    return out.astype(str)


def apply(rows: pd.DataFrame, ms: np.ndarray, scales: dict[str, float]) -> np.ndarray:
    """``ms`` with each row's time times its category's scale (1 for a category without one)."""
    factor = pd.Series(row_categories(rows)).map(scales).fillna(1.0).to_numpy(float)
    return ms * factor


def fit(times: pd.DataFrame, gap_ms: np.ndarray, measured_ms: np.ndarray, prior_sd: float = PRIOR_SD) -> dict:
    """The scales (module docstring) of the categories of ``times`` (one row per network, one column per category,
    milliseconds), given each network's composition gap and measured milliseconds."""
    from scipy.optimize import minimize

    matrix, gap, target = times.to_numpy(float), np.asarray(gap_ms, float), np.log(np.asarray(measured_ms, float))

    def loss(theta: np.ndarray) -> float:
        errors = (np.log(matrix @ np.exp(theta) + gap) - target) / NETWORK_SD
        return float(errors @ errors + theta @ theta / prior_sd**2)

    bounds = [tuple(np.log(SCALE_RANGE))] * matrix.shape[1]
    theta = minimize(loss, np.zeros(matrix.shape[1]), method="L-BFGS-B", bounds=bounds).x
    return dict(zip(times.columns, np.exp(theta).round(4).tolist(), strict=True))


def predicted_ms(times: pd.DataFrame, gap_ms: np.ndarray, scales: dict[str, float]) -> np.ndarray:
    factors = np.array([scales.get(c, 1.0) for c in times.columns])
    return times.to_numpy(float) @ factors + np.asarray(gap_ms, float)


def leave_families_out(cells: pd.DataFrame, times: pd.DataFrame, prior_sd: float) -> np.ndarray:
    """Each cell's error (predicted / measured samples/s - 1) with scales fitted on the other families' cells."""
    errors = np.zeros(len(cells))
    family = cells["family"].to_numpy()
    for name in np.unique(family):
        held = family == name
        scales = fit(times[~held], cells["gap_ms"][~held], cells["measured_ms"][~held], prior_sd)
        errors[held] = cells["measured_ms"][held] / predicted_ms(times[held], cells["gap_ms"][held], scales) - 1
    return errors


def scales_file(profile: Path) -> Path:
    return Path(profile).with_suffix(SUFFIX)


def load(profile: Path) -> dict[str, float] | None:
    """The scales kept beside a profile (``scales_file``), or None when it has none."""
    path = scales_file(profile)
    if not path.is_file():
        return None
    frame = pd.read_csv(path)
    return dict(zip(frame["category"], frame["scale"].astype(float), strict=True))
