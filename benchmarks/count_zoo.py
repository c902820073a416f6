"""Benchmark: count every torchvision classification model (batch 1, native resolution).

Prints one line per model and the total wall time, measured after the imports (interpreter and torch start
are excluded and printed separately). Usage: python benchmarks/count_zoo.py [PATTERN]
"""

from __future__ import annotations

import sys
import time

start_s = time.perf_counter()
import torch  # noqa: E402

import utilscope  # noqa: E402
from utilscope.models import zoo  # noqa: E402

import_s = time.perf_counter() - start_s


def main(pattern: str = "torchvision:*") -> None:
    names = zoo.list_models(pattern)
    t0 = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        result = utilscope.count(name)
        elapsed_s = time.perf_counter() - t
        print(f"{name:36s} {result.resolution:4d}px {result.total.flops / 1e9:9.2f} GFLOP {elapsed_s:6.3f} s")
    total_s = time.perf_counter() - t0
    print(f"imports (torch, utilscope): {import_s:.2f} s")
    per_model_ms = total_s / len(names) * 1e3
    print(f"counted {len(names)} models in {total_s:.2f} s ({per_model_ms:.0f} ms/model), torch {torch.__version__}")


if __name__ == "__main__":
    main(*sys.argv[1:])
