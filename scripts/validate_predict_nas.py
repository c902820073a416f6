"""The general layer model (`utilscope predict`'s) against the NAS latency tables: every table entry is one search
space block timed alone on the H200, and none was used in fitting. For a seeded sample of each table's entries per
batch size: the block traced on the meta device, its ops predicted from the shipped H200 profile and summed with
the composition gap; prints the median predicted/measured ratio and the MAPE, as measured and after scaling by that
median (what a per-table scale would leave).

    python3 scripts/validate_predict_nas.py [--sample 250]
"""

from __future__ import annotations

import argparse
import json
import random
import warnings
from pathlib import Path

import numpy as np
import torch

from utilscope.counting.counter import meta_copy
from utilscope.counting.tracer import trace
from utilscope.nas.sampler import load_jsonl
from utilscope.nas.spaces import get_space
from utilscope.predict.predictor import Predictor, load_predictor, network_rows, select_profile

DATA = Path(__file__).resolve().parent.parent / "data/h200"
TABLES = (("mbv3_table.json", "mbv3_archs.jsonl"), ("regnet_table_1.json", "regnet_archs.jsonl"),
          ("regnet_table_256.json", "regnet_archs.jsonl"))  # fmt: skip


def block_ms(predictor: Predictor, space, layer, batch: int) -> float:
    module = meta_copy(space.build_layer(layer).eval()).to(torch.float16)
    x = torch.empty((batch, layer.in_channels, layer.in_size, layer.in_size), device="meta", dtype=torch.float16)
    return predictor.compose(network_rows(trace(module, x), predictor.gpu))[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=250, help="entries per table and batch (default: %(default)s)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    predictor = load_predictor(select_profile("h200", None, "fp16", "graph"))
    print("| table | batch | blocks | median predicted / measured | MAPE | MAPE after the median scale |")
    print("|---|---:|---:|---:|---:|---:|")
    for table_name, archs_name in TABLES:
        table = json.loads((DATA / table_name).read_text())
        space = get_space(table["space"])
        layers = {layer.key: layer for arch in load_jsonl(DATA / archs_name) for layer in space.layers(arch)}
        for batch in sorted({int(b) for per_batch in table["entries"].values() for b in per_batch}):
            keys = sorted(k for k, per_batch in table["entries"].items() if str(batch) in per_batch and k in layers)
            keys = random.Random(0).sample(keys, min(args.sample, len(keys)))
            measured = np.array([table["entries"][k][str(batch)] for k in keys])
            ratio = np.array([block_ms(predictor, space, layers[k], batch) for k in keys]) / measured
            median = float(np.median(ratio))
            print(
                f"| {table_name} | {batch} | {len(keys)} | {median:.2f} | {np.mean(np.abs(ratio - 1)):.1%} | "
                f"{np.mean(np.abs(ratio / median - 1)):.1%} |"
            )


if __name__ == "__main__":
    main()
