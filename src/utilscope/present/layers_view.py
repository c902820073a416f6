"""Rich output for ``utilscope layers``: header, slowest points, op classes, attainable utilization, hints."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from utilscope.attribute.diagnose import pct
from utilscope.attribute.explain import Explanation
from utilscope.attribute.hints import Hint
from utilscope.measure.backends import BACKENDS
from utilscope.present import input_phrases
from utilscope.units import percent, si, significant


def idle_text(a) -> str:
    """The idle share as the header states it: what idle means on this device, or why it is not measurable."""
    meaning = "outside ops: Python, dispatch, gaps" if a.device_type == "cpu" else "launch overhead, gaps"
    if a.idle_share is None:
        profiled_ms = a.profiled_ms if a.profiled_ms is not None else a.kernel_time_ms
        unit = "ops" if a.device_type == "cpu" else "kernels"
        return f"idle ({meaning}) not measurable: the profiled {unit} took {profiled_ms:.3f} ms, more than end to end"
    return f"idle ({meaning}) {percent(a.idle_share)} of end-to-end"


def backend_text(a) -> str:
    """The backend as it ran: a CUDA-graph backend on a CPU ran plain launches (``eager (asked: graph)``)."""
    backend = BACKENDS.get(a.backend, None)
    if backend is None or not backend.cuda_graphs or a.device_type == "cuda":
        return a.backend
    return f"{a.backend} without CUDA graphs" if backend.fuses_elementwise else f"eager (asked: {a.backend})"


def header_text(explanation: Explanation) -> str:
    a = explanation.attribution
    measured = a.measured_utilization
    attributed = a.attributed_ms / a.kernel_time_ms if a.kernel_time_ms else 0.0
    peak = (
        f", FLOP utilization {percent(measured)} of {significant(a.peak_tflops, 4)} TFLOP/s"
        if measured is not None
        else ""
    )
    lines = [
        " · ".join(
            [f"[bold]{escape(a.model)}[/]", f"batch {a.batch}", *input_phrases(a.resolution, a.input_channels)]
            + [a.precision, backend_text(a), escape(a.device_name)]
        ),
        f"end-to-end {a.end_to_end_ms:.3f} ms ({significant(a.batch / a.end_to_end_ms * 1e3)} samples/s){peak}",
        f"{'op' if a.device_type == 'cpu' else 'device'} time {a.kernel_time_ms:.3f} ms, {percent(attributed)} "
        f"attributed to {'fused regions' if a.layers and a.layers[0].time_ms is None else 'layers'}; {idle_text(a)}",
    ]
    return "\n".join(lines)


def points_table(explanation: Explanation, top: int) -> Table:
    rows = {row.name: row for row in explanation.roofline}
    frame = explanation.points.sort_values("time_ms", ascending=False).head(top)
    fused = bool(explanation.attribution.layers) and explanation.attribution.layers[0].time_ms is None
    table = Table(title=f"top {len(frame)} {'fused regions' if fused else 'layers'} by time", header_style="bold")
    table.add_column("name", overflow="fold")
    table.add_column("class")
    for column in ("time ms", "time", "FLOPs", "TFLOP/s", "util", "FLOP/B", "bound", "roofline eff.", "kernels"):
        table.add_column(column, justify="right")
    for point in frame.itertuples():
        row = rows.get(point.name)
        table.add_row(
            point.name + (f" (+{point.layers - 1} layers)" if point.layers > 1 else ""),
            point.op_class,
            f"{point.time_ms:.4f}",
            percent(point.time_share),
            percent(point.flop_share),
            significant(point.achieved_tflops),
            "-" if point.utilization != point.utilization else percent(point.utilization),
            f"{row.intensity:.1f}" if row else "-",
            row.bound.value if row else "-",
            percent(row.efficiency) if row and row.efficiency is not None else "-",
            str(point.kernels),
        )
    return table


def classes_table(explanation: Explanation) -> Table:
    table = Table(title="op classes: share of FLOPs vs share of time", header_style="bold")
    table.add_column("class")
    for column in ("points", "FLOPs", "time", "time ms", "TFLOP/s", "util"):
        table.add_column(column, justify="right")
    for row in explanation.classes.itertuples():
        table.add_row(
            row.op_class,
            str(row.points),
            percent(row.flop_share),
            percent(row.time_share),
            f"{row.time_ms:.3f}",
            significant(row.achieved_tflops),
            "-" if row.utilization != row.utilization else percent(row.utilization),
        )
    return table


def attainable_text(explanation: Explanation) -> str:
    gap, a = explanation.gap, explanation.attribution
    if not gap or "measured_utilization" not in gap:
        return ""
    roofs = a.roofs.label if a.roofs else "?"
    lines = [
        f"attainable utilization ({roofs} roofs): as written (unfused) {percent(gap['unfused_utilization'])}, "
        f"ideally fused {percent(gap['fused_utilization'])}; measured {percent(gap['measured_utilization'])}",
        f"  architecture-limited {percent(gap['architecture_limited'])} of peak (an ideal runtime could not use it), "
        f"runtime-limited {percent(gap['runtime_limited'])} (a better runtime could)",
    ]
    if gap.get("bound_exceeded"):
        lines.append(
            "  [yellow]the measurement beat the bound: data served from L2 cache rather than DRAM "
            "(small batches), so the byte counts over-state the traffic[/]"
        )
    return "\n".join(lines)


DETAILS_SHOWN = 3  # per hint: the biggest layers shown with their evidence
NAMES_SHOWN = 6  # ... and the names of this many more


def hint_text(hint: Hint) -> str:
    """One hint: rule, time at stake and what it covers; its evidence; the biggest layers; the advice, once."""
    covered = f"{len(hint.layers)} flagged" if hint.layers else "the network"
    lines = [f"• {escape(f'[{hint.rule}]')} {pct(hint.time_share)} of time, {covered}"]
    if hint.evidence:
        lines.append(f"    {escape(hint.evidence)}")
    shown = hint.details[:DETAILS_SHOWN]
    lines += [f"    {escape(finding.layer)}: {escape(finding.evidence)}" for finding in shown]
    rest = [name for name in hint.layers if name not in {finding.layer for finding in shown}]
    if rest:
        more = f" (+{len(rest) - NAMES_SHOWN} more; --json lists them)" if len(rest) > NAMES_SHOWN else ""
        lines.append(f"    also: {escape(', '.join(rest[:NAMES_SHOWN]))}{more}")
    lines.append(f"    → {escape(hint.advice)}")
    return "\n".join(lines)


def findings_text(explanation: Explanation) -> str:
    if not explanation.findings:
        return "no diagnosis rule fired"
    lines = ["[bold]hints[/] (advice, not verdicts), biggest time at stake first:"]
    return "\n".join(lines + [hint_text(hint) for hint in explanation.findings])


def render_layers(explanation: Explanation, console: Console, top: int = 20) -> None:
    console.print(header_text(explanation))
    console.print(points_table(explanation, top))
    console.print(classes_table(explanation))
    text = attainable_text(explanation)
    if text:
        console.print(text)
    for note in sorted(set(explanation.attribution.notes)):
        console.print(f"note: {note}")
    console.print(findings_text(explanation))
    console.print(f"FLOPs per inference: {si(explanation.attribution.flops)}")
