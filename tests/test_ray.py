"""The Ray executor on a local Ray (CPU only): the same cells as the local executor, a killed Ray worker's task
retried, a killed driver resumed, placement on (declared) GPUs of two types, and a clear error without Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from utilscope.cli import main
from utilscope.survey.claims import Lease, claim
from utilscope.survey.executors import LocalExecutor, RayExecutor, executor_for, run_plans
from utilscope.survey.plan import SurveyGrid, expand_grid, plan_survey
from utilscope.survey.runner import RunOptions
from utilscope.survey.store import Store

ray = pytest.importorskip("ray")

MODELS = """
import os, time
import torch.nn as nn

RESOLUTION = 16

class Net(nn.Module):
    def __init__(self, width, pause_s=0.0):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(width, 4))
        self.pause_s = pause_s

    def forward(self, x):
        if self.pause_s and x.device.type != "meta" and x.shape[0] >= 2:
            time.sleep(self.pause_s)
        return self.body(x)

def a():
    return Net(8)

def b():
    return Net(12)

def c():
    return Net(16)

def slow():
    return Net(8, pause_s=0.3)
"""
TYPES = ("A", "B")


@pytest.fixture(scope="module")
def local_ray():
    """A Ray of this machine's two CPUs that declares two GPUs and two GPU types (nothing runs on a GPU here)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    resources = {f"accelerator_type:{t}": 1.0 for t in TYPES}
    ray.init(num_cpus=2, num_gpus=2, resources=resources, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def models(write_factory):
    path = write_factory(MODELS, "ray_models")
    return lambda *names: tuple(f"{path}:{name}" for name in names)


def survey(db, grid: SurveyGrid, executor, options: RunOptions | None = None):
    targets = executor.targets(grid)
    with Store(db) as store:
        plans = [plan_survey(grid, store, expand_grid(grid, target), target) for target in targets]
    return plans, run_plans(plans, options or RunOptions(str(db)), executor=executor)


def cells(db) -> Counter:
    with Store(db) as store:
        frame = store.frame()
    return Counter(zip(frame["model"], frame["batch"], frame["status"], strict=True))


def test_ray_measures_the_cells_the_local_executor_measures(local_ray, models, tmp_path):
    grid = SurveyGrid(models("a", "b", "c"), (1, 2), ("fp32",), ("eager",), "cpu")
    _, on_ray = survey(tmp_path / "ray.sqlite", grid, RayExecutor())
    _, here = survey(tmp_path / "local.sqlite", grid, LocalExecutor())
    assert on_ray.count("ok") == here.count("ok") == 6
    # same cells and statuses (the device's name says how many threads measured it: one per Ray CPU task)
    assert cells(tmp_path / "ray.sqlite") == cells(tmp_path / "local.sqlite") and set(
        cells(tmp_path / "ray.sqlite").values()
    ) == {1}


def test_a_killed_ray_worker_is_retried_and_every_cell_stored_once(local_ray, models, tmp_path):
    db, executor = tmp_path / "r.sqlite", RayExecutor(max_retries=2)
    grid = SurveyGrid(models("slow"), (1, 2, 4, 8), ("fp32",), ("eager",), "cpu")
    done: list = []
    thread = threading.Thread(target=lambda: done.append(survey(db, grid, executor)[1]))
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (executor.placements and cells(db) if db.exists() else False):
        time.sleep(0.1)
    os.kill(executor.placements[0]["pid"], signal.SIGKILL)  # the task's Ray worker, mid-task
    thread.join(timeout=240)
    (result,) = done
    assert result.count("ok") == 4 and result.failed_cells == 0
    assert sorted(cells(db).values()) == [1, 1, 1, 1]


def test_gpu_types_all_measures_each_cell_once_per_type_on_distinct_gpus(local_ray, models, tmp_path):
    """Each GPU type is a plan of its own, its tasks pinned to that type and given a GPU each. (Here both "types"
    measure on this CPU, so their cells share keys: each plan runs under a lease of its own, unclaimed.)"""
    db, executor = tmp_path / "r.sqlite", RayExecutor(gpu_types="all", accelerator="gpu")
    grid = SurveyGrid(models("a"), (1, 2), ("fp32",), ("eager",), "cpu")
    targets = executor.targets(grid)
    with Store(db) as store:
        plans = [plan_survey(grid, store, expand_grid(grid, target), target) for target in targets]
    assert [plan.target.label for plan in plans] == list(TYPES) and [plan.cells for plan in plans] == [2, 2]
    leases = [Lease(f"test-{plan.target.label}", "cluster", plan, 0, []) for plan in plans]
    run_plans(plans, RunOptions(str(db)), leases=leases, executor=executor)
    assert sorted(p["target"] for p in executor.placements) == list(TYPES)
    assert len({p["cuda_visible_devices"] for p in executor.placements}) == 2  # two GPUs, one per task
    with pytest.raises(Exception, match="not in the Ray cluster; it has: A, B"):
        RayExecutor(gpu_types="H100", accelerator="gpu").targets(grid)


def test_a_killed_driver_resumes_with_every_cell_once(local_ray, models, tmp_path):
    """The driver (the CLI) killed mid-survey; run again, it measures what is left, each cell once."""
    db = tmp_path / "r.sqlite"
    argv = [sys.executable, "-m", "utilscope.cli", "survey", "--executor", "ray", "--device", "cpu", "--db", str(db),
            "--batch", "1,2,4,8", "--backend", "eager", "--attribute", "none", "--per-worker", "1"]  # fmt: skip
    argv += [arg for model in models("slow", "a") for arg in ("--models", model)]
    env = {**os.environ, "RAY_ADDRESS": local_ray.get_runtime_context().gcs_address}
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (db.exists() and cells(db)):
        time.sleep(0.2)
    driver.kill()
    driver.wait()
    stored = sum(cells(db).values())
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert 0 < stored < 8 and f"{8 - stored} cells to measure" in again.stdout
    assert sorted(cells(db).values()) == [1] * 8


def test_without_ray_the_executor_is_a_one_line_error(monkeypatch, tmp_path, models, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(Exception, match=r"needs Ray: pip install 'utilscope\[ray\]'"):
        executor_for("ray")
    db = tmp_path / "r.sqlite"
    assert main(["survey", "--executor", "ray", "--device", "cpu", "--db", str(db), "--models", models("a")[0]]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not db.exists()
    with pytest.raises(Exception, match="apply to --executor ray"):
        executor_for("local", gpu_types="all")


def test_claims_of_a_ray_plan_name_its_target(local_ray, models, tmp_path):
    grid = SurveyGrid(models("a"), (1,), ("fp32",), ("eager",), "cpu")
    (target,) = RayExecutor().targets(grid)
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(grid, store, expand_grid(grid, target), target)
    lease = claim(plan, str(tmp_path / "r.sqlite"))
    assert lease.device == "cluster:cpu" and lease.neighbours == [] and lease.plan.cells == 1
