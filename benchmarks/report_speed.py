"""Time `build_report` on a synthetic store the size of the full H200 survey: 60 models x 5 batch sizes x 2 backends
= 600 rows, op classes for each of the 120 series. Target: <= 30 s on a 2-core machine.

Usage: python benchmarks/report_speed.py [OUT_DIR] [--repeat N] [--models N --families N --skew S --batches 1,256]
(OUT_DIR defaults to a temporary directory). A timm-sized survey: --models 700 --families 60 --skew 1 --batches 1,256
(700 models x 2 batch sizes x 2 backends = 2800 rows, a few large families and many small ones).
The time includes every PNG, the CSV and the page; the import of the report package (matplotlib) is printed apart.
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
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--families", type=int, default=8, help="more than 8 are generated: 'Family 09', ...")
    parser.add_argument("--skew", type=float, default=0.0, help="family sizes ~ 1 / rank ** skew (0: equal)")
    parser.add_argument("--batches", default="1,8,32,128,256", help="comma-separated batch sizes")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    import numpy as np

    from utilscope.report import build_report
    from utilscope.report.synthetic import synthetic_store

    imported = time.perf_counter() - started
    batches = tuple(int(batch) for batch in args.batches.split(","))
    measurements, op_classes = synthetic_store(
        np.random.default_rng(args.seed), models=args.models, families=args.families, skew=args.skew, batches=batches
    )
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="report-speed-"))
    print(
        f"{measurements['model'].nunique()} models in {measurements['family'].nunique()} families, {len(measurements)} "
        f"rows, {len(op_classes)} op-class rows, {os.cpu_count()} CPUs; import {imported:.2f} s"
    )
    for attempt in range(args.repeat):
        begin = time.perf_counter()
        page = build_report(measurements, op_classes, out_dir)
        seconds = time.perf_counter() - begin
        size = sum(p.stat().st_size for p in out_dir.iterdir()) / 1e6
        print(f"run {attempt + 1}: build_report {seconds:.2f} s ({page}, {size:.1f} MB in {out_dir})")


if __name__ == "__main__":
    main()
