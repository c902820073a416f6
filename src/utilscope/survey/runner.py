"""Survey: measure a grid of models x batch sizes x precisions x backends into a resumable store.

The grid is expanded, cells already in the store are skipped (resume), and (model, precision, backend) groups run
in worker subprocesses (``python -m utilscope.survey.worker``), one or several groups per worker, with a timeout
per group: a crash, a hang or an OOM costs that group's remaining cells — recorded as ``error: ...`` rows — never
the survey; a new worker takes over the groups after it. The worker writes each row as soon as it is measured, so
an interrupted survey loses at most the cell in flight.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import torch

from utilscope import hardware
from utilscope.counting.counter import check_batch
from utilscope.errors import UsageError
from utilscope.measure.backends import get_backend
from utilscope.measure.environment import environment
from utilscope.measure.precision import check_precision, parse_precision
from utilscope.measure.profile import check_depthwise_heuristic
from utilscope.models import sets as model_sets
from utilscope.models import zoo
from utilscope.survey.store import Store

DEFAULT_BATCHES = (1, 8, 32, 128, 256)
DEFAULT_TIMEOUT_S = 900.0
PARENT_ENV = "UTILSCOPE_SURVEY_PARENT"  # the runner's pid: a worker exits when its runner dies
GROUP_DONE = "utilscope-group-done"  # a worker prints this line after each group
CELL_DONE = "utilscope-cell-done"  # ... and this one after each cell it stores


@dataclass(frozen=True)
class Group:
    """The cells one worker measures: one model, precision and backend, several batch sizes."""

    model: str
    resolution: int
    precision: str
    backend: str
    batches: tuple[int, ...]


@dataclass
class SurveyPlan:
    device: str  # the store's device column: the device's name
    software: str  # the store's software column
    groups: list[Group]
    skipped: int  # cells already in the store

    @property
    def cells(self) -> int:
        return sum(len(g.batches) for g in self.groups)


@dataclass
class SurveyResult:
    cells: int
    failed_cells: int
    wall_s: float
    failures: list[str] = field(default_factory=list)


def software_string(env: dict) -> str:
    """The store's software column; cuDNN without autotuning, autotuning with a limit on the algorithms it tries, or
    autotuning all but the depthwise convolutions, is a configuration of its own (a different key)."""
    text = f"torch {env['torch']} · cuDNN {env['cudnn']} · driver {env['driver']}"
    if not env.get("cudnn_benchmark", True):
        return f"{text} · cudnn.benchmark off"
    limit = env.get("cudnn_benchmark_limit")
    text = text if limit is None else f"{text} · cudnn.benchmark_limit {limit}"
    return f"{text} · depthwise heuristic" if env.get("cudnn_depthwise_heuristic") else text


def select_models(patterns: list[str], families: list[str]) -> list[str]:
    """Model ids from names/globs and family names; neither given: the curated default survey."""
    if not patterns and not families:
        return model_sets.default_survey()
    ids = [spec.id for spec in zoo.expand_models(patterns)] if patterns else []
    candidates = zoo.list_models("torchvision:*") + zoo.list_models("timm:*")
    for family in families:
        ids += model_sets.models_of_family(family, candidates)
    return list(dict.fromkeys(ids))


def plan_survey(models, batches, precisions, backends, device, store: Store, resolution=None, retry_errors=True,
                cudnn_benchmark=True, cudnn_benchmark_limit=None, cudnn_depthwise_heuristic=False):  # fmt: skip
    """Expand the grid and drop the cells the store already holds. Raises on bad input before anything runs."""
    dev = hardware.resolve_device(device)
    for precision in precisions:
        check_precision(parse_precision(precision), dev)
    for backend in backends:
        check_depthwise_heuristic(cudnn_depthwise_heuristic, cudnn_benchmark, get_backend(backend).name)
    batches = tuple(check_batch(b) for b in batches)
    if not batches or not models:
        raise UsageError("the survey grid is empty: give at least one model and one batch size")
    env = environment(dev, precisions[0], backends[0], True, cudnn_benchmark, cudnn_benchmark_limit,
                      cudnn_depthwise_heuristic)  # fmt: skip
    device_name, software = env["device_name"], software_string(env)
    done = store.done_keys(retry_errors=retry_errors)
    groups, skipped = [], 0
    for model in models:
        spec = zoo.parse_spec(model)
        res = zoo.resolve_resolution(spec, resolution)
        for precision in precisions:
            for backend in backends:
                todo = tuple(
                    b for b in batches if (spec.id, res, b, precision, backend, device_name, software) not in done
                )
                skipped += len(batches) - len(todo)
                if todo:
                    groups.append(Group(spec.id, res, precision, backend, todo))
    return SurveyPlan(device_name, software, groups, skipped)


def chunk_groups(groups: list[Group], per_worker: int) -> list[list[Group]]:
    """Consecutive groups, ``per_worker`` to a worker process (more per worker: less start-up, less isolation)."""
    if per_worker < 1:
        raise UsageError(f"groups per worker must be at least 1, got {per_worker}")
    return [groups[i : i + per_worker] for i in range(0, len(groups), per_worker)]


@dataclass(frozen=True)
class WorkerOptions:
    db: str
    device: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S  # per group: a worker silent for longer is killed
    attribute_models: frozenset[str] = frozenset()
    min_time_ms: float | None = None  # the timed samples' total; None: the profile default
    cudnn_benchmark: bool = True
    cudnn_benchmark_limit: int | None = None  # algorithms autotuning tries per new shape; None: torch's default
    cudnn_depthwise_heuristic: bool = False  # depthwise convs take cuDNN's heuristic algorithm, others autotune


def _worker_command(groups: list[Group], options: WorkerOptions, device: str | None) -> list[str]:
    specs = [{**asdict(g), "attribute": g.model in options.attribute_models} for g in groups]
    command = [sys.executable, "-m", "utilscope.survey.worker", "--db", options.db, "--groups", json.dumps(specs)]
    if device:
        command += ["--device", device]
    if options.min_time_ms is not None:
        command += ["--min-time-ms", str(options.min_time_ms)]
    if not options.cudnn_benchmark:
        command.append("--no-cudnn-benchmark")
    if options.cudnn_benchmark_limit is not None:
        command += ["--cudnn-benchmark-limit", str(options.cudnn_benchmark_limit)]
    if options.cudnn_depthwise_heuristic:
        command.append("--cudnn-depthwise-heuristic")
    return command


def _failure_rows(group: Group, plan: SurveyPlan, status: str, wall_s: float) -> list[dict]:
    """Error rows for a group's cells that its worker did not store."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return [
        {
            "model": group.model,
            "resolution": group.resolution,
            "batch": batch,
            "precision": group.precision,
            "backend": group.backend,
            "device": plan.device,
            "software": plan.software,
            "family": model_sets.family_of(group.model),
            "status": status,
            "measured_at": now,
            "wall_s": wall_s / len(group.batches),
            "notes": [],
            "environment": {},
        }  # fmt: skip
        for batch in group.batches
    ]


def _watch_worker(command: list[str], env: dict, timeout_s: float, reporter: _Reporter) -> str | None:
    """Run a worker, passing its "cell done" and "group done" lines to ``reporter``; kill it when one group takes
    over ``timeout_s``. Returns None when it exited cleanly, else the failure status for the group it was on."""
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env) as worker,
    ):
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


def _cell_key(group: Group, batch: int, plan: SurveyPlan) -> tuple:
    return (group.model, group.resolution, batch, group.precision, group.backend, plan.device, plan.software)


def _missing(groups: list[Group], plan: SurveyPlan, db: str) -> list[Group]:
    """The groups reduced to their cells the store does not hold (groups with none left dropped)."""
    with Store(db) as store:
        present = store.done_keys(retry_errors=False)
    left = []
    for g in groups:
        todo = tuple(b for b in g.batches if _cell_key(g, b, plan) not in present)
        if todo:
            left.append(Group(g.model, g.resolution, g.precision, g.backend, todo))
    return left


class _Reporter:
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


def _group_id(group: Group) -> tuple:
    return group.model, group.resolution, group.precision, group.backend


def run_chunk(groups: list[Group], plan: SurveyPlan, options: WorkerOptions, gpu: int | None,
              on_cells_done: Callable[[int], None] | None = None) -> list[str]:  # fmt: skip
    """Measure groups in one worker process; when it dies or hangs, store error rows for the group it was on and
    start a new worker for the groups after it (each round settles at least one group). ``on_cells_done(n)`` as
    cells are stored, measured or failed. Returns failure messages."""
    env = {**os.environ, PARENT_ENV: str(os.getpid())}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    device = options.device if gpu is None else "cuda:0"
    failures: list[str] = []
    remaining = list(groups)
    while remaining:
        start_s, reporter = time.perf_counter(), _Reporter(list(remaining), on_cells_done)
        status = _watch_worker(_worker_command(reporter.groups, options, device), env, options.timeout_s, reporter)
        remaining = _missing(reporter.groups, plan, options.db)
        if not remaining:
            break
        in_flight = reporter.in_flight()
        if status is not None and in_flight is not None and _group_id(remaining[0]) != _group_id(in_flight):
            continue  # it died after storing its group's cells: nothing failed, the rest goes to a new worker
        failed = remaining.pop(0)  # the group it was on (or, after a clean exit that left cells, the first left)
        reason = status or "error: the worker exited without storing this cell"
        with Store(options.db) as store:
            for row in _failure_rows(failed, plan, reason, time.perf_counter() - start_s):
                store.add(row)
        failures += [f"{failed.model} {failed.precision} {failed.backend} batch {b}: {reason}" for b in failed.batches]
        if on_cells_done is not None:
            on_cells_done(len(failed.batches))
    return failures


def run_survey(
    plan: SurveyPlan,
    options: WorkerOptions,
    jobs: int = 1,
    per_worker: int = 1,
    on_cells_done: Callable[[int], None] | None = None,
) -> SurveyResult:
    """Run the plan's groups, ``per_worker`` groups per worker process, ``jobs`` workers at a time; on CUDA with
    several GPUs each running worker holds its own GPU."""
    dev = hardware.resolve_device(options.device)
    gpus = torch.cuda.device_count() if dev.type == "cuda" else 0
    if gpus and jobs > gpus:
        raise UsageError(f"--jobs {jobs} with {gpus} GPU(s): workers sharing a GPU would disturb each other's timings")
    chunks = chunk_groups(plan.groups, per_worker)
    start_s = time.perf_counter()
    if dev.type == "cuda":
        hardware.get_ceilings(dev)  # measured once here and cached, not by every worker at once
    free_gpus: queue.Queue[int | None] = queue.Queue()
    for index in range(max(1, jobs)):
        free_gpus.put(index if gpus > 1 else None)

    def task(chunk: list[Group]) -> list[str]:
        gpu = free_gpus.get()
        try:
            return run_chunk(chunk, plan, options, gpu, on_cells_done)
        finally:
            free_gpus.put(gpu)

    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for messages in pool.map(task, chunks):
            failures += messages
    return SurveyResult(plan.cells, len(failures), time.perf_counter() - start_s, failures)


def describe_plan(plan: SurveyPlan) -> str:
    return json.dumps(
        {
            "device": plan.device,
            "software": plan.software,
            "cells": plan.cells,
            "skipped": plan.skipped,
            "groups": len(plan.groups),
        }  # fmt: skip
    )
