"""Write the predictor's error per GPU on the published tables it was validated on, for the report's predicted rows:
``src/utilscope/predict/profiles/validation_gpus.csv`` (gpu, torch, memory_format, backend, rows, mape,
median_error), from a validation run's rows (``benchmarks/predict_gpus.py``'s CSV: one row per published row with
its ``predicted_samples_per_s``).

Usage: python benchmarks/predict_errors.py [RUN.csv.gz ...] [-o OUT.csv]
(default: benchmarks/results/predict/gpus/validation_network_scales.csv.gz, the current design's run on every
GPU's eager tables, docs/predict.md "Network scales").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RUN = REPO / "benchmarks" / "results" / "predict" / "gpus" / "validation_network_scales.csv.gz"
DEFAULT_OUT = REPO / "src" / "utilscope" / "predict" / "profiles" / "validation_gpus.csv"
KEYS = ["gpu", "torch", "memory_format", "backend"]


def errors(runs: list[Path]) -> pd.DataFrame:
    """Per GPU, torch, memory format and backend: rows, mean absolute percentage error, median signed error."""
    rows = pd.concat([pd.read_csv(path, dtype={"torch": str}) for path in runs], ignore_index=True)
    error = rows["predicted_samples_per_s"] / rows["samples_per_s"] - 1
    grouped = rows.assign(error=error, absolute=error.abs()).groupby(KEYS)
    table = grouped.agg(rows=("error", "size"), mape=("absolute", "mean"), median_error=("error", "median"))
    return table.round(4).reset_index()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=[DEFAULT_RUN])
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    table = errors(args.runs)
    table.to_csv(args.out, index=False)
    print(table.to_string(index=False))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
