"""The survey workflow as one library call: plan a grid against its store (one plan per GPU type on Ray), claim the
cells no other run holds, measure them, and return what was planned and what was stored. ``survey`` and ``nas
measure`` call it; what to show along the way comes through ``SurveyEvents`` (the CLI prints, a notebook may
ignore it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from utilscope.errors import UsageError
from utilscope.survey.claims import Lease, claim
from utilscope.survey.executors import executor_for, run_plans
from utilscope.survey.migrations import Migration
from utilscope.survey.plan import SurveyGrid, SurveyPlan, expand_grid, plan_survey
from utilscope.survey.ray_cluster import check_executor
from utilscope.survey.runner import RunOptions, SurveyResult
from utilscope.survey.store import Store


@dataclass(frozen=True)
class SurveyRequest:
    """One survey run, whole: what to measure (``grid``), how (``options``, its store included), where (the
    executor's name, Ray's address and GPU types, checked when made, Ray not imported), and
    whether only to plan (``dry_run``: the store is read from a copy and never written)."""

    grid: SurveyGrid
    options: RunOptions
    executor: str = "local"
    ray_address: str | None = None
    gpu_types: str | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.grid, SurveyGrid) or not isinstance(self.options, RunOptions):
            raise UsageError(
                f"a survey request takes a SurveyGrid and RunOptions, got {type(self.grid).__name__} and "
                f"{type(self.options).__name__}"
            )
        check_executor(self.executor, self.ray_address, self.gpu_types, self.grid.device)


class SurveyEvents:
    """What a survey reports while it runs; each method does nothing here: override the ones to show."""

    def joined(self, cluster: str) -> None:
        """The Ray cluster the run joined."""

    def migrated(self, path: str, migration: Migration) -> None:
        """The store was migrated to the current schema (in memory only for a dry run)."""

    def planned(self, plan: SurveyPlan) -> None:
        """A plan (one per target), before anything is claimed."""

    def claimed(self, lease: Lease) -> None:
        """The part of a plan this run holds, with what other runs hold or stored meanwhile."""

    def started(self, cells: int) -> None:
        """Measuring begins: ``cells`` claimed in all."""

    def advanced(self, cells: int) -> None:
        """``cells`` more have their rows."""

    def finished(self) -> None:
        """Measuring ended (also when it raised)."""


@dataclass(frozen=True)
class SurveyOutcome:
    """The plans (one per target; empty ones included) and the run's result (None: a dry run, or nothing to do)."""

    plans: tuple[SurveyPlan, ...]
    result: SurveyResult | None

    def to_frame(self) -> pd.DataFrame:
        """The cells this run measured, as stored: model, precision, backend, batch, status (empty: none)."""
        if self.result is None:
            return pd.DataFrame(columns=["model", "precision", "backend", "batch", "status"])
        return self.result.outcome.reset_index(drop=True)

    def to_dict(self) -> dict:
        result = self.result
        return {
            "planned_cells": sum(plan.cells for plan in self.plans),
            "skipped_cells": sum(plan.skipped for plan in self.plans),
            "cells": 0 if result is None else result.cells,
            "wall_s": 0.0 if result is None else result.wall_s,
            "outcome": self.to_frame().to_dict(orient="records"),
            "failures": [] if result is None else list(result.failures),
            "missing": [] if result is None else [asdict(key) for key in result.missing],
        }


def plan_request(request: SurveyRequest, events: SurveyEvents, executor) -> list[SurveyPlan]:
    """A plan per target of the executor, each against the store's rows; the store is opened only after every
    option was checked."""
    targets = executor.targets(request.grid)
    if getattr(executor, "joined", None):
        events.joined(executor.joined)
    expanded = [(target, expand_grid(request.grid, target)) for target in targets]
    with Store(request.options.db, snapshot=request.dry_run) as store:
        if store.migration is not None:
            events.migrated(str(store.path), store.migration)
        return [plan_survey(request.grid, store, groups, target) for target, groups in expanded]


def survey_grid(request: SurveyRequest, events: SurveyEvents | None = None) -> SurveyOutcome:
    """Plan, claim and measure ``request``; a dry run stops after planning. Raises ``UsageError`` for a bad
    executor choice before the store is touched."""
    events = events or SurveyEvents()
    grid = request.grid
    executor = executor_for(request.executor, request.ray_address, request.gpu_types, grid.device)
    plans = plan_request(request, events, executor)
    for plan in plans:
        events.planned(plan)
    todo = [plan for plan in plans if plan.groups]
    if request.dry_run or not todo:
        return SurveyOutcome(tuple(plans), None)
    leases = [claim(plan, request.options.db) for plan in todo]
    for lease in leases:
        events.claimed(lease)
    events.started(sum(lease.plan.cells for lease in leases))
    try:
        result = run_plans([lease.plan for lease in leases], request.options, events.advanced, leases, executor)
    finally:
        events.finished()
    return SurveyOutcome(tuple(plans), result)
