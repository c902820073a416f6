"""Terminal views of NAS results: a fitted predictor's held-out accuracy, a search simulation, a store's analysis."""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from utilscope.nas.analysis import MIN_ARCHITECTURES
from utilscope.units import plural


def render_fit(predictor, out: str, seed: int, console: Console) -> None:
    """Where the profile went and how well it predicts what it was not fitted on."""
    evaluation = predictor.evaluation
    console.print(
        f"{predictor.space} predictor for {predictor.table.device} in {out}; held out: "
        f"{evaluation['holdout_architectures']} architectures (seed {seed}); "
        f"{evaluation['rows_without_table_entries']} rows skipped for missing table entries"
    )
    for batch, metrics in evaluation["per_batch"].items():
        for name in ("predictor", "layer_sum", "flops_proxy"):
            console.print(
                f"  batch {batch} ({metrics['architectures']} held out) {name}: Spearman "
                f"{metrics[name]['spearman']:.3f}, MAPE {metrics[name]['mape']:.1%}"
            )
    for batch, metrics in evaluation["with_estimated_layers"].items():
        console.print(
            f"  batch {batch}, {metrics['architectures']} architectures with "
            f"{metrics['mean_estimated_layers']:.1f} layers each estimated (not in the table): Spearman "
            f"{metrics['spearman']:.3f}, MAPE {metrics['mape']:.1%}"
        )
    for batch, metrics in evaluation["unseen_layers"].items():
        if metrics["mean_estimated_layers"] == 0:
            continue  # the table covers the whole space: no layer is unseen
        console.print(
            f"  batch {batch}, the held-out architectures with their {metrics['mean_estimated_layers']:.1f} "
            f"unseen layers each (timed only for them) estimated: Spearman {metrics['spearman']:.3f}, "
            f"MAPE {metrics['mape']:.1%}"
        )


def render_simulation(request, simulation, console: Console) -> None:
    margins = ", ".join(f"{k} {v:.1%}" for k, v in simulation.margins.items())
    console.print(
        f"simulated on {simulation.pool_size} measured {request.space} architectures at batch {request.batch} "
        f"({simulation.dropped} without latency-table entries left out); samples/s >= {request.min_throughput:g}; "
        f"screening margins (2x held-out MAPE) {margins}"
    )
    console.print(simulation.comparison.to_string(index=False, float_format=lambda v: f"{v:.3g}"))


def render_device_search(search, console: Console) -> None:
    """A GPU-mode search (``DeviceSearch``): the answer, or that none was found, and what it cost."""
    request, result = search.request, search.result
    table = Table(
        title=f"nas search: {request.space} at batch {request.batch}, samples/s >= "
        f"{request.min_throughput:g}, on {search.device}",
        show_header=False,
    )
    table.add_column("", style="bold")
    table.add_column("")
    pool = escape(str(search.pool)) if search.pool else f"sampled (seed {request.seed}), not kept (--work-dir keeps it)"
    table.add_row("pool", f"{search.pool_size} architectures: {pool}")
    table.add_row("strategy", result.strategy)
    if result.best_id is None:
        table.add_row(
            "best", f"[red]none of the measured architectures reached {request.min_throughput:g} samples/s[/]"
        )
    else:
        table.add_row("best", result.best_id)
        table.add_row("its objective", f"{result.best_objective:.6g} ({request.objective})")
        table.add_row("its samples/s", f"{result.best_samples_per_s:.4g}")
    table.add_row("measurements", f"{result.measurements} of a budget of {request.budget}")
    table.add_row("children proposed", str(result.steps))
    console.print(table)


def render_predicted_search(search, console: Console) -> None:
    """A search on predictions (``PredictedSearch``): how the GPU was predicted, and the feasible candidates."""
    request = search.request
    how = (
        f"predicted by transfer from the {search.transferred_from} device profile (not validated on this GPU)"
        if search.transferred_from
        else "predicted by the general model of its own device profile"
    )
    pool = escape(str(search.pool)) if search.pool else f"sampled (seed {request.seed})"
    console.print(
        f"nas search: {request.space} on {search.gpu}, batch {request.batch}, fp16, samples/s >= "
        f"{request.min_throughput:g}: {how}; nothing measured"
    )
    console.print(
        f"pool: {search.pool_size} architectures, {pool}; {search.feasible} predicted at or above the floor; "
        f"utilization: of the {search.gpu}'s dense fp16 peak (spec table)"
    )
    if search.candidates.empty:
        console.print(f"[red]no architecture is predicted at {request.min_throughput:g} samples/s or more[/]")
        return
    console.print(search.candidates.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def render_analysis(results, console: Console) -> None:
    """Per space and batch size: how well FLOPs rank throughput, utilization quantiles, the equal-FLOPs spread and
    the strongest design effects; "too few architectures" instead of a nan correlation."""
    for r in results:
        q = r.utilization_quantiles
        head = f"[bold]{r.space}[/] batch {r.batch}: {r.architectures} architecture{'s' if r.architectures > 1 else ''}"
        if r.too_few_architectures:
            console.print(
                f"{head}: too few architectures to rank FLOPs against samples/s or find what drives "
                f"utilization (at least {MIN_ARCHITECTURES}); utilization median {q['p50']:.2%}"
            )
            continue
        console.print(
            f"{head}; Spearman(FLOPs, samples/s) = {_signed(r.flops_throughput_spearman)}; utilization "
            f"p5 {q['p5']:.2%}, median {q['p50']:.2%}, p95 {q['p95']:.2%}"
        )
        if not r.spread.empty:
            worst = r.spread.sort_values("max_over_min", ascending=False).iloc[0]
            console.print(
                f"  equal FLOPs (±5%), {plural(len(r.spread), 'group')}: throughput differs up to "
                f"{worst.max_over_min:.2f}× (at {worst.gflops:.2f} GFLOPs)"
            )
        for effect in r.effects.head(6).itertuples():
            ratio = f"{effect.top_over_bottom:.2f}×" if math.isfinite(effect.top_over_bottom) else "n/a"
            console.print(
                f"  {effect.feature}: Spearman {_signed(effect.spearman)} with utilization; top quarter / "
                f"bottom quarter {ratio}"
            )


def _signed(value: float) -> str:
    """``+0.42``, or "n/a" for a correlation that is not defined (e.g. every architecture equally fast)."""
    return f"{value:+.2f}" if math.isfinite(value) else "n/a"
