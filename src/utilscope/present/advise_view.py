"""``advise``'s tables: per batch size the ranked changes, the batch ladder, and the commands for the best."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _number(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def trial_line(trial) -> str:
    """One measured trial, as it lands (progress)."""
    speed = f"{trial.samples_per_s:,.0f} samples/s" if trial.samples_per_s else trial.status
    return f"batch {trial.batch}: {trial.change} ({trial.backend}, {trial.precision}): {speed}"


def _exact(trial) -> str:
    return {True: "yes", False: "no", None: "model unchanged"}[trial.exact]


def ranked_table(advice, batch: int) -> Table:
    trials = [t for t in advice.trials if t.batch == batch]
    trials.sort(key=lambda t: -(t.speedup or 0))
    table = Table(title=f"{advice.model} on {advice.device}, batch {batch}: changes ranked by measured throughput "
                  "(utilization on the original model's FLOPs)")  # fmt: skip
    for column in ("change", "exact?", "samples/s", "speed-up", "FLOP utilization", "max output diff", "status"):
        table.add_column(column, justify="left" if column in ("change", "exact?", "status") else "right")
    for t in trials:
        table.add_row(t.change, _exact(t), _number(t.samples_per_s, ",.0f"), _number(t.speedup, ".2f") + "x" * bool(
            t.speedup), _number(t.utilization, ".2%"), _number(t.max_rel_diff, ".1e"), t.status)  # fmt: skip
    return table


def render_advice(advice, console: Console) -> None:
    for batch in sorted({t.batch for t in advice.trials}):
        console.print(ranked_table(advice, batch))
        for t in advice.trials:
            if t.batch == batch and t.detail:
                console.print(f"  {t.change}: {t.detail}")
    if advice.batch_ladder:
        ladder = Table(title="batch ladder, as given")
        for column in ("batch", "samples/s", "latency ms", "FLOP utilization", "status"):
            ladder.add_column(column, justify="right")
        for t in advice.batch_ladder:
            ladder.add_row(str(t.batch), _number(t.samples_per_s, ",.0f"), _number(t.latency_ms, ".3f"),
                           _number(t.utilization, ".2%"), t.status)  # fmt: skip
        console.print(ladder)
        console.print(f"saturation batch (the smallest within 5% of the best throughput): {advice.saturation_batch}")
    for note in advice.notes:
        console.print(note)
    if not advice.gpu_measurement:
        console.print("not a GPU measurement: these gains are the CPU's; padding's GPU gain is not measured here")
    for batch, command in advice.commands.items():
        console.print(f"best at batch {batch}: {advice.best[batch].change} -> {command}")
