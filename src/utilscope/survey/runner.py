"""Survey runner: measure a plan's groups in worker subprocesses (``python -m utilscope.survey.worker``), one or
several groups per worker, with a timeout per group. A crash, a hang or an OOM costs that group's remaining cells —
recorded as ``error: ...`` rows — never the survey; a new worker takes over the groups after it. The worker writes
each row as soon as it is measured, so an interrupted survey loses at most the cell in flight.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.hardware import check_peak_tflops
from utilscope.measure.settings import timing_window
from utilscope.models import sets as model_sets
from utilscope.survey.claims import Lease, claim, holding
from utilscope.survey.plan import Group, SurveyPlan
from utilscope.survey.schema import now_iso
from utilscope.survey.store import Store

DEFAULT_TIMEOUT_S = 900.0
PARENT_ENV = "UTILSCOPE_SURVEY_PARENT"  # the runner's pid: a worker exits when its runner dies
GROUP_DONE = "utilscope-group-done"  # a worker prints this line after each group
CELL_DONE = "utilscope-cell-done"  # ... and this one after each cell it stores


@dataclass(frozen=True)
class RunOptions:
    """How to run a plan, checked when made: the store, workers at a time (``jobs``, one GPU each when there are
    several), groups per worker process, the timeout per group, which models also get op-class attribution, the
    timed window per cell (None: the profile default) and a user peak (None: the datasheet's)."""

    db: str
    jobs: int = 1
    per_worker: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S  # per group: a worker silent for longer is killed
    attribute_models: frozenset[str] = frozenset()
    min_time_ms: float | None = None
    peak_tflops: float | None = None

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.per_worker < 1 or not self.timeout_s > 0:
            raise UsageError("--jobs and --per-worker must be at least 1 and --timeout positive")
        timing_window(self.min_time_ms)
        if self.peak_tflops is not None:
            check_peak_tflops(self.peak_tflops)


@dataclass
class SurveyResult:
    """What a run did: the cells it claimed and their rows as stored (``outcome``: model, precision, backend,
    batch, status), its wall time, the workers that died or hung (``failures``), and the planned cells it left to
    another run that held them (``taken``)."""

    cells: int
    wall_s: float
    outcome: pd.DataFrame
    failures: list[str] = field(default_factory=list)
    taken: int = 0  # planned cells another live run held: skipped here

    def count(self, status: str) -> int:
        """Cells with this status: "ok", "oom" or "error" (any ``error: ...``)."""
        statuses = self.outcome["status"]
        return int((statuses.str.startswith("error") if status == "error" else statuses == status).sum())

    @property
    def failed_cells(self) -> int:
        """Cells whose row is an error (a worker that raised, died or hung); oom is a measurement's outcome."""
        return self.count("error")


class SurveyInterrupted(KeyboardInterrupt):
    """An interrupted run: the cells stored stay, the one in flight was not stored; rerunning resumes."""

    def __init__(self, stored: int, left: int):
        super().__init__(f"interrupted: {stored} cells stored, {left} left; rerun to resume")
        self.stored, self.left = stored, left


def outcome(plan: SurveyPlan, db: str) -> pd.DataFrame:
    """The rows the store holds for the plan's cells (a cell not stored has no row)."""
    with Store(db) as store:
        statuses = store.statuses()
    rows = [(key.model, key.precision, key.backend, key.batch, statuses[key])
            for group in plan.groups for key in group.keys(plan.config) if key in statuses]  # fmt: skip
    return pd.DataFrame(rows, columns=["model", "precision", "backend", "batch", "status"])


def chunk_groups(groups: list[Group], per_worker: int) -> list[list[Group]]:
    """Consecutive groups, ``per_worker`` to a worker process (more per worker: less start-up, less isolation)."""
    if per_worker < 1:
        raise UsageError(f"groups per worker must be at least 1, got {per_worker}")
    return [groups[i : i + per_worker] for i in range(0, len(groups), per_worker)]


def worker_command(groups: list[Group], plan: SurveyPlan, options: RunOptions, device: str | None) -> list[str]:
    """The worker's command line: the store, the groups, and one JSON object of measurement settings."""
    specs = [{**asdict(g), "attribute": g.model in options.attribute_models} for g in groups]
    settings = {"device": device, "channels_last": plan.grid.channels_last, "cudnn": plan.grid.cudnn.to_dict(),
                "min_time_ms": options.min_time_ms, "peak_tflops": options.peak_tflops}  # fmt: skip
    module = "utilscope.survey.worker"
    return [sys.executable, "-m", module, "--db", options.db, "--groups", json.dumps(specs), "--settings",
            json.dumps(settings)]  # fmt: skip


def failure_rows(group: Group, plan: SurveyPlan, status: str, wall_s: float) -> list[dict]:
    """Error rows for a group's cells that its worker did not store."""
    now, family = now_iso(), model_sets.family_of(group.model)
    return [{"key": key, "family": family, "status": status, "measured_at": now, "wall_s": wall_s / len(group.batches)}
            for key in group.keys(plan.config)]  # fmt: skip


class Workers:
    """The worker processes of a run, so that an interrupt stops them all. Each runs in a session of its own: a
    terminal's Ctrl-C reaches the runner only, which stops the workers and stores nothing for their cells in
    flight."""

    def __init__(self):
        self.lock, self.running, self.stopping = threading.Lock(), set(), threading.Event()

    def start(self, command: list[str], env: dict, stderr) -> subprocess.Popen:
        with self.lock:
            if self.stopping.is_set():
                raise KeyboardInterrupt
            worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                      start_new_session=True)  # fmt: skip
            self.running.add(worker)
            return worker

    def finished(self, worker: subprocess.Popen) -> None:
        with self.lock:
            self.running.discard(worker)

    def stop(self) -> None:
        with self.lock:
            self.stopping.set()
            for worker in self.running:
                worker.kill()


def watch_worker(command: list[str], env: dict, timeout_s: float, reporter: Reporter,
                 workers: Workers | None = None) -> str | None:  # fmt: skip
    """Run a worker, passing its "cell done" and "group done" lines to ``reporter``; kill it when one group takes
    over ``timeout_s``. Returns None when it exited cleanly, else the failure status for the group it was on."""
    workers = workers or Workers()
    with tempfile.TemporaryFile("w+") as stderr, workers.start(command, env, stderr) as worker:
        try:
            return _follow(worker, stderr, timeout_s, reporter)
        finally:
            workers.finished(worker)


def _follow(worker: subprocess.Popen, stderr, timeout_s: float, reporter: Reporter) -> str | None:
    """Read a running worker's lines until it exits or stays silent for ``timeout_s`` (then it is killed)."""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(worker.stdout, selectors.EVENT_READ)
        while True:
            if not selector.select(max(0.0, deadline - time.monotonic())):
                worker.kill()
                worker.wait()
                return f"error: timeout after {timeout_s:.0f} s"
            line = worker.stdout.readline()
            if not line:
                break
            if line.startswith(CELL_DONE):
                reporter.cell_done()
            elif line.startswith(GROUP_DONE):
                deadline = time.monotonic() + timeout_s
                reporter.group_done()
    code = worker.wait()
    if code == 0:
        return None
    stderr.seek(0)
    last = (stderr.read().strip().splitlines() or ["(no output)"])[-1]
    return f"error: worker exited with code {code}: {last[:300]}"


def missing(groups: list[Group], plan: SurveyPlan, db: str) -> list[Group]:
    """The groups reduced to their cells the store does not hold (groups with none left dropped)."""
    with Store(db) as store:
        present = store.done_keys(retry_errors=False)
    left = [g.only(key.batch for key in g.keys(plan.config) if key not in present) for g in groups]
    return [g for g in left if g.batches]


class Reporter:
    """Follows a worker given ``groups``: counts the groups it finished (so the one in flight is known) and passes
    each stored cell on to ``on_cells_done``."""

    def __init__(self, groups: list[Group], on_cells_done: Callable[[int], None] | None):
        self.groups, self.on_cells_done, self.done = groups, on_cells_done, 0

    def cell_done(self) -> None:
        if self.on_cells_done is not None:
            self.on_cells_done(1)

    def group_done(self) -> None:
        self.done += 1

    def in_flight(self) -> Group | None:
        return self.groups[self.done] if self.done < len(self.groups) else None


def _same_group(a: Group, b: Group) -> bool:
    return (a.model, a.resolution, a.precision, a.backend) == (b.model, b.resolution, b.precision, b.backend)


def run_chunk(groups: list[Group], plan: SurveyPlan, options: RunOptions, gpu: int | None,
              on_cells_done: Callable[[int], None] | None = None,
              workers: Workers | None = None) -> list[str]:  # fmt: skip
    """Measure groups in one worker process; when it dies or hangs, store error rows for the group it was on and
    start a new worker for the groups after it (each round settles at least one group). ``on_cells_done(n)`` as
    cells are stored, measured or failed. After ``workers.stop()`` nothing more is stored or started. Returns
    failure messages."""
    workers = workers or Workers()
    env = {**os.environ, PARENT_ENV: str(os.getpid())}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    device = plan.grid.device if gpu is None else "cuda:0"
    failures: list[str] = []
    remaining = list(groups)
    while remaining and not workers.stopping.is_set():
        start_s, reporter = time.perf_counter(), Reporter(list(remaining), on_cells_done)
        command = worker_command(reporter.groups, plan, options, device)
        status = watch_worker(command, env, options.timeout_s, reporter, workers)
        if workers.stopping.is_set():
            break  # interrupted: the cell in flight is not a failure, and is not stored
        remaining = missing(reporter.groups, plan, options.db)
        if not remaining:
            break
        in_flight = reporter.in_flight()
        if status is not None and in_flight is not None and not _same_group(remaining[0], in_flight):
            continue  # it died after storing its group's cells: nothing failed, the rest goes to a new worker
        failed = remaining.pop(0)  # the group it was on (or, after a clean exit that left cells, the first left)
        failures += _record_failure(failed, plan, options.db, status, time.perf_counter() - start_s)
        if on_cells_done is not None:
            on_cells_done(len(failed.batches))
    return failures


def _record_failure(group: Group, plan: SurveyPlan, db: str, status: str | None, wall_s: float) -> list[str]:
    reason = status or "error: the worker exited without storing this cell"
    with Store(db) as store:
        for row in failure_rows(group, plan, reason, wall_s):
            store.add(row)
    return [f"{group.model} {group.precision} {group.backend} batch {b}: {reason}" for b in group.batches]


def run_survey(plan: SurveyPlan, options: RunOptions, on_cells_done: Callable[[int], None] | None = None,
               lease: Lease | None = None) -> SurveyResult:  # fmt: skip
    """Run the plan's groups, ``options.per_worker`` groups per worker process, ``options.jobs`` workers at a
    time; on CUDA with several GPUs each running worker holds its own GPU. Only the cells claimed in the store are
    measured (``lease``, from ``claims.claim``; claimed here when not given): cells another live run holds are
    skipped. An interrupt (Ctrl-C) stops every worker and raises ``SurveyInterrupted``: the cells stored stay, the
    ones in flight are not stored."""
    dev = hardware.resolve_device(plan.grid.device)
    gpus = torch.cuda.device_count() if dev.type == "cuda" else 0
    if gpus and options.jobs > gpus:
        raise UsageError(f"--jobs {options.jobs} with {gpus} GPU(s): workers sharing a GPU would disturb each "
                         "other's timings")  # fmt: skip
    start_s = time.perf_counter()
    if dev.type == "cuda":
        hardware.get_ceilings(dev)  # measured once here and cached, not by every worker at once
    with holding(lease or claim(plan, options.db), options.db) as held:
        chunks = chunk_groups(held.plan.groups, options.per_worker)
        failures = _run_chunks(held.plan, options, chunks, gpus, on_cells_done)
    return SurveyResult(held.plan.cells, time.perf_counter() - start_s, outcome(held.plan, options.db), failures,
                        held.taken)  # fmt: skip


def _run_chunks(plan: SurveyPlan, options: RunOptions, chunks: list[list[Group]], gpus: int,
                on_cells_done: Callable[[int], None] | None) -> list[str]:  # fmt: skip
    """The chunks on ``options.jobs`` threads, each holding a GPU of its own (when there are several)."""
    free_gpus: queue.Queue[int | None] = queue.Queue()
    for index in range(options.jobs):
        free_gpus.put(index if gpus > 1 else None)
    workers = Workers()

    def task(chunk: list[Group]) -> list[str]:
        gpu = free_gpus.get()
        try:
            return [] if workers.stopping.is_set() else run_chunk(chunk, plan, options, gpu, on_cells_done, workers)
        finally:
            free_gpus.put(gpu)

    pool = ThreadPoolExecutor(max_workers=options.jobs)
    try:
        futures = [pool.submit(task, chunk) for chunk in chunks]
        failures = [message for future in futures for message in future.result()]
    except KeyboardInterrupt:
        workers.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        stored = len(outcome(plan, options.db))
        raise SurveyInterrupted(stored, plan.cells - stored) from None
    pool.shutdown()
    return failures
