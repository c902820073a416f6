"""Rich tables for ``utilscope count``: per-layer rows, totals, op-class shares, unsupported ops."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from utilscope.counting import CountResult
from utilscope.present import check_top, input_phrases
from utilscope.units import percent, plural, shape_text, si

SHOWN_LAYERS = 15  # the compact view's layers, the most FLOPs first


def does_work(layer) -> bool:
    """A layer with FLOPs, bytes or parameters (Identity, Dropout and drop-path layers in eval do none)."""
    return bool(layer.flops or layer.other_flops or layer.bytes or layer.params)


def layer_table(result: CountResult, top: int | None = None, compact: bool = False) -> Table:
    """One row per layer in execution order, or the ``top`` layers by flops; op-level layers that carry nothing
    (``LayerCount.is_empty_op``) are left out, and the caption says how many. ``compact``: the columns that fit 120
    characters (no shapes, no other FLOPs, no intensity), and layers that do no work (``does_work``) folded too."""
    working = [(i, layer) for i, layer in enumerate(result.shown_layers, start=1) if does_work(layer) or not compact]
    layers = working
    if check_top(top) is not None:
        layers = sorted(working, key=lambda item: (item[1].flops, item[1].bytes), reverse=True)[:top]
    image = input_phrases(result.resolution, result.input_channels)
    title = " · ".join([result.model, f"batch {result.batch}", *image, result.dtype])
    idle = len(result.shown_layers) - len(working)
    omitted = [f"zero-cost op layers ({', '.join(f'{k} ×{n}' for k, n in sorted(result.omitted_layers.items()))})"]
    omitted = omitted if result.omitted_layers else []
    omitted += [f"{plural(idle, 'layer')} that do no work (Identity, Dropout, ...)"] if idle else []
    shown = f"the {len(layers)} of {len(working)} layers with the most FLOPs" if len(layers) < len(working) else ""
    caption = "; ".join(filter(None, [shown, f"not shown: {', '.join(omitted)}" if omitted else ""])) or None
    table = Table(title=title, caption=caption, show_lines=False, header_style="bold")
    named = ("#", "layer", "type", "class") + (() if compact else ("input → output",))
    numbers = ("FLOPs", "bytes", "params", "FLOP share") if compact else NUMBERS
    for column in named:
        table.add_column(column, overflow="fold")
    for column in numbers:
        table.add_column(column, justify="right")
    total_flops = result.total.flops or 1
    for index, layer in layers:
        flagged = f" [red]unsupported: {', '.join(layer.unsupported)}[/]" if layer.unsupported else ""
        values = {
            "FLOPs": si(layer.flops),
            "other FLOPs": si(layer.other_flops),
            "bytes": si(layer.bytes, "B"),
            "params": si(layer.params),
            "FLOP/B": f"{layer.intensity:.1f}",
            "FLOP share": percent(layer.flops / total_flops),
        }
        shapes = () if compact else (f"{shape_text(layer.input_shapes)} → {shape_text(layer.output_shapes)}",)
        table.add_row(
            str(index), layer.name + flagged, layer.type, layer.op_class, *shapes, *(values[c] for c in numbers)
        )
    return table


NUMBERS = ("FLOPs", "other FLOPs", "bytes", "params", "FLOP/B", "FLOP share")


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


def render_count(result: CountResult, console: Console, top: int | None = None, all_layers: bool = False) -> None:
    """The answer first: the totals, the op classes, then the layers: the ``top`` (default ``SHOWN_LAYERS``) with
    the most FLOPs in the columns that fit 120 characters, or with ``all_layers`` every layer and column."""
    console.print(totals_text(result))
    console.print(class_table(result))
    if all_layers:
        console.print(layer_table(result, top))
        return
    console.print(layer_table(result, top or SHOWN_LAYERS, compact=True))
    console.print("every layer, with its shapes: --all-layers; every field: --json or --csv", highlight=False)


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
