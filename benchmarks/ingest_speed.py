"""Time `utilscope ingest` of every shipped published table into an empty store, first with an empty count cache
(cold: every model counted) and then with the cache that run filled (warm). Target (issue 53): warm <= 60 s on a
2-core machine; the cold time stated.

Usage: python benchmarks/ingest_speed.py [--jobs N] [--tables GLOB] [--warm-only]
The cache lives in a temporary folder (UTILSCOPE_CACHE_DIR) unless --warm-only, which uses the user's own cache as it
is. Each run ingests into a store of its own in a temporary folder and prints its wall time, rows and counts.
"""

from __future__ import annotations

import argparse
import glob
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TABLES = "data/public/timm-benchmark/benchmark-infer-*.csv"
ENTRY = "import sys; from utilscope.cli import main; sys.exit(main())"  # the `utilscope` command, this Python


def ingest_once(tables: list[str], jobs: int, env: dict) -> tuple[float, Path]:
    store = Path(tempfile.mkdtemp(prefix="ingest-speed-")) / "atlas.sqlite"
    command = [sys.executable, "-c", ENTRY, "ingest", "timm-benchmark", *tables, "--db", str(store)]
    begin = time.perf_counter()
    subprocess.run([*command, "--jobs", str(jobs)], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - begin, store


def summary(store: Path) -> str:
    with sqlite3.connect(store) as connection:
        rows, counted, flops = connection.execute(
            "SELECT COUNT(*), SUM(count_status = 'ok'), SUM(flops_per_sample) / 1e9 FROM published"
        ).fetchone()
    return f"{rows} rows, {counted} counted, sum of GFLOPs per sample {flops:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tables", default=TABLES)
    parser.add_argument("--warm-only", action="store_true")
    args = parser.parse_args(argv)
    tables = sorted(glob.glob(args.tables))
    env = dict(os.environ)
    if not args.warm_only:
        env["UTILSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="ingest-speed-cache-")
    print(f"{len(tables)} tables, {os.cpu_count()} CPUs, --jobs {args.jobs}")
    for run in ("warm",) if args.warm_only else ("cold", "warm"):
        seconds, store = ingest_once(tables, args.jobs, env)
        print(f"{run}: {seconds:.1f} s ({summary(store)})")


if __name__ == "__main__":
    main()
