"""A survey's progress on the terminal (``survey``, ``nas measure``): the plan per target, other runs' claims, a
progress bar. Its own module: ``ConsoleEvents`` is a ``survey.workflow.SurveyEvents``, which a command imports when
it runs, never while its options are parsed."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from utilscope.present.survey_view import plan_table
from utilscope.survey.workflow import SurveyEvents, SurveyRequest
from utilscope.units import plural


class ConsoleEvents(SurveyEvents):
    """A survey's progress on the terminal: the plan per target, other runs' claims, a progress bar."""

    COLUMNS = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} cells"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )

    def __init__(self, console: Console, request: SurveyRequest):
        self.console, self.db, self.dry_run = console, request.options.db, request.dry_run
        self.progress, self.task = None, None

    def joined(self, cluster: str) -> None:
        self.console.print(f"ray: {cluster}", highlight=False)

    def migrated(self, path: str, migration) -> None:
        print(f"utilscope: {path}: {migration.describe()}", file=sys.stderr)

    def planned(self, plan) -> None:
        where = "" if plan.target is None or plan.target.label == "local" else f" on {plan.target.label}"
        shard = "" if plan.grid.shard.whole else f"shard {plan.grid.shard} of the grid: "
        self.console.print(
            f"survey{where}: {shard}{plural(plan.cells, 'cell')} to measure in "
            f"{plural(len(plan.groups), 'group')}, "
            f"{plan.skipped} already in {self.db}; {plan.config.device_label}; "
            f"{plan.config.software}",
            soft_wrap=True,  # one line whatever the terminal's width: logs are searched for it
        )
        if self.dry_run and plan.groups:
            self.console.print(plan_table(plan))

    def claimed(self, lease) -> None:
        report_lease(lease, self.console)

    def started(self, cells: int) -> None:
        self.progress = Progress(*self.COLUMNS, console=self.console)
        self.progress.start()
        self.task = self.progress.add_task("measuring", total=cells)

    def advanced(self, cells: int) -> None:
        self.progress.advance(self.task, cells)

    def finished(self) -> None:
        self.progress.stop()


def report_lease(lease, console: Console) -> None:
    if lease.taken:
        console.print(
            f"{plural(lease.taken, 'cell')} {'is' if lease.taken == 1 else 'are'} being measured by another run on "
            "this store: skipped (run again "
            "after it to measure any it leaves)"
        )
    if lease.stored_meanwhile:
        stored = plural(lease.stored_meanwhile, "cell")
        was = "was" if lease.stored_meanwhile == 1 else "were"
        console.print(f"{stored} {was} stored by another run since this one planned: skipped")
    for neighbour in lease.neighbours:  # a warning: on stderr, as every warning is
        print(
            f"utilscope: warning: another survey ({neighbour}) is measuring on this device: the two runs disturb "
            "each other's timings",
            file=sys.stderr,
        )
