"""Rich tables for ``utilscope profile``, ``utilscope devices`` and ``utilscope ceilings``."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from utilscope.measure.sweep import ProfileResult
from utilscope.units import percent, si


def _opt(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _opt_percent(fraction: float | None) -> str:
    return "-" if fraction is None else percent(fraction)


def profile_table(result: ProfileResult) -> Table:
    title = (
        f"{result.model} · {result.resolution}px · {result.device} · {result.backend} · {result.precision} · "
        f"{'channels_last' if result.channels_last else 'contiguous'} · {si(result.flops_per_sample)}FLOP/sample"
    )
    table = Table(title=title, header_style="bold")
    for column in ("batch", "status"):
        table.add_column(column)
    for column in (
        "latency ms",
        "samples/s",
        "TFLOP/s",
        "util",
        "util vs ceiling",
        "GB/s",
        "BW util",
        "nvml util",
        "CV",
    ):
        table.add_column(column, justify="right")
    for row in result.rows:
        cv = _opt(row.cv, ".1%") + (" [red]![/]" if row.unstable else "")
        table.add_row(
            str(row.batch),
            row.status if row.status == "ok" else f"[red]{row.status}[/]",
            _opt(row.latency_ms, ".3f"),
            _opt(row.samples_per_s, ",.0f"),
            _opt(row.achieved_tflops, ".2f"),
            _opt_percent(row.utilization),
            _opt_percent(row.utilization_vs_ceiling),
            _opt(row.achieved_gbs, ",.0f"),
            _opt_percent(row.bandwidth_utilization),
            "-" if row.nvml_util is None else f"{row.nvml_util:.0f}%",
            cv,
        )
    return table


def profile_footer(result: ProfileResult) -> str:
    peaks = {(r.peak_source, r.peak_tflops) for r in result.rows if r.status == "ok"}
    lines = [f"peak: {source} = {peak:.1f} TFLOP/s" for source, peak in sorted(peaks, key=str) if peak]
    notes = sorted({note for r in result.rows for note in r.notes})
    lines += [f"note: {note}" for note in notes]
    if any(r.unstable for r in result.rows):
        lines.append("[red]![/] coefficient of variation above 3%: the row is not repeatable at this precision")
    env = result.environment
    lines.append(
        f"torch {env['torch']} · CUDA {env['cuda']} · cuDNN {env['cudnn']} · driver {env['driver']} · "
        "util = achieved FLOP/s ÷ peak; nvml util = NVIDIA's time-based utilization"
    )
    return "\n".join(lines)


def frame_table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title, header_style="bold")
    for column in frame.columns:
        table.add_column(str(column), justify="left" if frame[column].dtype == object else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*("-" if pd.isna(v) else str(v) for v in row))
    return table
