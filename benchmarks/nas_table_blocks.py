"""The general model block by block: `nas predict`'s general model (no table) against the blocks a NAS latency table
measured, on the table's GPU at its batch sizes. A table (`utilscope nas table`) holds each distinct layer of a
space's sample timed alone on `graph` (the H200's: data/h200/SPACE_table_BATCH.json); here each block is predicted
as the population path times it (its rows on the GPU's own profile plus a launch gap a row) and the ratio predicted
/ measured is summarized per value of one position of the block's configuration (regnet: w_in, w_out, stride,
group_width, bottleneck_ratio, se, size). Validation data (the tables shaped the NAS work).

Run: OMP_NUM_THREADS=1 python3 benchmarks/nas_table_blocks.py data/h200/regnet_table_256.json [--position 3]
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from utilscope.hardware.specs import detect
from utilscope.nas.population import population_predictor
from utilscope.nas.space import Layer, parse_layer_key


def block_ratios(table: dict, position: int) -> pd.DataFrame:
    """One row per (block, batch) of the table: the value at ``position``, measured and predicted ms, their ratio."""
    spec = detect(table["device"])
    if spec is None:
        raise SystemExit(f"nas_table_blocks.py: {table['device']} is not in the spec table")
    rows = []
    blocks = {key: times for key, times in table["entries"].items() if key.startswith("block(")}
    for batch in sorted({int(b) for times in blocks.values() for b in times}):
        predictor = population_predictor(table["space"], spec.key, batch, table["precision"], backend="graph")
        timed = [
            (Layer("block", config, config[0], config[-1]), times[str(batch)])
            for config, times in ((parse_layer_key(key)[1], times) for key, times in blocks.items())
            if str(batch) in times
        ]
        predictor.time_layers([layer for layer, _ in timed])
        for layer, measured_ms in timed:
            times = predictor.layers[layer]
            predicted_ms = predictor.predictor.with_gaps(times.ms, times.rows)  # as a network composes it
            rows.append(
                {
                    "batch": batch,
                    "value": layer.config[position],
                    "measured_ms": measured_ms,
                    "ratio": predicted_ms / measured_ms,
                }
            )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", help="NAS latency tables (JSON)")
    parser.add_argument("--position", type=int, default=3, help="the block config's position to group by (3)")
    args = parser.parse_args(argv)
    for path in args.tables:
        with open(path) as handle:
            table = json.load(handle)
        frame = block_ratios(table, args.position)
        summary = frame.groupby(["batch", "value"])["ratio"].describe(percentiles=[0.25, 0.5, 0.75])
        print(
            f"{path} ({table['device']}, {table['precision']}): predicted / measured per block, by position "
            f"{args.position}"
        )
        print(summary[["count", "25%", "50%", "75%"]].round(3).to_string())


if __name__ == "__main__":
    main()
