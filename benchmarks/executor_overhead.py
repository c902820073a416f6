"""Per-cell orchestration overhead of the Ray executor against the local one, on the CPU (docs/benchmarks.md).

Usage: python benchmarks/executor_overhead.py [--models 4] [--batches 1,2,4,8] [--repeats 3]

The same grid of tiny CNNs (factory file written to a temporary folder) is surveyed into a fresh store by each
executor in turn, ``--repeats`` times, two chunks at a time on both (local: ``jobs=2``; Ray: a local Ray of 2
CPUs, started before timing). A run's wall time covers planning on the target, claiming, the workers and storing
every row; the Ray run also covers its probe task. Prints each run, then the median per executor and the overhead
per cell: (Ray - local) / cells.
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
    grid = SurveyGrid(models, batches, ("fp32",), ("eager",), "cpu")
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

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    batches = tuple(int(b) for b in args.batches.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "models.py").write_text(MODELS)
        models = tuple(f"{folder / 'models.py'}:m{i}" for i in range(args.models))
        cells, times = len(models) * len(batches), {"local": [], "ray": []}
        for repeat in range(args.repeats):
            for name, executor in (("local", LocalExecutor()), ("ray", RayExecutor())):
                wall_s = one_run(executor, models, batches, folder, f"{name}{repeat}")
                times[name].append(wall_s)
                print(f"{name:5s} run {repeat + 1}: {cells} cells in {wall_s:.2f} s ({wall_s / cells:.3f} s per cell)")
    local, on_ray = statistics.median(times["local"]), statistics.median(times["ray"])
    print(f"median: local {local:.2f} s, ray {on_ray:.2f} s for {cells} cells; overhead of ray "
          f"{(on_ray - local) / cells:+.3f} s per cell (target <= 0.3)")  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
