"""Progress of a long step, in a terminal as rich's bar, and where the output is not a terminal (a log, a pipe) as
plain lines on stderr: the first update, then one at most every ``PLAIN_EVERY_S`` seconds, and the last."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

PLAIN_EVERY_S = 10.0
COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


@contextlib.contextmanager
def progress(console: Console, label: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A function ``update(done, total)`` for the step ``label`` counting ``unit``s (rich's bar on a terminal,
    plain lines on stderr elsewhere)."""
    if console.is_terminal:
        with Progress(*COLUMNS, console=console) as bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    start_s, said_s = time.monotonic(), None

    def plain(done: int, total: int) -> None:
        nonlocal said_s
        now_s = time.monotonic()
        if said_s is None or done >= total or now_s - said_s >= PLAIN_EVERY_S:
            print(f"utilscope: {label}: {done}/{total} {unit} ({now_s - start_s:.0f} s)", file=sys.stderr, flush=True)
            said_s = now_s

    yield plain
