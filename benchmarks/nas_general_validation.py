"""Validation of the population path's general model on the search spaces: `nas predict`'s numbers for a GPU
without a NAS profile are `predict`'s general model (transferred by datasheet); on a GPU with device profiles of its
own (the H200, the H100) the same model runs on that GPU's profile, with no latency table. A NAS store
(`utilscope nas measure`) has the networks measured on one GPU: each (space, precision, backend, batch) of it is
predicted on that GPU in that condition (`eager` adds the host side: the shipped host profile's calls). Prints per
space, precision, backend and batch the Spearman correlation of predicted and measured latency, the same for FLOPs
(the ranking a FLOPs proxy gives), the MAPE of the predicted latency, its median error (predicted over measured,
minus one) and the share within ±10%; then, where a store has several batch sizes, how the measured latencies of
one batch size rank those of another (the measurements' own noise where every network is host-bound); with
``--by FIELD``, the same scores per value of an architecture field. Validation data (the H200's store informed the
design).

Run: OMP_NUM_THREADS=1 python3 benchmarks/nas_general_validation.py [--db data/h200/nas.sqlite]
    (the H100's eager store, `scripts/gpu_nas_eager.sh`: --db data/h100/nas_eager.sqlite --by group_width)
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
from utilscope.present.markdown import WITHIN  # the validation targets' band: within ±10%

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


def predicted(frame: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """FRAME with each network's predicted latency (``predicted_ms``) and its architecture's fields (``arch``)."""
    parts = []
    for (space, precision, backend, batch), rows in frame.groupby(["space", "precision", "backend", "batch"]):
        with open(ARCHS.format(space=space)) as lines:
            archs = {arch["id"]: arch for arch in map(json.loads, lines)}
        predictor = population_predictor(space, gpu, int(batch), precision, backend=backend)
        chosen = [archs[i] for i in rows["id"]]
        parts.append(rows.assign(predicted_ms=predictor.predict_frame(chosen)["latency_ms"].to_numpy(), arch=chosen))
    return pd.concat(parts, ignore_index=True)


def scores(rows: pd.DataFrame) -> dict:
    """Spearman of predicted and of FLOPs against measured latency, MAPE, median error, share within ±10%."""
    error = rows["predicted_ms"] / rows["latency_ms"] - 1
    return {
        "networks": len(rows),
        "rho": spearmanr(rows["predicted_ms"], rows["latency_ms"])[0],
        "flops_rho": spearmanr(rows["flops_per_sample"], rows["latency_ms"])[0],
        "mape": np.mean(np.abs(error)) * 100,
        "median": np.median(error) * 100,
        "within": np.mean(np.abs(error) <= WITHIN) * 100,
    }


def print_scores(frame: pd.DataFrame, gpu: str, keys: list[str]) -> None:
    print(f"{gpu}: {'  '.join(keys)}  networks  Spearman (general model)  Spearman (FLOPs)  MAPE  median  within ±10%")
    for key, rows in frame.groupby(keys):
        s = scores(rows)
        head = " ".join(f"{value!s:7s}" for value in key)
        print(
            f"{head} {s['networks']:9d} {s['rho']:25.3f} {s['flops_rho']:17.3f} {s['mape']:5.1f}% "
            f"{s['median']:+6.1f}% {s['within']:5.0f}%"
        )


def print_consistency(frame: pd.DataFrame) -> None:
    """Per space, precision and backend with several batch sizes: the Spearman of the measured latencies of one
    batch size against another's, over the networks both hold, and the median of their ratio (host-bound networks
    time alike at every batch size, so this is the measurements' own ranking noise)."""
    for (space, precision, backend), rows in frame.groupby(["space", "precision", "backend"]):
        wide = rows.pivot_table(index="id", columns="batch", values="latency_ms")
        pairs = [(a, b) for i, a in enumerate(wide.columns) for b in wide.columns[i + 1 :]]
        if pairs:
            text = ", ".join(
                f"{a} vs {b}: {spearmanr(wide[a], wide[b], nan_policy='omit')[0]:.3f} "
                f"(median latency ratio {(wide[b] / wide[a]).median():.2f})"
                for a, b in pairs
            )
            print(f"measured against measured, {space} {precision} {backend}: {text}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="data/h200/nas.sqlite")
    parser.add_argument("--by", default=None, help="also score per value of this architecture field (group_width)")
    args = parser.parse_args(argv)
    frame, gpu = measured(args.db)
    frame = predicted(frame, gpu)
    keys = ["space", "precision", "backend", "batch"]
    print_scores(frame, gpu, keys)
    print_consistency(frame)
    if args.by:
        frame[args.by] = pd.Series([arch.get(args.by) for arch in frame["arch"]], index=frame.index, dtype=object)
        print_scores(frame[frame[args.by].notna()], gpu, [*keys, args.by])


if __name__ == "__main__":
    main()
