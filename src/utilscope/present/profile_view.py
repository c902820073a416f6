"""Rich tables for ``utilscope profile``, ``utilscope devices`` and ``utilscope ceilings``."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from utilscope.hardware import Ceilings
from utilscope.measure.sweep import ProfileResult, ProfileRow
from utilscope.present import input_phrases
from utilscope.units import percent, si, significant

TITLE_SEPARATOR = " · "


def _opt(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _opt_percent(fraction: float | None) -> str:
    return "-" if fraction is None else percent(fraction)


def _cv(row: ProfileRow) -> str:
    return _opt(row.cv, ".1%") + (" [red]![/]" if row.unstable else "")


def _same(a: float | None, b: float | None) -> bool:
    return a is None or b is None or math.isclose(a, b, rel_tol=1e-9)


def _nvml(row: ProfileRow) -> str:
    return "-" if row.nvml_util is None else f"{row.nvml_util:.0f}%"


def _always(result: ProfileResult) -> bool:
    return True


def _ceiling_differs(result: ProfileResult) -> bool:
    return not all(_same(r.utilization, r.utilization_vs_ceiling) for r in result.rows)


def _any(field: str) -> Callable[[ProfileResult], bool]:
    return lambda result: any(getattr(row, field) is not None for row in result.rows)


# (header, cell of a row, shown for this result?): a column that would say nothing here is left out, e.g. on a CPU
# "util vs ceiling" (the ceiling is the peak), "BW util" (no datasheet bandwidth) and "nvml util" (no NVML)
COLUMNS: list[tuple[str, Callable[[ProfileRow], str], Callable[[ProfileResult], bool]]] = [
    ("latency ms", lambda r: _opt(r.latency_ms, ".3f"), _always),
    ("samples/s", lambda r: significant(r.samples_per_s), _always),
    ("TFLOP/s", lambda r: significant(r.achieved_tflops), _always),
    ("util", lambda r: _opt_percent(r.utilization), _always),
    ("util vs ceiling", lambda r: _opt_percent(r.utilization_vs_ceiling), _ceiling_differs),
    ("GB/s", lambda r: significant(r.achieved_gbs), _always),
    ("BW util", lambda r: _opt_percent(r.bandwidth_utilization), _any("bandwidth_utilization")),
    ("nvml util", _nvml, _any("nvml_util")),
    ("CV", _cv, _always),
]


def title_phrases(result: ProfileResult) -> list[str]:
    """What the title says, phrase by phrase (a title wraps between phrases, never inside one)."""
    backend = result.backend_ran
    if backend != result.backend:
        backend = f"{backend} (asked: {result.backend})"
    layout = "channels_last" if result.channels_last else "contiguous"
    return [
        result.model,
        *input_phrases(result.resolution, result.input_channels),
        result.device,
        backend,
        result.precision,
        layout,
        f"{si(result.flops_per_sample)}FLOP/sample",
    ]


def wrap_phrases(phrases: list[str], width: int, separator: str = TITLE_SEPARATOR) -> str:
    """Phrases joined by ``separator`` into lines of at most ``width`` cells, breaking only between phrases."""
    lines: list[str] = []
    for phrase in phrases:
        joined = f"{lines[-1]}{separator}{phrase}" if lines else phrase
        if lines and cell_len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(phrase)
    return "\n".join(lines)


def profile_table(result: ProfileResult, width: int | None = None) -> Table:
    """The sweep's rows; the title is wrapped between phrases to ``width`` cells (None: one line)."""
    phrases = [escape(phrase) for phrase in title_phrases(result)]
    columns = [(header, cell) for header, cell, shown in COLUMNS if shown(result)]
    table = Table(header_style="bold")
    for column in ("batch", "status"):
        table.add_column(column)
    for header, _ in columns:
        table.add_column(header, justify="right")
    for row in result.rows:
        status = row.status if row.status == "ok" else f"[red]{escape(row.status)}[/]"
        table.add_row(str(row.batch), status, *(cell(row) for _, cell in columns))
    table.title = TITLE_SEPARATOR.join(phrases) if width is None else wrap_phrases(phrases, width)
    return table


def render_profile(result: ProfileResult, console: Console) -> None:
    """The table, its title wrapped to the width the table takes on this console (widened to its longest phrase, a
    long model id, where the console has room), then the footer."""
    table = profile_table(result)
    longest = max(cell_len(phrase) for phrase in title_phrases(result))
    width = min(console.width, max(longest, Measurement.get(console, console.options, table).maximum))
    table = profile_table(result, width)
    table.min_width = width
    console.print(table)
    console.print(profile_footer(result))


def _ceiling_line(result: ProfileResult) -> str | None:
    """Where the measured ceiling came from: when, how many repetitions, their spread, how to re-measure it."""
    record = result.ceilings or {}
    spread = (record.get("gemm_spread_tflops") or {}).get(result.precision)
    if not record.get("measured_at"):
        return None
    text = f"measured ceiling: {result.precision} GEMM"
    if spread:
        text += (
            f", best of {spread['reps']} repetitions (median {significant(spread['median'])}, range "
            f"{significant(spread['min'])}-{significant(spread['max'])} TFLOP/s)"
        )
    refresh = f"utilscope ceilings --device {record.get('device_kind', 'cuda')} --refresh"
    return f"{text}, cached {record['measured_at']} (`{refresh}` re-measures it)"


def environment_line(result: ProfileResult) -> str:
    """Software versions (CUDA, cuDNN and driver on a GPU only) and what the utilization columns mean."""
    env = result.environment
    if env.get("device_type") == "cpu":
        return f"torch {env['torch']} · util = achieved FLOP/s ÷ peak (this CPU's measured GEMM ceiling)"
    nvml = "; nvml util = NVIDIA's time-based utilization" if any(r.nvml_util is not None for r in result.rows) else ""
    return (
        f"torch {env['torch']} · CUDA {env['cuda']} · cuDNN {env['cudnn']} · driver {env['driver']} · "
        f"util = achieved FLOP/s ÷ peak{nvml}"
    )


def profile_footer(result: ProfileResult) -> str:
    peaks = {(r.peak_source, r.peak_tflops) for r in result.rows if r.status == "ok"}
    lines = [f"peak: {source} = {significant(peak, 4)} TFLOP/s" for source, peak in sorted(peaks, key=str) if peak]
    ceiling = _ceiling_line(result)
    lines += [ceiling] if ceiling else []
    notes = sorted({note for r in result.rows for note in r.notes})
    lines += [f"note: {escape(note)}" for note in notes]
    if any(r.unstable for r in result.rows):
        lines.append("[red]![/] coefficient of variation above 3%: the row is not repeatable at this precision")
    lines.append(environment_line(result))
    return "\n".join(lines)


def ceilings_text(ceilings: Ceilings) -> str:
    """``utilscope ceilings``: each ceiling with the spread of its repetitions, where recorded."""
    lines = [f"[bold]{escape(ceilings.device_name)}[/] ({ceilings.device_kind}), torch {ceilings.torch_version}"]
    for precision, tflops in ceilings.gemm_tflops.items():
        spread = _spread_text(ceilings.gemm_spread_tflops.get(precision))
        lines.append(f"  GEMM {precision}: {significant(tflops)} TFLOP/s{spread}")
    spread = _spread_text(ceilings.copy_spread_gbs)
    lines.append(f"  copy: {significant(ceilings.copy_gbs)} GB/s (bytes read + written){spread}")
    lines.append(f"  {escape(ceilings.note)}")
    lines.append(f"  measured {ceilings.measured_at}, cached; --refresh measures again")
    return "\n".join(lines)


def _spread_text(spread) -> str:
    if not spread:
        return " (spread not recorded: measured by an older version; --refresh)"
    return (
        f" (best of {spread['reps']}; median {significant(spread['median'])}, range "
        f"{significant(spread['min'])}-{significant(spread['max'])})"
    )


def frame_table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title, header_style="bold")
    for column in frame.columns:
        table.add_column(str(column), justify="left" if frame[column].dtype == object else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*("-" if pd.isna(v) else str(v) for v in row))
    return table
