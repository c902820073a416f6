"""The measured ratio on timm's published tables (docs/predict.md, "Measured networks: the measured ratio";
validation): every row of ``benchmarks/predict_gpus.py``'s rows file (the published tables' rows, each with its
spec, GPU, resolution and batch) whose network a profiled GPU measured in the row's condition (the shipped
``predict.measured`` tables), predicted by ``api.predict`` without and with the measured ratio, against the
table's samples/s. Prints MAPE, median error and the share within ±10% per table on those rows.

    python3 scripts/measured_ratio_published.py benchmarks/results/predict/gpus/validation_network_scales.csv.gz \
        --across-architectures

``predict`` carries a ratio to GPUs of the measuring GPU's compute capability alone; timm's tables hold none of the
H100's or H200's (Hopper), so without ``--across-architectures`` every row is predicted as before.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from utilscope import api
from utilscope.predict import measured

CONDITION = {"precision": "amp", "backend": "eager"}  # timm's condition, as the rows file holds it


def measured_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The published rows of a network measured in their condition on a profiled GPU, not on the row's GPU."""
    cells = measured.table()[[*measured.CELL, "gpu"]].rename(columns={"model": "spec", "gpu": "measured_on"})
    joined = rows.merge(cells, on=["spec", *measured.CELL[1:]])
    return joined[joined["measured_on"] != joined["gpu"]].drop_duplicates(["source_file", "source_row"])


def predict_rows(rows: pd.DataFrame, with_ratio: bool) -> pd.Series:
    """Each row's predicted samples/s, one ``api.predict`` per network on every GPU its rows name."""
    out = pd.Series(np.nan, index=rows.index)
    for (spec, resolution, batch, layout), part in rows.groupby(["spec", "resolution", "batch", "memory_format"]):
        result = api.predict(
            spec,
            ",".join(sorted(part["gpu"].unique())),
            (int(batch),),
            resolution=int(resolution),
            channels_last=layout == "channels_last",
            measured=with_ratio,
            **CONDITION,
        )
        by_gpu = {p.gpu_key: p.samples_per_s for p in result.predictions}
        out[part.index] = part["gpu"].map(by_gpu)
    return out


def score(error: pd.Series) -> str:
    return f"{100 * error.abs().mean():.1f}% ({100 * error.median():+.1f}%, {100 * (error.abs() <= 0.10).mean():.0f}%)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", help="a rows file of benchmarks/predict_gpus.py (--out)")
    parser.add_argument("--out", default=None, help="keep the rows with both predictions")
    parser.add_argument(
        "--across-architectures",
        action="store_true",
        help="carry the ratio to GPUs of any compute capability (predict carries it within the measuring GPU's)",
    )
    args = parser.parse_args()
    measured.ACROSS_ARCHITECTURES = args.across_architectures
    rows = pd.read_csv(args.rows)
    rows = rows[~rows["source_file"].str.startswith("H200")]
    rows = rows[(rows["precision"] == CONDITION["precision"]) & (rows["backend"] == CONDITION["backend"])]
    rows = measured_rows(rows).reset_index(drop=True)
    rows["alone"] = predict_rows(rows, False)
    rows["ratio"] = predict_rows(rows, True)
    if args.out:
        rows.to_csv(args.out, index=False)
    print("table | rows | MAPE (median error, within ±10%): without the ratio | with it")
    for table, part in rows.groupby("source_file"):
        alone, ratio = part["alone"] / part["samples_per_s"] - 1, part["ratio"] / part["samples_per_s"] - 1
        print(f"{table} | {len(part)} | {score(alone)} | {score(ratio)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
