"""``advise``'s tables: per batch size the ranked changes, the batch ladder, and the commands for the best."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from utilscope.units import significant


def _number(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _significant(value) -> str:
    return "" if value is None else significant(value)


def spread(trial) -> str:
    """A trial's throughput range over its repeats, e.g. "690-712 (3 runs)"; "" where it has no median."""
    if trial.samples_per_s_min is None or trial.samples_per_s_max is None:
        return ""
    runs = f"{trial.repeats} run" + "s" * (trial.repeats != 1)
    return f"{significant(trial.samples_per_s_min)}-{significant(trial.samples_per_s_max)} ({runs})"


def trial_line(trial) -> str:
    """One measured trial, as it lands (progress): its median throughput to three significant digits (a CPU's
    0.703 samples/s is not "1"), its range over the repeats, and its median latency."""
    speed = trial.status
    if trial.samples_per_s:
        latency = f", {significant(trial.latency_ms)} ms" if trial.latency_ms else ""
        runs = (
            f" (median of {trial.repeats}: {significant(trial.samples_per_s_min)}-"
            f"{significant(trial.samples_per_s_max)})"
            if spread(trial)
            else ""
        )
        speed = f"{significant(trial.samples_per_s)} samples/s{runs}{latency}"
    where = "batch ladder, batch" if trial.kind == "batch" else "batch"
    return f"{where} {trial.batch}: {trial.change} ({trial.backend}, {trial.precision}): {speed}"


def _exact(trial) -> str:
    return {True: "yes", False: "no", None: "model unchanged"}[trial.exact]


def ranked_table(advice, batch: int) -> Table:
    trials = [t for t in advice.trials if t.batch == batch]
    trials.sort(key=lambda t: -(t.speedup or 0))
    table = Table(
        title=f"{advice.model} on {advice.device}, batch {batch}: changes ranked by median measured "
        "throughput (utilization on the original model's FLOPs)"
    )
    columns = ("change", "exact?", "samples/s", "range", "speed-up", "FLOP utilization", "max output diff", "status")
    for column in columns:
        table.add_column(column, justify="left" if column in ("change", "exact?", "status") else "right")
    for t in trials:
        speedup = _number(t.speedup, ".2f") + "x" * bool(t.speedup)
        table.add_row(
            t.change,
            _exact(t),
            _significant(t.samples_per_s),
            spread(t),
            speedup,
            _number(t.utilization, ".2%"),
            _number(t.max_rel_diff, ".1e"),
            t.status,
        )
    return table


def render_advice(advice, console: Console) -> None:
    for batch in sorted({t.batch for t in advice.trials}):
        console.print(ranked_table(advice, batch))
        for t in advice.trials:
            if t.batch == batch and t.detail:
                console.print(f"  {t.change}: {t.detail}")
    if advice.batch_ladder:
        ladder = Table(title="batch ladder, as given (medians)")
        for column in ("batch", "samples/s", "range", "latency ms", "FLOP utilization", "status"):
            ladder.add_column(column, justify="right")
        for t in advice.batch_ladder:
            ladder.add_row(
                str(t.batch),
                _significant(t.samples_per_s),
                spread(t),
                _significant(t.latency_ms),
                _number(t.utilization, ".2%"),
                t.status,
            )
        console.print(ladder)
        saturation = advice.saturation_batch or "none (no batch size of the ladder ran)"  # never "None"
        console.print(f"saturation batch (the smallest within 5% of the best throughput): {saturation}")
    for note in advice.notes:
        console.print(note)
    if not advice.gpu_measurement:
        console.print("not a GPU measurement: these gains are the CPU's; padding's GPU gain is not measured here")
    for batch, command in advice.commands.items():
        console.print(f"best at batch {batch}: {advice.best[batch].change} -> {command}")
