"""Time `build_report` on a synthetic store the size of the full H200 survey: 60 models x 5 batch sizes x 2 backends
= 600 rows, op classes for each of the 120 series. Target: <= 30 s on a 2-core machine.

Usage: python benchmarks/report_speed.py [OUT_DIR] [--repeat N]   (OUT_DIR defaults to a temporary directory)
The time includes the import of the report package (matplotlib) and every PNG, the CSV and the page.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    import numpy as np

    from utilscope.report import build_report
    from utilscope.report.synthetic import synthetic_store

    imported = time.perf_counter() - started
    measurements, op_classes = synthetic_store(np.random.default_rng(args.seed), models=60)
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="report-speed-"))
    print(f"{len(measurements)} rows, {len(op_classes)} op-class rows, {os.cpu_count()} CPUs; import {imported:.2f} s")
    for attempt in range(args.repeat):
        begin = time.perf_counter()
        page = build_report(measurements, op_classes, out_dir)
        seconds = time.perf_counter() - begin
        size = sum(p.stat().st_size for p in out_dir.iterdir()) / 1e6
        print(f"run {attempt + 1}: build_report {seconds:.2f} s ({page}, {size:.1f} MB in {out_dir})")


if __name__ == "__main__":
    main()
