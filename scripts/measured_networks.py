"""Write the shipped table of whole networks one GPU measured (``predict.measured``; docs/predict.md, "Measured
networks"), from results stores of that GPU: every cell stored ok, stable (the survey's ``unstable`` flag off) and
timed with cuDNN as `profile` runs it by default (autotuned, no limit, no depthwise exception), one row per model,
resolution, batch, precision, memory format and backend (the latest measured where a cell was stored twice).

    python3 scripts/measured_networks.py --out src/utilscope/predict/profiles/measured/h100.csv \\
        data/h100/precisions.sqlite data/h100/eager.sqlite data/h100/timm_condition.sqlite

Every store must hold one GPU, the same in all of them (a usage error otherwise): one table per GPU.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

import pandas as pd

from utilscope import hardware
from utilscope.predict.measured import COLUMNS

QUERY = """select model, resolution, batch, precision, memory_format, backend, samples_per_s, device, torch,
    substr(measured_at, 1, 10) as date from measurements where status = 'ok' and unstable = 0 and cudnn_benchmark = 1
    and cudnn_benchmark_limit = -1 and cudnn_depthwise_heuristic = 0"""


def store_rows(path: Path) -> pd.DataFrame:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = pd.read_sql(QUERY + " order by measured_at", db)
    rows["source"] = path.as_posix()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    missing = [str(path) for path in args.stores if not path.is_file()]
    if missing:
        print(f"measured_networks.py: error: no results store at {', '.join(missing)}", file=sys.stderr)
        return 2
    rows = pd.concat([store_rows(path) for path in args.stores], ignore_index=True)
    devices = rows["device"].unique()
    if len(devices) != 1:
        print(
            f"measured_networks.py: error: the stores hold {len(devices)} GPUs ({', '.join(devices)}): give one's",
            file=sys.stderr,
        )
        return 2
    spec = hardware.detect(devices[0])
    if spec is None:
        print(f"measured_networks.py: error: the spec table does not know {devices[0]!r}", file=sys.stderr)
        return 2
    rows["gpu"] = spec.key
    key = ["model", "resolution", "batch", "precision", "memory_format", "backend"]
    rows = rows.drop_duplicates(key, keep="last").sort_values(key)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows[list(COLUMNS)].to_csv(args.out, index=False, float_format="%.6g")
    print(f"{len(rows)} cells of the {devices[0]} from {len(args.stores)} stores -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
