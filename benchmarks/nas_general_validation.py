"""Validation of the population path's general model on the search spaces: `nas predict`'s numbers for a GPU
without a NAS profile are `predict`'s general model (transferred by datasheet); on the H200 the same model runs on
its own device profile, with no latency table, and the H200's NAS store has the networks measured. Prints, per
space and batch size, the Spearman correlation of predicted and measured latency, the same for FLOPs (the ranking
a FLOPs proxy gives), and the MAPE of the predicted latency. Validation data (it informed the design); the H200 only.

Run: OMP_NUM_THREADS=1 python3 benchmarks/nas_general_validation.py [--db data/h200/nas.sqlite]
"""

from __future__ import annotations

import argparse
import json
import sqlite3

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from utilscope.nas.population import population_predictor


def measured(db: str) -> pd.DataFrame:
    with sqlite3.connect(db) as connection:
        frame = pd.read_sql(
            "SELECT model, batch, latency_ms, flops_per_sample FROM measurements WHERE status = 'ok'", connection
        )
    frame[["space", "id"]] = frame["model"].str.split(":", expand=True)[[1, 2]]
    return frame


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="data/h200/nas.sqlite")
    args = parser.parse_args(argv)
    frame = measured(args.db)
    print("space   batch  networks  Spearman (general model)  Spearman (FLOPs)  MAPE (general model)")
    for space in ("mbv3", "regnet"):
        with open(f"data/h200/{space}_archs.jsonl") as lines:
            archs = {arch["id"]: arch for arch in map(json.loads, lines)}
        for batch in (1, 256):
            rows = frame[(frame["space"] == space) & (frame["batch"] == batch)]
            predicted = population_predictor(space, "h200", batch).predict_frame([archs[i] for i in rows["id"]])
            latency_ms, predicted_ms = rows["latency_ms"].to_numpy(), predicted["latency_ms"].to_numpy()
            rho = spearmanr(predicted_ms, latency_ms)[0]
            flops_rho = spearmanr(rows["flops_per_sample"], latency_ms)[0]
            mape = np.mean(np.abs(predicted_ms / latency_ms - 1)) * 100
            print(f"{space:7s} {batch:5d} {len(rows):9d} {rho:25.3f} {flops_rho:17.3f} {mape:20.1f}%")


if __name__ == "__main__":
    main()
