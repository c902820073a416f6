"""The Ray executor on a local Ray (CPU only): a killed Ray worker's task retried, every cell stored once, a killed
driver resumed, placement on (declared) GPUs of two types, and a clear error without Ray."""

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
from utilscope.models.zoo import parse_spec
from utilscope.survey.claims import Lease, claim
from utilscope.survey.executors import RayExecutor, executor_for, run_plans
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
        self.pause_s, self.paused = pause_s, set()

    def forward(self, x):  # "slow" pauses once per batch size from 2 on: time to kill it mid-survey
        if self.pause_s and x.device.type != "meta" and x.shape[0] >= 2 and x.shape[0] not in self.paused:
            self.paused.add(x.shape[0])
            time.sleep(self.pause_s)
        return self.body(x)

def a():
    return Net(8)

def b():
    return Net(12)

def c():
    return Net(16)

def slow():
    return Net(8, pause_s=0.5)
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
    return plans, run_plans(plans, options or RunOptions(str(db), min_time_ms=20), executor=executor)


def cells(db) -> Counter:
    with Store(db) as store:
        frame = store.frame()
    return Counter(zip(frame["model"], frame["batch"], frame["status"], strict=True))


def test_a_killed_ray_worker_is_retried_and_every_cell_stored_once(local_ray, models, tmp_path):
    """A Ray worker killed mid-task: Ray retries the task, and every cell is stored once, ok, under the model id a
    local run stores it under (the local executor's own resume is tested in test_survey.py)."""
    grid = SurveyGrid(models("slow", "a", "b"), (1, 2), ("fp32",), ("eager",), "cpu")
    on_ray, executor, done = tmp_path / "ray.sqlite", RayExecutor(max_retries=2), []
    options = RunOptions(str(on_ray), per_worker=3, min_time_ms=20)
    thread = threading.Thread(target=lambda: done.append(survey(on_ray, grid, executor, options)[1]))
    thread.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (executor.placements and on_ray.exists() and cells(on_ray)):
        time.sleep(0.1)
    os.kill(executor.placements[0]["pid"], signal.SIGKILL)  # the task's Ray worker, while "slow" sits at batch 2
    thread.join(timeout=240)
    (result,) = done
    assert result.count("ok") == 6 and result.failed_cells == 0
    assert cells(on_ray) == Counter((parse_spec(m).id, b, "ok") for m in grid.models for b in (1, 2))


def test_gpu_types_all_measures_each_cell_once_per_type_on_distinct_gpus(local_ray, models, tmp_path):
    """Each GPU type is a plan of its own, its tasks pinned to that type and given a GPU each. (Here both "types"
    measure on this CPU, so their cells share keys: each plan runs under a lease of its own, unclaimed.)"""
    db, executor = tmp_path / "r.sqlite", RayExecutor(gpu_types="all", accelerator="gpu")
    grid = SurveyGrid(models("a"), (1,), ("fp32",), ("eager",), "cpu")
    targets = executor.targets(grid)
    with Store(db) as store:
        plans = [plan_survey(grid, store, expand_grid(grid, target), target) for target in targets]
    assert [plan.target.label for plan in plans] == list(TYPES) and [plan.cells for plan in plans] == [1, 1]
    leases = [Lease(f"test-{plan.target.label}", "cluster", plan, 0, []) for plan in plans]
    run_plans(plans, RunOptions(str(db), min_time_ms=20), leases=leases, executor=executor)
    assert sorted(p["target"] for p in executor.placements) == list(TYPES)
    assert len({p["cuda_visible_devices"] for p in executor.placements}) == 2  # two GPUs, one per task
    with pytest.raises(Exception, match="not in the Ray cluster; it has: A, B"):
        RayExecutor(gpu_types="H100", accelerator="gpu").targets(grid)


def test_a_killed_driver_resumes_with_every_cell_once(local_ray, models, tmp_path):
    """The driver (the command line, on the test's Ray) killed with SIGKILL mid-survey; planned again, the run
    measures what is left, each cell once (the dead driver's claims are freed)."""
    db = tmp_path / "r.sqlite"
    argv = [sys.executable, "-m", "utilscope.cli", "survey", "--executor", "ray", "--device", "cpu", "--db", str(db),
            "--batch", "1,2,4,8", "--backend", "eager", "--attribute", "none", "--min-time-ms", "20"]  # fmt: skip
    argv += ["--models", models("slow")[0]]
    env = {**os.environ, "RAY_ADDRESS": local_ray.get_runtime_context().gcs_address}
    driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (db.exists() and cells(db)):
        time.sleep(0.1)
    driver.kill()
    driver.wait()
    stored = sum(cells(db).values())
    plans, result = survey(db, SurveyGrid(models("slow"), (1, 2, 4, 8), ("fp32",), ("eager",), "cpu"), RayExecutor())
    assert 0 < stored < 4 and plans[0].cells == 4 - stored and result.count("ok") == 4 - stored
    assert sorted(cells(db).values()) == [1] * 4


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


def test_a_latency_table_is_filled_by_ray_tasks(local_ray, tmp_path):
    """``nas table --executor ray``: the layers are timed by Ray tasks, the table written here holds every layer the
    local executor times, and a second run finds nothing left to time."""
    from utilscope.nas.latency import build_table
    from utilscope.nas.sampler import sample_architectures, save_jsonl
    from utilscope.nas.spaces import get_space

    archs = save_jsonl(tmp_path / "archs.jsonl", sample_architectures(get_space("regnet"), 1, seed=4))
    here = build_table(tmp_path / "local.json", "regnet", [1], [archs], "fp32", "cpu")
    timed = []
    on_ray = build_table(tmp_path / "ray.json", "regnet", [1], [archs], "fp32", "cpu",
                         on_layer=lambda done, total: timed.append(total), executor=RayExecutor())  # fmt: skip
    assert set(on_ray.entries) == set(here.entries) and len(timed) == len(here.entries) > 0
    assert all(per_batch[1] > 0 for per_batch in on_ray.entries.values())
    assert (on_ray.space, on_ray.precision) == ("regnet", "fp32")
    assert on_ray.device.split(" (")[0] == here.device.split(" (")[0]  # the same CPU (Ray's task: one thread)
    again = []
    build_table(tmp_path / "ray.json", "regnet", [1], [archs], "fp32", "cpu", on_layer=lambda *a: again.append(a),
                executor=RayExecutor())  # fmt: skip
    assert again == []  # resumed: every layer is in the table


def test_a_task_that_fails_for_good_fails_only_its_cells_left(models, tmp_path):
    """After its retries a lost task's cells that no row came for become error rows with the reason; the ones
    already stored stay as they are."""
    from utilscope.survey.executors import _fail_chunk
    from utilscope.survey.runner import Sink

    grid = SurveyGrid(models("a"), (1, 2, 4), ("fp32",), ("eager",), "cpu")
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(grid, store)
        sink = Sink(store)
        told = {(plan.groups[0].model, "fp32", "eager", 1)}  # batch 1 came through before the node was lost
        _fail_chunk(plan.groups, plan, told, RuntimeError("node lost"), sink)
        statuses = {key.batch: status for key, status in store.statuses().items()}
    assert statuses == {
        2: "error: Ray task failed: RuntimeError: node lost",
        4: "error: Ray task failed: RuntimeError: node lost",
    }
    assert len(sink.failures) == 2 and all("batch" in failure for failure in sink.failures)
