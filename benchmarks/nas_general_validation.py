"""Validation of the population path's general model on the search spaces: `nas predict`'s numbers for a GPU
without a NAS profile are `predict`'s general model (transferred by datasheet); on a GPU with device profiles of its
own (the H200, the H100) the same model runs on that GPU's profile, with no latency table. A NAS store
(`utilscope nas measure`) has the networks measured on one GPU: each (space, precision, backend, batch) of it is
predicted on that GPU in that condition (`eager` adds the host side: the shipped host profile's calls). Prints per
space, precision, backend and batch the Spearman correlation of predicted and measured latency, the same for FLOPs
(the ranking a FLOPs proxy gives), and the MAPE of the predicted latency. Validation data (the H200's store
informed the design).

Run: OMP_NUM_THREADS=1 python3 benchmarks/nas_general_validation.py [--db data/h200/nas.sqlite]
    (the H100's eager store, `scripts/gpu_nas_eager.sh`: --db data/h100/nas_eager.sqlite)
"""

from __future__ import annotations

import argparse
import json
import sqlite3

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from utilscope.hardware.specs import detect
from utilscope.nas.population import population_predictor

ARCHS = "data/h200/{space}_archs.jsonl"  # the spaces' samples the NAS stores measured (`nas sample`)


def measured(db: str) -> tuple[pd.DataFrame, str]:
    """The store's ok rows with their space and architecture id, and the spec table's key of its one GPU."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        frame = pd.read_sql(
            "SELECT model, batch, precision, backend, device, latency_ms, flops_per_sample FROM measurements "
            "WHERE status = 'ok'",
            connection,
        )
    frame[["space", "id"]] = frame["model"].str.split(":", expand=True)[[1, 2]]
    devices = frame["device"].unique()
    spec = detect(devices[0]) if len(devices) == 1 else None
    if spec is None:
        raise SystemExit(
            f"nas_general_validation.py: {db} needs the rows of one GPU of the spec table: {list(devices)}"
        )
    return frame, spec.key


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="data/h200/nas.sqlite")
    args = parser.parse_args(argv)
    frame, gpu = measured(args.db)
    print(f"{gpu}: space  precision  backend  batch  networks  Spearman (general model)  Spearman (FLOPs)  MAPE")
    for (space, precision, backend, batch), rows in frame.groupby(["space", "precision", "backend", "batch"]):
        with open(ARCHS.format(space=space)) as lines:
            archs = {arch["id"]: arch for arch in map(json.loads, lines)}
        predictor = population_predictor(space, gpu, int(batch), precision, backend=backend)
        predicted = predictor.predict_frame([archs[i] for i in rows["id"]])
        latency_ms, predicted_ms = rows["latency_ms"].to_numpy(), predicted["latency_ms"].to_numpy()
        rho = spearmanr(predicted_ms, latency_ms)[0]
        flops_rho = spearmanr(rows["flops_per_sample"], latency_ms)[0]
        mape = np.mean(np.abs(predicted_ms / latency_ms - 1)) * 100
        counts = f"{space:7s} {precision:9s} {backend:8s} {batch:5d} {len(rows):9d}"
        print(f"{counts} {rho:25.3f} {flops_rho:17.3f} {mape:5.1f}%")


if __name__ == "__main__":
    main()
