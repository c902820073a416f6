"""Orchestration cost of the Ray executor against the local one, on the CPU (docs/benchmarks.md).

Usage: python benchmarks/executor_overhead.py [--models 4] [--batches 1,2,4,8] [--repeats 3]

The same grid of tiny CNNs (factory file written to a temporary folder) is surveyed into a fresh store by each
executor in turn, two chunks at a time on both, every cell measured with one torch thread (``threads=1``: the local
executor's two workers and Ray's two one-CPU tasks run the same threads). Ray is the private Ray a survey starts by
default (``RayExecutor()``). Three costs are reported apart:
- Ray's start: starting the private Ray;
- its first run's extra time over the warm runs' median: its worker processes start and import torch;
- the per-cell overhead of warm runs: (Ray median - local median) / cells, over ``--repeats`` runs each.
A run's wall time covers planning on the target (Ray: its probe task), claiming, the workers and storing every row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

MODELS = """
import torch.nn as nn

RESOLUTION = 16

def make(width):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(width, 4))
""" + "".join(f"\ndef m{i}():\n    return make({8 + 4 * i})\n" for i in range(16))


def one_run(executor, models: tuple[str, ...], batches: tuple[int, ...], folder: Path, name: str) -> float:
    from utilscope.survey.executors import run_plans
    from utilscope.survey.plan import SurveyGrid, expand_grid, plan_survey
    from utilscope.survey.runner import RunOptions
    from utilscope.survey.store import Store

    db = folder / f"{name}.sqlite"
    start_s = time.perf_counter()
    grid = SurveyGrid(models, batches, ("fp32",), ("eager",), "cpu", threads=1)
    targets = executor.targets(grid)
    with Store(db) as store:
        plans = [plan_survey(grid, store, expand_grid(grid, target), target) for target in targets]
    result = run_plans(plans, RunOptions(str(db), jobs=2, per_worker=max(1, len(models) // 2)), executor=executor)
    wall_s = time.perf_counter() - start_s
    if result.count("ok") != len(models) * len(batches):
        raise SystemExit(f"{name}: {result.count('ok')} cells ok of {len(models) * len(batches)}")
    return wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from utilscope.survey.executors import LocalExecutor, RayExecutor

    on_ray = RayExecutor()
    start_s = time.perf_counter()
    on_ray.connect()  # the private Ray a survey starts
    ray_start_s = time.perf_counter() - start_s
    print(f"ray start: {ray_start_s:.2f} s ({on_ray.joined})")
    batches = tuple(int(b) for b in args.batches.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "models.py").write_text(MODELS)
        models = tuple(f"{folder / 'models.py'}:m{i}" for i in range(args.models))
        cells, times = len(models) * len(batches), {"local": [], "ray": []}
        first_s = one_run(on_ray, models, batches, folder, "ray-first")
        print(f"ray   first run: {cells} cells in {first_s:.2f} s (its workers start)")
        for repeat in range(args.repeats):
            for name, executor in (("local", LocalExecutor()), ("ray", on_ray)):
                wall_s = one_run(executor, models, batches, folder, f"{name}{repeat}")
                times[name].append(wall_s)
                print(f"{name:5s} run {repeat + 1}: {cells} cells in {wall_s:.2f} s ({wall_s / cells:.3f} s per cell)")
    local, warm = statistics.median(times["local"]), statistics.median(times["ray"])
    print(f"ray start {ray_start_s:.2f} s; ray's first run {first_s - warm:+.2f} s over its warm median")
    print(
        f"median of {args.repeats}: local {local:.2f} s, ray {warm:.2f} s for {cells} cells, one thread each; "
        f"ray's overhead {(warm - local) / cells:+.3f} s per cell (target <= 0.3)"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
