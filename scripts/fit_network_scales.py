"""Fit a device profile's network scales (``utilscope.predict.network_scales``) on its GPU's whole networks measured
in the profile's condition, and write them beside the profile (``PROFILE`` with ``.scales.csv``); print the fit
with each family left out in turn for every prior sd of ``PRIOR_SD_GRID``, and the scales kept.

    python scripts/fit_network_scales.py src/utilscope/predict/profiles/h200_amp_graph.json \\
        data/h200/timm_condition.sqlite [--lofo-out cells.csv]

A store without a cell in the profile's condition is a one-line error (exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.errors import UsageError, UtilscopeError
from utilscope.predict.network_scales import (
    MIN_BATCH,
    PRIOR_SD,
    PRIOR_SD_GRID,
    fit,
    leave_families_out,
    predicted_ms,
    row_categories,
    scales_file,
)


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
    out = pd.DataFrame({"scale": pd.Series(scales), "time_share": share.round(4)}).sort_index()
    out = out.rename_axis("category").reset_index()
    out.to_csv(scales_file(Path(args.profile)), index=False)
    print(out.to_string(index=False))
    if args.lofo_out:
        cells.assign(error_without=before, error_families_out=held_out[PRIOR_SD], error_fitted=fitted).to_csv(
            args.lofo_out, index=False
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UtilscopeError as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(2)
