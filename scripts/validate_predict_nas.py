"""The general layer model (`utilscope predict`'s) against the NAS latency tables: every table entry is one search
space block timed alone on the H200, and none was used in fitting the general model. For a seeded sample of each
table's block entries per batch size: the block traced on the meta device, its ops predicted from the shipped H200
profile and summed with the composition gap. Prints the median predicted/measured ratio, the MAPE as predicted and
after scaling by that median, and, on the NAS predictor's held-out 20% of the sampled keys (`holdout_split`), two
per-space trees fitted on the other 80% from the same analytic layer numbers: the NAS predictor's own (log ms) and
trees on the table's residual over the general model (log(table / general), with log general as one more number).
The last column is the general estimate's CPU cost per block.

    python3 scripts/validate_predict_nas.py [--sample 600]
"""

from __future__ import annotations

import argparse
import json
import random
import time
import warnings
from pathlib import Path

import numpy as np

from utilscope.nas.general import general_block_ms
from utilscope.nas.sampler import load_jsonl
from utilscope.nas.space import parse_layer_key
from utilscope.nas.spaces import get_space
from utilscope.nas.table_predictor import _boosted_trees, holdout_split, layer_features, layer_numbers, mape
from utilscope.predict.fit_cache import load_predictor
from utilscope.predict.selection import select_profile

DATA = Path(__file__).resolve().parent.parent / "data/h200"
TABLES = (
    ("mbv3_table.json", "mbv3_archs.jsonl"),
    ("regnet_table_1.json", "regnet_archs.jsonl"),
    ("regnet_table_256.json", "regnet_archs.jsonl"),
)


def held_out_trees(space, keys: list[str], measured: np.ndarray, general: np.ndarray) -> tuple[float, float]:
    """MAPE on the held-out keys of the NAS predictor's trees (log ms) and of trees on log(table / general)."""
    configs = [parse_layer_key(key)[1] for key in keys]
    numbers = layer_features([layer_numbers(space.layer_cost("block", config), config) for config in configs])
    held = holdout_split(keys)
    test = np.array([key in held for key in keys])
    direct = np.exp(_boosted_trees(numbers[~test], np.log(measured[~test])).predict(numbers[test]))
    with_general = np.column_stack([numbers, np.log(general)])
    residual = _boosted_trees(with_general[~test], np.log(measured[~test] / general[~test]))
    return mape(direct, measured[test]), mape(
        general[test] * np.exp(residual.predict(with_general[test])), measured[test]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sample", type=int, default=600, help="block entries per table and batch (default: %(default)s)"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    predictor = load_predictor(select_profile("h200", None, "fp16", "graph"))
    print(
        "| table | batch | blocks | median predicted / measured | MAPE | MAPE after the median scale | NAS trees, "
        "held out | general + residual trees, held out | ms per block (general) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for table_name, archs_name in TABLES:
        table = json.loads((DATA / table_name).read_text())
        space = get_space(table["space"])
        layers = {layer.key: layer for arch in load_jsonl(DATA / archs_name) for layer in space.layers(arch)}
        for batch in sorted({int(b) for per_batch in table["entries"].values() for b in per_batch}):
            keys = sorted(
                k
                for k, per_batch in table["entries"].items()
                if str(batch) in per_batch and k in layers and parse_layer_key(k)[0] == "block"
            )
            keys = random.Random(0).sample(keys, min(args.sample, len(keys)))
            measured = np.array([table["entries"][k][str(batch)] for k in keys])
            start_s = time.perf_counter()
            general = general_block_ms(predictor, space, [layers[k] for k in keys], batch)
            per_block_ms = (time.perf_counter() - start_s) / len(keys) * 1e3
            ratio = general / measured
            median = float(np.median(ratio))
            direct, residual = held_out_trees(space, keys, measured, general)
            print(
                f"| {table_name} | {batch} | {len(keys)} | {median:.2f} | {np.mean(np.abs(ratio - 1)):.1%} | "
                f"{np.mean(np.abs(ratio / median - 1)):.1%} | {direct:.1%} | {residual:.1%} | {per_block_ms:.0f} |"
            )


if __name__ == "__main__":
    main()
