"""Terminal views of a survey: the plan a dry run lists, and the summary of what a run stored."""

from __future__ import annotations

from rich.table import Table

from utilscope.units import plural


def plan_table(plan) -> Table:
    """One row per group of cells: the model, precision, backend and the batch sizes still to measure."""
    title = f"{plural(plan.cells, 'cell')} to measure in {plural(len(plan.groups), 'group')}"
    table = Table(title=f"{title} ({plan.skipped} already stored)")
    for name in ("model", "resolution", "precision", "backend", "batch sizes"):
        table.add_column(name, justify="right" if name == "resolution" else "left")
    for group in plan.groups:
        batches = ",".join(map(str, group.batches))
        table.add_row(group.model, str(group.resolution), group.precision, group.backend, batches)
    return table


def outcome_table(result) -> Table:
    """Per model (its resolution where the run has several, precision, backend): how many cells are ok, oom and
    error."""
    frame = result.outcome.assign(kind=result.outcome["status"].str.split(":").str[0])
    keys = ["model", "precision", "backend"]
    if "resolution" in frame and frame["resolution"].nunique() > 1:
        keys.insert(1, "resolution")
    counts = frame.groupby([*keys, "kind"]).size().unstack(fill_value=0)
    summary = f"{result.count('ok')} ok, {result.count('oom')} oom, {plural(result.count('error'), 'error')}"
    table = Table(title=f"{len(frame)} of {plural(result.cells, 'cell')} stored: {summary}")
    for name in (*keys, "ok", "oom", "error"):
        table.add_column(name, justify="right" if name in ("resolution", "ok", "oom", "error") else "left")
    for key, row in counts.iterrows():
        cells = [str(int(row.get(kind, 0))) for kind in ("ok", "oom", "error")]
        style = "red" if row.get("error", 0) else None
        table.add_row(*(str(part) for part in key), *cells, style=style)
    return table


def worst_errors(result, most: int = 5) -> list[str]:
    """The most frequent error messages of the run, with how many cells each hit."""
    errors = result.outcome[result.outcome["status"].str.startswith("error")]
    counts = errors["status"].value_counts().head(most)
    return [f"{count} × {status[:300]}" for status, count in counts.items()]


def missing_lines(missing, most: int = 10) -> list[str]:
    """The first ``most`` cells of a run that have no row, one a line, and how many more."""
    lines = [
        f"no row: {key.model} {key.resolution}px {key.precision} {key.backend} batch {key.batch}"
        for key in missing[:most]
    ]
    return lines + ([f"... and {len(missing) - most} more cells without a row"] if len(missing) > most else [])
