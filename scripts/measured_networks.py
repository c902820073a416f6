"""Write the shipped table of whole networks one GPU measured (``predict.measured``; docs/predict.md, "Measured
networks"), from results stores of that GPU: every cell stored ok, stable (the survey's ``unstable`` flag off) and
timed with cuDNN as `profile` runs it by default (autotuned, no limit, no depthwise exception), one row per model,
resolution, batch, precision, memory format and backend (the latest measured where a cell was stored twice).

    python3 scripts/measured_networks.py --gpu h100          # SHIPPED's stores -> profiles/measured/h100.csv
    python3 scripts/measured_networks.py --gpu h100 --check  # exit 1 when the shipped table is not the stores'
    python3 scripts/measured_networks.py --out FILE.csv STORE...

Every store must hold one GPU, the same in all of them (a usage error otherwise): one table per GPU. ``--check``
writes nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

import pandas as pd

from utilscope import hardware
from utilscope.predict.measured import CELL, COLUMNS, MEASURED_DIR

QUERY = """select model, resolution, batch, precision, memory_format, backend, samples_per_s, device, torch,
    substr(measured_at, 1, 10) as date from measurements where status = 'ok' and unstable = 0 and cudnn_benchmark = 1
    and cudnn_benchmark_limit = -1 and cudnn_depthwise_heuristic = 0"""
# the stores each shipped table is written from (paths from the repository root)
SHIPPED = {
    "h100": ("data/h100/precisions.sqlite", "data/h100/eager.sqlite", "data/h100/timm_condition.sqlite"),
    "h200": ("data/h200/survey.sqlite", "data/h200/timm.sqlite", "data/h200/timm_condition.sqlite"),
}


def store_rows(path: Path) -> pd.DataFrame:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = pd.read_sql(QUERY + " order by measured_at", db)
    rows["source"] = path.as_posix()
    return rows


def table(stores: list[Path]) -> pd.DataFrame:
    """The table of the stores' cells; ValueError naming what is wrong when they are not one known GPU's."""
    missing = [str(path) for path in stores if not path.is_file()]
    if missing:
        raise ValueError(f"no results store at {', '.join(missing)}")
    rows = pd.concat([store_rows(path) for path in stores], ignore_index=True)
    devices = rows["device"].unique()
    if len(devices) != 1:
        raise ValueError(f"the stores hold {len(devices)} GPUs ({', '.join(devices)}): give one's")
    spec = hardware.detect(devices[0])
    if spec is None:
        raise ValueError(f"the spec table does not know {devices[0]!r}")
    rows["gpu"] = spec.key
    return rows.drop_duplicates(list(CELL), keep="last").sort_values(list(CELL))[list(COLUMNS)].reset_index(drop=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, help="the table to write (with --gpu: the shipped one)")
    parser.add_argument("--gpu", choices=sorted(SHIPPED), help="the shipped table of this GPU, from its stores")
    parser.add_argument("--check", action="store_true", help="compare with the table at --out; write nothing")
    args = parser.parse_args()
    if args.gpu:
        args.stores, args.out = [Path(p) for p in SHIPPED[args.gpu]], MEASURED_DIR / f"{args.gpu}.csv"
    if not args.stores or args.out is None:
        parser.error("give --gpu, or --out and the stores")
    try:
        rows = table(args.stores)
    except ValueError as exc:
        print(f"measured_networks.py: error: {exc}", file=sys.stderr)
        return 2
    text = rows.to_csv(index=False, float_format="%.6g")
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        verdict = "the stores' table" if same else "not the stores' table: write it again"
        print(f"{args.out}: {verdict}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"{len(rows)} cells of the {rows['device'].iloc[0]} from {len(args.stores)} stores -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
