"""Survey: measure a grid of models x batch sizes x precisions x backends into a resumable store.

The grid is expanded, cells already in the store are skipped (resume), and each (model, precision, backend) group
runs in its own subprocess (``python -m utilscope.survey_worker``) with a timeout: a crash, a hang or an OOM
costs that group's remaining cells — recorded as ``error: ...`` rows — never the survey. The worker writes each
row as soon as it is measured, so an interrupted survey loses at most the cell in flight.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

import torch

from utilscope import hardware, model_sets, zoo
from utilscope.counting.counter import check_batch
from utilscope.errors import UsageError
from utilscope.measure.backends import get_backend
from utilscope.measure.environment import environment
from utilscope.measure.precision import check_precision, parse_precision
from utilscope.store import Store

DEFAULT_BATCHES = (1, 8, 32, 128, 256)
DEFAULT_TIMEOUT_S = 900.0
PARENT_ENV = "UTILSCOPE_SURVEY_PARENT"  # the runner's pid: a worker exits when its runner dies


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
    return f"torch {env['torch']} · cuDNN {env['cudnn']} · driver {env['driver']}"


def select_models(patterns: list[str], families: list[str]) -> list[str]:
    """Model ids from names/globs and family names; neither given: the curated default survey."""
    if not patterns and not families:
        return model_sets.default_survey()
    ids = [spec.id for spec in zoo.expand_models(patterns)] if patterns else []
    candidates = zoo.list_models("torchvision:*") + zoo.list_models("timm:*")
    for family in families:
        ids += model_sets.models_of_family(family, candidates)
    return list(dict.fromkeys(ids))


def plan_survey(models, batches, precisions, backends, device, store: Store, resolution=None, retry_errors=True):
    """Expand the grid and drop the cells the store already holds. Raises on bad input before anything runs."""
    dev = hardware.resolve_device(device)
    for precision in precisions:
        check_precision(parse_precision(precision), dev)
    for backend in backends:
        get_backend(backend)
    batches = tuple(check_batch(b) for b in batches)
    if not batches or not models:
        raise UsageError("the survey grid is empty: give at least one model and one batch size")
    env = environment(dev, precisions[0], backends[0], True)
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


def _worker_command(group: Group, db: str, device: str | None, attribute: bool) -> list[str]:
    command = [sys.executable, "-m", "utilscope.survey_worker", "--db", db, "--model", group.model,
               "--res", str(group.resolution), "--precision", group.precision, "--backend", group.backend,
               "--batch", ",".join(map(str, group.batches))]  # fmt: skip
    if device:
        command += ["--device", device]
    if attribute:
        command.append("--attribute")
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


def run_group(group: Group, plan: SurveyPlan, db: str, device, timeout_s: float, attribute: bool, gpu: int | None):
    """Run one worker; store an error row for every cell it left unmeasured. Returns failure messages."""
    env = {**os.environ, PARENT_ENV: str(os.getpid())}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    start_s = time.perf_counter()
    command = _worker_command(group, db, device if gpu is None else "cuda:0", attribute)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
        if done.returncode == 0:
            status = None
        else:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            status = f"error: worker exited with code {done.returncode}: {last[:300]}"
    except subprocess.TimeoutExpired:
        status = f"error: timeout after {timeout_s:.0f} s"
    with Store(db) as store:
        present = store.done_keys(retry_errors=False)
        key = (group.model, group.resolution)
        missing = [b for b in group.batches
                   if (*key, b, group.precision, group.backend, plan.device, plan.software) not in present]  # fmt: skip
        if not missing:
            return []
        missing_group = Group(group.model, group.resolution, group.precision, group.backend, tuple(missing))
        reason = status or "error: the worker exited without storing this cell"
        for row in _failure_rows(missing_group, plan, reason, time.perf_counter() - start_s):
            store.add(row)
    return [f"{group.model} {group.precision} {group.backend} batch {b}: {reason}" for b in missing]


def run_survey(
    plan: SurveyPlan,
    db: str,
    device: str | None = None,
    jobs: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    attribute_models: frozenset[str] = frozenset(),
    on_group_done: Callable[[Group], None] | None = None,
) -> SurveyResult:
    """Run the plan's groups, ``jobs`` at a time; on CUDA with several GPUs, worker i uses GPU i mod count."""
    dev = hardware.resolve_device(device)
    gpus = torch.cuda.device_count() if dev.type == "cuda" else 0
    if gpus and jobs > gpus:
        raise UsageError(f"--jobs {jobs} with {gpus} GPU(s): workers sharing a GPU would disturb each other's timings")
    start_s = time.perf_counter()
    if dev.type == "cuda":
        hardware.get_ceilings(dev)  # measured once here and cached, not by every worker at once
    failures: list[str] = []

    def task(index_group: tuple[int, Group]) -> list[str]:
        index, group = index_group
        gpu = index % gpus if gpus > 1 else None
        result = run_group(group, plan, db, device, timeout_s, group.model in attribute_models, gpu)
        if on_group_done is not None:
            on_group_done(group)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for messages in pool.map(task, enumerate(plan.groups)):
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
