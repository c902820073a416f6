"""Network scales: per op category, how much a device profile's layer models over- or underpredict that category's
time inside whole networks, fitted on the profile GPU's own measurements of whole networks in the profile's
condition. The layer models are timed on isolated ops; in a network the same op may run faster or slower (caches
warm from the op before, autocast's casts, the kernels cuDNN picks for a network's shapes). A category's scale
multiplies its ops' times on the profile's GPU (``Predictor.profile_ms``), which a transfer then carries to another
GPU as it carries the rest (the datasheet bounds stay the target's own).

The fit: the scales s_c minimising, over the measured networks, the squared log error of
sum_c s_c x (the network's predicted ms of category c) + the composition gap, against its measured ms, over
``NETWORK_SD``, plus each log s_c over ``PRIOR_SD`` squared (a category the networks hardly use stays near 1).
``PRIOR_SD`` was chosen by leaving each model family out in turn (``main`` prints that cross-validation).

    python -m utilscope.predict.network_scales PROFILE STORE [--lofo-out CSV]

writes ``PROFILE``'s ``.scales.csv`` beside it from the ok cells of ``STORE`` in the profile's precision and layout
at batches of ``MIN_BATCH`` and more (eager at such batches runs the kernels a ``graph`` profile times).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.errors import UsageError

NETWORK_SD = 0.10  # the log error of one network's measurement and composition, before the scales
PRIOR_SD = 0.20  # how far (log) a category's scale is expected from 1 (chosen by leaving families out, ``main``)
PRIOR_SD_GRID = (0.05, 0.1, 0.2, 0.3, 0.5)
SCALE_RANGE = (0.25, 4.0)
MIN_BATCH = 64
CONV_STYLES = {0: "conv_dense", 1: "conv_pointwise", 2: "conv_grouped", 3: "conv_depthwise"}
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


def store_cells(store: str, precision: str, memory_format: str) -> pd.DataFrame:
    """The ok cells of ``store`` in the precision and layout at batches of ``MIN_BATCH`` and more, eager or graph,
    with their family (``sets.family_of``) and measured milliseconds per batch."""
    from utilscope.models.sets import family_of
    from utilscope.survey.store import Store

    with Store(store, create=False) as opened:
        frame = opened.frame()
    layout = "contiguous" if memory_format == "contiguous" else "channels_last"
    cells = frame[
        (frame["status"] == "ok")
        & (frame["precision"] == precision)
        & (frame["memory_format"] == layout)
        & frame["backend"].isin(["eager", "graph"])
        & (frame["batch"] >= MIN_BATCH)
    ]
    if cells.empty:
        raise UsageError(f"{store}: no ok cell in {precision}, {layout}, eager or graph, at batch {MIN_BATCH}+")
    cells = cells[["model", "resolution", "batch", "samples_per_s"]].reset_index(drop=True)
    return cells.assign(family=cells["model"].map(family_of), measured_ms=cells["batch"] / cells["samples_per_s"] * 1e3)


def category_times(predictor, cells: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Per cell, its network's predicted milliseconds per category on the profile's GPU (without scales), and its
    composition gap."""
    rows_of, gaps = [], []
    predictor = replace(predictor, category_scales=None)
    channels_last = predictor.memory_format == "channels_last"
    for cell in cells.itertuples():
        _, recorded = predictor.count(
            cell.model, int(cell.batch), int(cell.resolution), predictor.precision, channels_last
        )
        rows = predictor.rows(recorded)
        ms, _ = predictor.profile_ms(rows)
        rows_of.append(pd.Series(ms).groupby(row_categories(rows)).sum())
        gaps.append(predictor.gap_ms * len(rows))
    return pd.DataFrame(rows_of).fillna(0.0).reset_index(drop=True), np.array(gaps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile")
    parser.add_argument("store")
    parser.add_argument("--lofo-out", help="write each cell's error with and without scales (families left out)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from utilscope.predict.fit_cache import load_predictor

    predictor = load_predictor(args.profile)
    cells = store_cells(args.store, predictor.precision, predictor.memory_format)
    times, cells["gap_ms"] = category_times(predictor, cells)
    before = cells["measured_ms"] / predicted_ms(times, cells["gap_ms"], {}) - 1
    print(f"{len(cells)} cells, {cells['model'].nunique()} models, {cells['family'].nunique()} families")
    print(f"without scales: MAPE {np.mean(np.abs(before)):.4f}")
    held_out = {}
    for prior_sd in PRIOR_SD_GRID:
        held_out[prior_sd] = leave_families_out(cells, times, prior_sd)
        print(f"prior sd {prior_sd}: families left out, MAPE {np.mean(np.abs(held_out[prior_sd])):.4f}")
    scales = fit(times, cells["gap_ms"], cells["measured_ms"])
    fitted = cells["measured_ms"] / predicted_ms(times, cells["gap_ms"], scales) - 1
    print(f"prior sd {PRIOR_SD} (kept), all cells: MAPE {np.mean(np.abs(fitted)):.4f}")
    share = times.sum() / times.to_numpy().sum()
    out = pd.DataFrame({"category": list(scales), "scale": list(scales.values()), "time_share": share.round(4).values})
    out.to_csv(scales_file(Path(args.profile)), index=False)
    print(out.to_string(index=False))
    if args.lofo_out:
        cells.assign(error_without=before, error_families_out=held_out[PRIOR_SD], error_fitted=fitted).to_csv(
            args.lofo_out, index=False
        )
    return 0


if __name__ == "__main__":
    from utilscope.errors import UtilscopeError

    try:
        sys.exit(main())
    except UtilscopeError as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(2)
