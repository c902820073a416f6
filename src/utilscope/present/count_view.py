"""Rich tables for ``utilscope count``: per-layer rows, totals, op-class shares, unsupported ops."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from utilscope.counting import CountResult
from utilscope.present import check_top
from utilscope.units import percent, shape_text, si


def layer_table(result: CountResult, top: int | None = None) -> Table:
    """One row per layer in execution order, or the ``top`` layers by flops; op-level layers that carry nothing
    (``LayerCount.is_empty_op``) are left out, and the caption says how many."""
    layers = list(enumerate(result.shown_layers, start=1))
    if check_top(top) is not None:
        layers = sorted(layers, key=lambda item: (item[1].flops, item[1].bytes), reverse=True)[:top]
    title = f"{result.model} · batch {result.batch} · {result.resolution}px · {result.dtype}"
    omitted = ", ".join(f"{kind} ×{n}" for kind, n in sorted(result.omitted_layers.items()))
    caption = f"not shown: zero-cost op layers ({omitted})" if omitted else None
    table = Table(title=title, caption=caption, show_lines=False, header_style="bold")
    for column in ("#", "layer", "type", "class", "input → output"):
        table.add_column(column, overflow="fold")
    for column in ("FLOPs", "other FLOPs", "bytes", "params", "FLOP/B", "FLOP share"):
        table.add_column(column, justify="right")
    total_flops = result.total.flops or 1
    for index, layer in layers:
        flagged = f" [red]unsupported: {', '.join(layer.unsupported)}[/]" if layer.unsupported else ""
        table.add_row(
            str(index),
            layer.name + flagged,
            layer.type,
            layer.op_class,
            f"{shape_text(layer.input_shapes)} → {shape_text(layer.output_shapes)}",
            si(layer.flops),
            si(layer.other_flops),
            si(layer.bytes, "B"),
            si(layer.params),
            f"{layer.intensity:.1f}",
            percent(layer.flops / total_flops),
        )
    return table


def class_table(result: CountResult) -> Table:
    table = Table(title="op classes", header_style="bold")
    table.add_column("class")
    for column in ("layers", "FLOPs", "FLOP share", "other FLOPs", "other share", "bytes", "bytes share"):
        table.add_column(column, justify="right")
    for row in result.class_summary().itertuples():
        table.add_row(
            row.op_class,
            str(row.layers),
            si(row.flops),
            percent(row.flops_share),
            si(row.other_flops),
            percent(row.other_flops_share),
            si(row.bytes, "B"),
            percent(row.bytes_share),
        )
    return table


def totals_text(result: CountResult) -> str:
    t = result.total
    lines = [
        f"FLOPs (2×MAC) {si(t.flops)}   other FLOPs {si(t.other_flops)}   params {si(t.params)}",
        f"bytes unfused {si(t.bytes, 'B')}   fused {si(t.bytes_fused, 'B')}   "
        f"(weights {si(t.weight_bytes, 'B')}, activations {si(t.activation_bytes, 'B')})",
        f"arithmetic intensity {t.intensity:.1f} FLOP/B unfused, "
        f"{t.flops / t.bytes_fused if t.bytes_fused else 0:.1f} FLOP/B fused",
    ]
    if result.unsupported:
        ops = ", ".join(f"{op}×{n}" for op, n in sorted(result.unsupported.items()))
        lines.append(f"[bold red]unsupported ops (not counted): {ops}[/]")
    if result.traced_on != "meta":
        lines.append(f"traced on {result.traced_on} (the model cannot run on the meta device)")
    return "\n".join(lines)


def render_count(result: CountResult, console: Console, top: int | None = None) -> None:
    console.print(layer_table(result, top))
    console.print(totals_text(result))
    console.print(class_table(result))


def summary_table(results: list[CountResult]) -> Table:
    """One row per model, for ``utilscope count`` on a glob."""
    table = Table(title="models", header_style="bold")
    table.add_column("model")
    for column in ("res", "FLOPs", "other FLOPs", "bytes", "bytes fused", "params", "FLOP/B", "unsupported"):
        table.add_column(column, justify="right")
    for r in results:
        t = r.total
        table.add_row(
            r.model,
            str(r.resolution),
            si(t.flops),
            si(t.other_flops),
            si(t.bytes, "B"),
            si(t.bytes_fused, "B"),
            si(t.params),
            f"{t.intensity:.1f}",
            ", ".join(r.unsupported) or "-",
        )
    return table
