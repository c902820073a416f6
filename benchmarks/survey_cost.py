"""Survey cost per cell, and throughput against a baseline survey, read from stores (docs/benchmarks.md).

Usage: python benchmarks/survey_cost.py [--baseline data/h200/survey.sqlite] STORE...

Per store: its `graph` cells; the mean and median `wall_s` per cell (the worker's time since its previous row,
process start included); the baseline's mean on the same cells; samples/s against the baseline: median ratio, cells
more than 5% slower and faster, the worst ratio; then the mean cost per cell of each family. Stores are opened
read-only.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

import pandas as pd

COLUMNS = "model, batch, family, samples_per_s, wall_s"


def graph_cells(path: Path) -> pd.DataFrame:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        query = f"SELECT {COLUMNS} FROM measurements WHERE status = 'ok' AND backend = 'graph'"
        return pd.read_sql(query, connection)


def compare(cells: pd.DataFrame, baseline: pd.DataFrame) -> dict:
    both = cells.merge(baseline, on=["model", "batch"], suffixes=("", "_base"))
    ratio = both["samples_per_s"] / both["samples_per_s_base"]
    return {
        "cells": len(cells),
        "sum_s": cells["wall_s"].sum(),
        "mean_s": cells["wall_s"].mean(),
        "median_s": cells["wall_s"].median(),
        "baseline_mean_s": both["wall_s_base"].mean(),
        "ratio_median": ratio.median(),
        "slower_5pct": int((ratio < 0.95).sum()),
        "faster_5pct": int((ratio > 1.05).sum()),
        "worst": ratio.min(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path, default=Path("data/h200/survey.sqlite"))
    args = parser.parse_args(argv)
    baseline = graph_cells(args.baseline)
    stores = {"baseline": baseline} | {path.stem: graph_cells(path) for path in args.stores}
    summary = pd.DataFrame({name: compare(cells, baseline) for name, cells in stores.items()}).T
    pd.set_option("display.width", 200)
    print(summary.round(3).to_string())
    families = pd.DataFrame({name: cells.groupby("family")["wall_s"].mean() for name, cells in stores.items()})
    print("\nmean wall_s per cell by family")
    print(families.round(2).to_string())


if __name__ == "__main__":
    main()
