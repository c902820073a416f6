"""Benchmark: backends side by side on a GPU (fp16 by default), with utilization, nvml_util and CV.

Usage: python benchmarks/profile_backends.py --models torchvision:resnet50,... --batches 1,32,256
           --backends eager,graph,compile,inference [--precision fp16] [--out DIR]
Writes one JSON file per (model, backend) under --out and prints a summary table last.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from utilscope.measure import profile

COLUMNS = "model backend batch status latency_ms samples_per_s achieved_tflops util util_ceiling nvml cv notes"


def _row_text(model: str, backend: str, row) -> str:
    if row.status != "ok":
        return f"{model:34s} {backend:9s} {row.batch:5d} {row.status}"
    return (
        f"{model:34s} {backend:9s} {row.batch:5d} ok {row.latency_ms:9.3f} {row.samples_per_s:10.0f} "
        f"{row.achieved_tflops:8.2f} {row.utilization:7.2%} {row.utilization_vs_ceiling or 0:7.2%} "
        f"{row.nvml_util if row.nvml_util is not None else float('nan'):5.0f}% {row.cv:6.2%} {'; '.join(row.notes)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="torchvision:resnet50")
    parser.add_argument("--batches", default="1,32,256")
    parser.add_argument("--backends", default="eager,graph,compile,inference")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--out", default="benchmark-results")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    lines = []
    for model in args.models.split(","):
        for backend in args.backends.split(","):
            start_s = time.perf_counter()
            result = profile(model, batches=batches, precision=args.precision, backend=backend)
            elapsed_s = time.perf_counter() - start_s
            name = f"{model.replace(':', '_')}__{backend}__{args.precision}.json"
            (out_dir / name).write_text(json.dumps({**result.to_dict(), "wall_s": elapsed_s}, indent=1))
            lines += [_row_text(model, backend, row) for row in result.rows]
            print(f"done {model} {backend} in {elapsed_s:.1f} s", flush=True)
    print(json.dumps(result.environment))
    print(COLUMNS)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
