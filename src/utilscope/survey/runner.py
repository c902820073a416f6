"""Survey runner: measure a plan's groups in worker subprocesses (``python -m utilscope.survey.worker``), one or
several groups per worker, with a timeout per group. A crash, a hang or an OOM costs that group's remaining cells —
recorded as ``error: ...`` rows — never the survey; a new worker takes over the groups after it.

Workers write no store: each tells its rows on its standard output as soon as they are measured
(``survey.messages``), ``run_chunk`` passes them on, and the runner's ``Sink`` — the one writer of the store —
stores them at once. Where the chunks run is an executor's choice (``survey.executors``: local subprocesses, one
per GPU; or Ray tasks on a cluster). An interrupted survey loses at most the cells in flight.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import pandas as pd

from utilscope.errors import UsageError
from utilscope.hardware import check_peak_tflops
from utilscope.limits import FIT_RULES, check_count, check_jobs, check_timeout
from utilscope.measure.settings import timing_window
from utilscope.models import sets as model_sets
from utilscope.survey.messages import FITTED_ROW, GROUP_DONE, OP_CLASSES, PARENT_ENV, RECORD, ROW, parse
from utilscope.survey.plan import Group, SurveyPlan
from utilscope.survey.schema import GPU_THREADS, CellKey
from utilscope.survey.store import Store
from utilscope.units import now_iso, plural

DEFAULT_TIMEOUT_S = 900.0
FAILURE = "utilscope-failure"  # run_chunk's own message: a group's cells failed (their error rows come as rows)
EXIT = "utilscope-exit"  # watch_worker's last message: None, or the failure status of the group in flight


@dataclass(frozen=True)
class RunOptions:
    """How to run a plan, checked when made: the store, workers at a time (``jobs``, one GPU each when there are
    several; the local executor), groups per worker process, the timeout per group, which models also get
    op-class attribution, the timed window per cell (None: the profile default) and a user peak (None: the
    datasheet's)."""

    db: str
    jobs: int = 1
    per_worker: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S  # per group: a worker silent for longer is killed
    attribute_models: frozenset[str] = frozenset()
    min_time_ms: float | None = None
    peak_tflops: float | None = None
    fit_batch: str | None = None  # after an out-of-memory batch size, also measure the largest smaller one that fits
    # by this rule (``FIT_RULES``: "halve", or "timm", timm's benchmark's); None: not

    def __post_init__(self) -> None:
        check_jobs(self.jobs)
        check_count(self.per_worker, "--per-worker")
        check_timeout(self.timeout_s)
        timing_window(self.min_time_ms)
        if self.peak_tflops is not None:
            check_peak_tflops(self.peak_tflops)
        if self.fit_batch is not None and self.fit_batch not in FIT_RULES:
            raise UsageError(f"--fit-batch takes one of {', '.join(FIT_RULES)}, got {self.fit_batch!r}")


@dataclass
class SurveyResult:
    """What a run did: the cells it claimed and their rows as stored (``outcome``: model, precision, backend,
    batch, status), its wall time, the workers that died or hung (``failures``), the planned cells it left to
    another run that held them (``taken``), and the cells it claimed that have no row (``missing``: a run is
    complete only when this is empty)."""

    cells: int
    wall_s: float
    outcome: pd.DataFrame
    failures: list[str] = field(default_factory=list)
    taken: int = 0  # planned cells another live run held: skipped here
    missing: list[CellKey] = field(default_factory=list)

    def count(self, status: str) -> int:
        """Cells with this status: "ok", "oom" or "error" (any ``error: ...``)."""
        statuses = self.outcome["status"]
        return int((statuses.str.startswith("error") if status == "error" else statuses == status).sum())

    @property
    def failed_cells(self) -> int:
        """Cells whose row is an error (a worker that raised, died or hung); oom is a measurement's outcome."""
        return self.count("error")

    def tally(self) -> str:
        """The cells of this run that have a row, by status: "7 of 12 cells stored (6 ok, 1 error)"."""
        return stored_tally(self.outcome, self.cells)


def stored_tally(stored: pd.DataFrame, planned: int) -> str:
    """How many of ``planned`` cells have a row, by status: "N of M cells stored (K ok, E errors)", with "O oom"
    when some ran out of memory."""
    statuses = stored["status"]
    ok, oom = int((statuses == "ok").sum()), int((statuses == "oom").sum())
    errors = int(statuses.str.startswith("error").sum())
    parts = [f"{ok} ok"] + ([f"{oom} oom"] if oom else []) + [plural(errors, "error")]
    return f"{len(stored)} of {planned} cells stored ({', '.join(parts)})"


class SurveyInterrupted(KeyboardInterrupt):
    """An interrupted run: the cells stored stay, the one in flight was not stored; rerunning resumes."""

    def __init__(self, stored: int, left: int):
        super().__init__(f"interrupted: {plural(stored, 'cell')} stored, {left} left; rerun to resume")
        self.stored, self.left = stored, left


def outcome(plans: list[SurveyPlan], db: str) -> tuple[pd.DataFrame, list[CellKey]]:
    """The rows the store holds for the plans' cells (model, resolution, precision, backend, batch, status), and
    the cells that have no row."""
    with Store(db) as store:
        statuses = store.statuses()
    keys = [key for plan in plans for group in plan.groups for key in group.keys(plan.config)]
    rows = [
        (key.model, key.resolution, key.precision, key.backend, key.batch, statuses[key])
        for key in keys
        if key in statuses
    ]
    frame = pd.DataFrame(rows, columns=["model", "resolution", "precision", "backend", "batch", "status"])
    return frame, [key for key in keys if key not in statuses]


def chunk_groups(groups: list[Group], per_worker: int) -> list[list[Group]]:
    """Consecutive groups, ``per_worker`` to a worker process (more per worker: less start-up, less isolation)."""
    if per_worker < 1:
        raise UsageError(f"groups per worker must be at least 1, got {per_worker}")
    return [groups[i : i + per_worker] for i in range(0, len(groups), per_worker)]


def worker_command(groups_file: str, plan: SurveyPlan, options: RunOptions, device: str | None) -> list[str]:
    """The worker's command line: the file its groups are in (``write_groups``; a command line holds a few
    hundred at most), and one JSON object of measurement settings."""
    settings = {
        "device": device,
        "channels_last": plan.grid.channels_last,
        "cudnn": plan.grid.cudnn.to_dict(),
        "min_time_ms": options.min_time_ms,
        "peak_tflops": options.peak_tflops,
        "fit_batch": options.fit_batch,
        "threads": worker_threads(plan),
    }
    module = "utilscope.survey.worker"
    return [sys.executable, "-m", module, "--groups-file", groups_file, "--settings", json.dumps(settings)]


@contextlib.contextmanager
def write_groups(groups: list[Group], options: RunOptions) -> Iterator[str]:
    """A temporary JSON file of the groups a worker measures (with whether to attribute each), removed after."""
    specs = [{**asdict(g), "attribute": g.model in options.attribute_models} for g in groups]
    with tempfile.NamedTemporaryFile("w", prefix="utilscope-groups-", suffix=".json") as listing:
        json.dump(specs, listing)
        listing.flush()
        yield listing.name


def worker_threads(plan: SurveyPlan) -> int | None:
    """The thread count a plan's workers set: a CPU plan's keyed one, so that their rows fill the planned cells
    whatever torch's own count in a worker; on a GPU the grid's (None: torch's own), which its keys leave out."""
    return plan.grid.threads if plan.config.threads == GPU_THREADS else plan.config.threads


def failure_rows(group: Group, plan: SurveyPlan, status: str, wall_s: float) -> list[dict]:
    """Error rows (key as columns) for a group's cells that its worker did not measure."""
    now, family = now_iso(), model_sets.family_of(group.model)
    return [
        {**key.columns(), "family": family, "status": status, "measured_at": now, "wall_s": wall_s / len(group.batches)}
        for key in group.keys(plan.config)
    ]


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
            worker = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, env=env, bufsize=0, start_new_session=True
            )
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


def watch_worker(
    command: list[str],
    env: dict,
    timeout_s: float,
    workers: Workers | None = None,
) -> Iterator[tuple[str, object]]:
    """Run a worker, yielding its messages as they come, then ``(EXIT, status)``: None when it exited cleanly,
    else the failure status of the group it was on. A worker silent for ``timeout_s`` within a group is killed."""
    workers = workers or Workers()
    with tempfile.TemporaryFile("w+") as stderr, workers.start(command, env, stderr) as worker:
        try:
            yield from _follow(worker, stderr, timeout_s)
        finally:
            workers.finished(worker)


def _follow(worker: subprocess.Popen, stderr, timeout_s: float) -> Iterator[tuple[str, object]]:
    """The worker's messages as its lines arrive (read unbuffered: a line already read is never left waiting in a
    buffer while the selector waits for more), until it exits or stays silent for ``timeout_s``."""
    deadline, pending, fd = time.monotonic() + timeout_s, b"", worker.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if not selector.select(max(0.0, deadline - time.monotonic())):
                worker.kill()
                worker.wait()
                yield EXIT, f"error: timeout after {timeout_s:.0f} s"
                return
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for message in filter(None, (parse(line.decode(errors="replace")) for line in lines)):
                if message[0] == GROUP_DONE:
                    deadline = time.monotonic() + timeout_s
                yield message
    code = worker.wait()
    if code == 0:
        yield EXIT, None
        return
    stderr.seek(0)
    last = (stderr.read().strip().splitlines() or ["(no output)"])[-1]
    yield EXIT, f"error: worker exited with code {code}: {last[:300]}"


def cell_of_row(row: dict) -> tuple:
    """The cell a row fills: (model, resolution, precision, backend, batch); its configuration is the plan's."""
    return row["model"], row["resolution"], row["precision"], row["backend"], row["batch"]


def cell_of(group: Group, batch: int) -> tuple:
    """The cell of ``group`` at ``batch``, as ``cell_of_row`` names it."""
    return group.model, group.resolution, group.precision, group.backend, batch


def run_chunk(
    groups: list[Group],
    plan: SurveyPlan,
    options: RunOptions,
    device: str | None,
    workers: Workers | None = None,
    env: dict | None = None,
) -> Iterator[tuple[str, object]]:
    """Measure groups in one worker process, yielding its messages (rows, op classes, records) as they come; when
    it dies or hangs, yield error rows and a ``FAILURE`` message for the group it was on, and start a new worker
    for the groups after it (each round settles at least one group). After ``workers.stop()`` nothing more is
    yielded or started."""
    workers = workers or Workers()
    env = {**os.environ, PARENT_ENV: str(os.getpid()), **(env or {})}
    remaining = list(groups)
    while remaining and not workers.stopping.is_set():
        start_s, told, done, status = time.perf_counter(), set(), 0, None
        with write_groups(remaining, options) as groups_file:
            command = worker_command(groups_file, plan, options, device)
            for tag, payload in watch_worker(command, env, options.timeout_s, workers):
                if tag == EXIT:
                    status = payload
                elif tag == GROUP_DONE:
                    done += 1
                elif not workers.stopping.is_set():
                    told |= {cell_of_row(payload)} if tag == ROW else set()
                    yield tag, payload
        if workers.stopping.is_set():
            return  # interrupted: the cells in flight are not failures, and are not stored
        left = [g.only(b for b in g.batches if cell_of(g, b) not in told) for g in remaining]
        left = [g for g in left if g.batches]
        in_flight = remaining[done] if done < len(remaining) else None
        if left and status is not None and in_flight is not None and left[0].only(()) != in_flight.only(()):
            remaining = left
            continue  # it died after telling its group's cells: nothing failed, the rest goes to a new worker
        if left:
            yield from _failure(left.pop(0), plan, status, time.perf_counter() - start_s)
        remaining = left


def _failure(group: Group, plan: SurveyPlan, status: str | None, wall_s: float) -> Iterator[tuple[str, object]]:
    """Error rows for the group the worker was on (or, after a clean exit that left cells, the first left)."""
    reason = status or "error: the worker exited without telling this cell"
    for row in failure_rows(group, plan, reason, wall_s):
        yield ROW, row
    yield FAILURE, [f"{group.model} {group.precision} {group.backend} batch {b}: {reason}" for b in group.batches]


class Sink:
    """The driver's end of a run: stores each message as it comes (the one writer of the store), counts the
    cells, collects the failures."""

    def __init__(self, store: Store, on_cells_done: Callable[[int], None] | None = None):
        self.store, self.on_cells_done, self.failures = store, on_cells_done, []

    def take(self, tag: str, payload) -> None:
        if tag == ROW:
            self.store.add(payload)
            if self.on_cells_done is not None:
                self.on_cells_done(1)
        elif tag == FITTED_ROW:  # stored; not a planned cell, so the progress does not move
            self.store.add(payload)
        elif tag == OP_CLASSES:
            self.store.add_op_classes(CellKey.from_columns(payload["key"]), payload["rows"])
        elif tag == RECORD:
            self.store.add_model_record(payload["model"], payload["record"])
        elif tag == FAILURE:
            self.failures += payload
