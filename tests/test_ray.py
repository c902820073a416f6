"""The Ray executor on a local Ray (CPU only): faults injected at chosen cells (a Ray worker killed mid-chunk, an
out-of-memory batch size refitted on the first attempt) cost no cell and measure no stored cell again; a run that
loses cells, or its head, exits non-zero saying what it stored; a killed driver resumes; tasks are pinned to their
(declared) GPU type; bad addresses are one line, never a hang.

No test waits on a wall-clock deadline: each waits for the event it needs, or for the process it watches to end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.models.zoo import parse_spec
from utilscope.survey import executors
from utilscope.survey.claims import Lease, claim
from utilscope.survey.executors import LocalExecutor, RayExecutor, executor_for, run_plans
from utilscope.survey.plan import SurveyGrid, expand_grid, plan_survey
from utilscope.survey.ray_cluster import (
    ClusterLost,
    HeadWatch,
    check_address,
    check_joinable,
    check_reachable,
    probe,
)
from utilscope.survey.runner import ROW, RunOptions
from utilscope.survey.store import Store

ray = pytest.importorskip("ray")

MODELS = """
import os, signal, time
from pathlib import Path
import torch.nn as nn

RESOLUTION = 16
MARKS = Path({marks!r})  # what a model did once (a fault injected on the first attempt only), and who measured what


class Net(nn.Module):
    def __init__(self, width, pause_s=0.0, oom_at=None, kill_at=None):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(width, 4))
        self.pause_s, self.oom_at, self.kill_at, self.seen, self.paused = pause_s, oom_at, kill_at, set(), set()

    def forward(self, x):
        batch = x.shape[0]
        if x.device.type == "meta":
            return self.body(x)
        if batch not in self.seen:  # the first forward at a batch size in this process: log who measures it
            self.seen.add(batch)
            with open(MARKS / "measured", "a") as log:
                log.write(f"{{os.getpid()}} {{batch}}\\n")
        if batch == self.oom_at and not (MARKS / "oom").exists():
            (MARKS / "oom").touch()
            raise MemoryError("out of memory (injected on the first attempt)")
        if batch == self.kill_at and not (MARKS / "kill").exists():
            (MARKS / "kill").touch()
            while not (MARKS / "go").exists():  # until the test saw the rows before this one stored
                time.sleep(0.05)
            os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker running this chunk's task
            time.sleep(60)
        if self.pause_s and batch >= 2 and batch not in self.paused:
            self.paused.add(batch)
            time.sleep(self.pause_s)
        return self.body(x)


def a():
    return Net(8)

def b():
    return Net(12)

def slow():
    return Net(8, pause_s=0.5)

def slower():
    return Net(8, pause_s=4.0)

def faulty():  # out of memory at 8 (its refit measures 4), then its Ray worker killed at 16: first attempt only
    return Net(8, oom_at=8, kill_at=16)
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


@pytest.fixture()
def models(write_factory, tmp_path):
    """``models(*names)``: model specs of a factory file of this test's own, whose marks live in its tmp_path."""
    marks = tmp_path / "marks"
    marks.mkdir()
    path = write_factory(MODELS.format(marks=str(marks)), "ray_models")
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


def measured(marks: Path) -> Counter:
    """How many processes measured each batch size."""
    lines = (marks / "measured").read_text().split()
    return Counter(int(batch) for batch in lines[1::2])


def test_a_chunk_whose_ray_worker_is_killed_is_resumed_with_exactly_the_cells_left(local_ray, models, tmp_path):
    """Faults at chosen cells, on the first attempt only: batch 8 runs out of memory (``--fit-batch`` stores the
    largest halving that fits, 4, as a cell of its own), then the Ray worker is killed at batch 16. The task is not
    replayed: a new one measures batch 16 alone. Every planned cell has one row; batch 1 was measured once."""
    spec = models("faulty")[0]
    grid = SurveyGrid((spec,), (1, 8, 16), ("fp32",), ("eager",), "cpu")
    db, executor, stored = tmp_path / "ray.sqlite", RayExecutor(max_retries=2), []

    def on_cells_done(cells: int) -> None:  # batch 1 and 8 stored: the fault at 16 may strike
        stored.append(cells)
        if sum(stored) == 2:
            (tmp_path / "marks" / "go").touch()

    (target,) = executor.targets(grid)
    with Store(db) as store:
        plan = plan_survey(grid, store, expand_grid(grid, target), target)
    options = RunOptions(str(db), min_time_ms=20, fit_batch="halve")
    result = run_plans([plan], options, on_cells_done, executor=executor)
    model = parse_spec(spec).id
    assert cells(db) == Counter({(model, 1, "ok"): 1, (model, 8, "oom"): 1, (model, 4, "ok"): 1, (model, 16, "ok"): 1})
    assert result.missing == [] and result.failed_cells == 0 and len(executor.placements) == 2
    counts = measured(tmp_path / "marks")
    assert counts[1] == 1 and counts[16] == 2  # batch 1 never again; 16 by the killed task and by the new one


def test_a_planned_cell_without_a_row_fails_the_survey_naming_it(models, tmp_path, monkeypatch, capsys):
    """An executor that loses one row (as a replayed Ray stream did): the survey names the cell and exits 75 with
    the count, never 0."""

    class Losing(LocalExecutor):
        def run(self, plans, options, sink):
            class Dropping:
                def take(self, tag, payload):
                    if not (tag == ROW and payload["batch"] == 2):
                        sink.take(tag, payload)

            super().run(plans, options, Dropping())

    from utilscope.survey import workflow  # ("utilscope.survey" is the API's function on the package)

    monkeypatch.setattr(workflow, "executor_for", lambda *args: Losing())
    db = tmp_path / "r.sqlite"
    argv = [
        "survey",
        "--device",
        "cpu",
        "--db",
        str(db),
        "--batch",
        "1,2",
        "--backend",
        "eager",
        "--attribute",
        "none",
        "--min-time-ms",
        "20",
        "--models",
        models("a")[0],
    ]
    assert main(argv) == 75
    out, err = capsys.readouterr()
    assert "no row: " in out and "fp32 eager batch 2" in out
    assert err.strip() == (
        "utilscope: 1 planned cell has no row; 1 of 2 cells stored (1 ok, 0 errors); run the same command again "
        "to resume"
    )
    monkeypatch.undo()
    assert main(argv) == 0  # the same command measures the missing cell


def test_gpu_types_all_pins_each_types_tasks_to_that_type(local_ray, models, tmp_path):
    """Each GPU type is a plan of its own, its tasks holding that type's resource (the pin) and a GPU each. (Here
    both "types" measure on this CPU, so their cells share keys: each plan runs under a lease of its own.)"""
    db, executor = tmp_path / "r.sqlite", RayExecutor(gpu_types="all", accelerator="gpu")
    grid = SurveyGrid(models("a"), (1,), ("fp32",), ("eager",), "cpu")
    targets = executor.targets(grid)
    with Store(db) as store:
        plans = [plan_survey(grid, store, expand_grid(grid, target), target) for target in targets]
    assert [plan.target.label for plan in plans] == list(TYPES) and [plan.cells for plan in plans] == [1, 1]
    leases = [Lease(f"test-{plan.target.label}", "cluster", plan, 0, []) for plan in plans]
    run_plans(plans, RunOptions(str(db), min_time_ms=20), leases=leases, executor=executor)
    assert sorted(p["target"] for p in executor.placements) == list(TYPES)
    for placement in executor.placements:  # without the pin a task holds a GPU and no type
        held = {name for name, amount in placement["resources"].items() if amount > 0}
        assert held & {"GPU", "accelerator_type:A", "accelerator_type:B"} == {
            "GPU",
            f"accelerator_type:{placement['target']}",
        }
    assert len({p["cuda_visible_devices"] for p in executor.placements}) == 2  # two GPUs, one per task
    with pytest.raises(UsageError, match="not in the Ray cluster; it has: A, B"):
        RayExecutor(gpu_types="H100", accelerator="gpu").targets(grid)


def _cli(db: Path, model: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "utilscope.cli",
        "survey",
        "--executor",
        "ray",
        "--device",
        "cpu",
        "--db",
        str(db),
        "--batch",
        "1,2,4,8",
        "--backend",
        "eager",
        "--attribute",
        "none",
        "--min-time-ms",
        "20",
        "--models",
        model,
        *extra,
    ]


def _wait_for_a_row(db: Path, process: subprocess.Popen) -> None:
    """Until the store holds a row, or the process ended (then the test's assertions say why)."""
    while process.poll() is None and not (db.exists() and cells(db)):
        time.sleep(0.1)


def test_a_killed_driver_on_a_private_ray_resumes_with_every_cell_once(local_ray, models, tmp_path):
    """The command line starts a private Ray of its own, whatever RAY_ADDRESS says, and says so; killed with
    SIGKILL mid-survey, the run planned again measures what is left, each cell once (the dead driver's claims are
    freed)."""
    db = tmp_path / "r.sqlite"
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1"}  # only --ray-address auto would read it
    driver = subprocess.Popen(
        _cli(db, models("slow")[0]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    _wait_for_a_row(db, driver)
    driver.kill()
    out, err = driver.communicate()
    assert "ray: a private Ray on this machine: 1 node" in out, err
    stored = sum(cells(db).values())
    plans, result = survey(db, SurveyGrid(models("slow"), (1, 2, 4, 8), ("fp32",), ("eager",), "cpu"), RayExecutor())
    assert 0 < stored < 4 and plans[0].cells == 4 - stored and result.count("ok") == 4 - stored
    assert sorted(cells(db).values()) == [1] * 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_killed_head_ends_the_survey_in_seconds_with_what_it_stored(models, tmp_path):
    """A Ray head of its own (``ray start --head``), joined by address, killed with SIGKILL mid-survey: the driver
    exits 75 within seconds (not after Ray's 60 s), with the count and how to resume; the store keeps what it
    stored, and a later run measures the rest."""
    port, temp = _free_port(), tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths
    head = subprocess.Popen(
        [
            "ray",
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--num-gpus=0",
            f"--temp-dir={temp}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while head.poll() is None and probe(f"127.0.0.1:{port}", timeout_s=1.0) is not None:
            time.sleep(0.2)
        db = tmp_path / "r.sqlite"
        driver = subprocess.Popen(
            _cli(db, models("slower")[0], "--ray-address", f"127.0.0.1:{port}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for_a_row(db, driver)
        os.killpg(head.pid, signal.SIGKILL)
        killed_s = time.monotonic()
        out, err = driver.communicate()
        took_s = time.monotonic() - killed_s
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
    assert "ray: the Ray cluster at " in out and "1 node, 2 CPUs" in out
    assert driver.returncode == 75, err
    stored = sum(cells(db).values())
    last = err.strip().splitlines()[-1]
    assert last.startswith("utilscope: lost the Ray cluster: its head at ") and last.endswith(
        f"; {stored} of 4 cells stored ({stored} ok, 0 errors); run the same command again to resume"
    )
    assert 0 < stored < 4 and took_s < 45, took_s  # Ray alone would have waited 60 s


def test_a_lost_head_is_seen_after_the_failed_heartbeats_in_a_row():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        watch = HeadWatch(f"127.0.0.1:{server.getsockname()[1]}", every_s=0.0, lost_after=2)
        watch.check()
        assert watch.failures == 0
    watch.check()  # the port is closed now
    with pytest.raises(ClusterLost, match="stopped answering"):
        watch.check()
    watch.failures = 0
    with pytest.raises(ClusterLost, match="stopped answering"):
        watch.confirm()  # no resubmission to a head that does not answer


ADDRESSES = [
    (None, "local"),
    ("local", "local"),
    ("auto", "auto"),
    ("10.0.0.1:6379", "10.0.0.1:6379"),
    ("head-1.lab:6379", "head-1.lab:6379"),
    ("[::1]:6379", "[::1]:6379"),
]


@pytest.mark.parametrize(("text", "expected"), ADDRESSES)
def test_a_ray_address_is_a_private_ray_auto_or_host_and_port(text, expected):
    assert check_address(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "6379",
        ":6379",
        "host:",
        "host:0",
        "host:70000",
        "1.2.3:80",
        "999.1.1.1:80",
        "[zz]:80",
        "a b:80",
        "http://host:80",
    ],
)
def test_a_malformed_ray_address_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--ray-address must be HOST:PORT"):
        check_address(text)


def test_an_address_that_answers_but_is_no_ray_head_is_refused_in_time():
    """A TCP port that accepts connections but speaks no Ray: the join tried in a child process is abandoned."""
    assert probe("127.0.0.1:1") == "connection refused (nothing listens on that port)"
    assert probe("no-such-host.invalid:6379") == "unknown host 'no-such-host.invalid'"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with pytest.raises(UsageError, match="no Ray cluster let this machine join at .* within 2 s"):
            check_joinable(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=2.0)


def test_a_head_that_does_not_answer_is_said_before_ray_is_imported(monkeypatch):
    """``check_reachable`` (the command line's check before anything heavy, and ``check_joinable``'s first step): a
    TCP probe of HOST:PORT, or of RAY_ADDRESS for ``auto``; a private Ray, or ``auto`` without RAY_ADDRESS, has
    nothing to probe."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for address in (None, "local", "auto"):
        assert check_reachable(address) is None
    with pytest.raises(UsageError, match=r"^no Ray cluster answers at 127.0.0.1:1: connection refused"):
        check_reachable("127.0.0.1:1")
    with pytest.raises(UsageError, match=r"^no Ray cluster answers at no-such-host.invalid:6379: unknown host"):
        check_reachable("no-such-host.invalid:6379")
    with pytest.raises(UsageError, match="--ray-address must be HOST:PORT"):
        check_reachable("garbage")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(UsageError, match=r"answers at 127.0.0.1:1 \(RAY_ADDRESS\): connection refused"):
        check_reachable("auto")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert check_reachable(f"127.0.0.1:{server.getsockname()[1]}") is None


def test_auto_says_which_cluster_it_did_not_find(monkeypatch):
    """``auto`` probes RAY_ADDRESS when it is set; with nothing to join, Ray's words become one line of ours."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(UsageError, match=r"no Ray cluster answers at 127.0.0.1:1 \(RAY_ADDRESS\): connection refused"):
        check_joinable("auto")
    monkeypatch.delenv("RAY_ADDRESS")
    failed = subprocess.CompletedProcess(
        [],
        1,
        "utilscope-join-failed ConnectionError: Could not find any running "
        "Ray instance. Please specify the one to connect to.\n",
        "",
    )
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: failed)
    with pytest.raises(UsageError, match=r"cannot join the Ray cluster at auto: no Ray cluster found \(RAY_ADDRESS"):
        check_joinable("auto")


def test_without_ray_the_executor_is_a_one_line_error(monkeypatch, tmp_path, models, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(UsageError, match=r"needs Ray: pip install 'utilscope\[ray\]'"):
        executor_for("ray")
    db = tmp_path / "r.sqlite"
    assert main(["survey", "--executor", "ray", "--device", "cpu", "--db", str(db), "--models", models("a")[0]]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not db.exists()
    with pytest.raises(UsageError, match="apply to --executor ray"):
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
    on_ray = build_table(
        tmp_path / "ray.json",
        "regnet",
        [1],
        [archs],
        "fp32",
        "cpu",
        on_layer=lambda done, total: timed.append(total),
        executor=RayExecutor(),
    )
    assert set(on_ray.entries) == set(here.entries) and len(timed) == len(here.entries) > 0
    assert all(per_batch[1] > 0 for per_batch in on_ray.entries.values())
    assert (on_ray.space, on_ray.precision) == ("regnet", "fp32")
    assert on_ray.device.split(" (")[0] == here.device.split(" (")[0]  # the same CPU (Ray's task: one thread)
    again = []
    build_table(
        tmp_path / "ray.json",
        "regnet",
        [1],
        [archs],
        "fp32",
        "cpu",
        on_layer=lambda *a: again.append(a),
        executor=RayExecutor(),
    )
    assert again == []  # resumed: every layer is in the table


def test_a_task_that_fails_for_good_fails_only_its_cells_left(models, tmp_path):
    """After its retries a lost task's cells that no row came for become error rows with the reason; the ones
    already stored stay as they are."""
    from utilscope.survey.runner import Sink, cell_of

    grid = SurveyGrid(models("a"), (1, 2, 4), ("fp32",), ("eager",), "cpu")
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(grid, store)
        sink = Sink(store)
        chunk = executors._Chunk(plan, plan.groups, {cell_of(plan.groups[0], 1)})  # batch 1 came before the loss
        executors._fail_chunk(chunk, RuntimeError("node lost"), sink)
        statuses = {key.batch: status for key, status in store.statuses().items()}
    assert statuses == {
        2: "error: Ray task failed: RuntimeError: node lost",
        4: "error: Ray task failed: RuntimeError: node lost",
    }
    assert len(sink.failures) == 2 and all("batch" in failure for failure in sink.failures)


def test_the_raylets_block_for_a_worker_death_the_executor_handles_is_not_printed(monkeypatch, capsys):
    from ray._private import worker

    from utilscope.survey import ray_cluster

    printed = []
    monkeypatch.setattr(worker, "print_to_stdstream", lambda data, ignore_prefix: printed.append(data["lines"]))
    ray_cluster.quiet_handled_errors()
    ray_cluster.quiet_handled_errors()  # once is enough: not wrapped twice
    death = {"pid": "raylet", "is_err": False, "lines": [f"{ray_cluster.HANDLED} by an unexpected system error. ..."]}
    other = {"pid": "raylet", "is_err": False, "lines": ["The node with node id ... has been marked dead"]}
    worker.print_to_stdstream(death, ignore_prefix=False)
    worker.print_to_stdstream(other, ignore_prefix=False)
    worker.print_to_stdstream({**death, "pid": 1234}, ignore_prefix=False)  # a task's own output passes
    assert printed == [other["lines"], death["lines"]]
