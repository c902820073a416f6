"""Command line: parse, call the library, print, set the exit code. No logic lives here.

Exit codes: 0 ok; 2 usage error (bad input: unknown model, batch <= 0, ...); 1 when some models of a
multi-model command failed (each failure is printed, the others still run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

from rich.console import Console
from rich.markup import escape

from utilscope.counting import DTYPES, count
from utilscope.errors import UsageError, UtilscopeError
from utilscope.models import zoo

EXIT_USAGE = 2
EXIT_PARTIAL = 1


def _add_count(sub) -> None:
    p = sub.add_parser("count", help="per-layer FLOPs, bytes and params of a model (no GPU needed)")
    p.add_argument("model", help="torchvision:NAME, timm:NAME, path/file.py:factory, or a glob like 'timm:resnet*'")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--res", type=int, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument("--dtype", default="fp32", help=f"one of {', '.join(DTYPES)} (sets bytes per element)")
    p.add_argument("--top", type=int, default=None, help="show only the K layers with the most FLOPs")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the JSON contract instead of tables")
    fmt.add_argument("--csv", action="store_true", help="print per-layer rows as CSV")
    p.set_defaults(run=cmd_count)


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="list model names matching a glob, with their native resolution")
    p.add_argument("pattern", nargs="?", default="torchvision:*", help="e.g. 'torchvision:*', 'timm:efficientnet*'")
    p.set_defaults(run=cmd_models)


def _add_measurement_options(p) -> None:
    """The options ``profile`` and ``layers`` share: what to run, where, and against which peak."""
    p.add_argument("model", help="torchvision:NAME, timm:NAME or path/file.py:factory")
    p.add_argument("--precision", default=None, help="fp32 | tf32 | fp16 | bf16 (default fp16 on GPU, fp32 on CPU)")
    p.add_argument("--backend", default="graph", help="eager | graph | compile | inference (default graph)")
    p.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if present)")
    p.add_argument("--res", type=int, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument("--peak", type=float, default=None, help="peak TFLOP/s to measure utilization against")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false", help="keep NCHW-contiguous")


def _add_profile(sub) -> None:
    p = sub.add_parser("profile", help="measure inference throughput and FLOP utilization over batch sizes")
    _add_measurement_options(p)
    p.add_argument(
        "--batch", default=None, help="comma-separated batch sizes (default 1,8,32,128,256 on GPU, 1,8 on CPU)"
    )
    p.add_argument("--json", action="store_true", help="print the JSON contract instead of a table")
    p.set_defaults(run=cmd_profile)


def _add_layers(sub) -> None:
    p = sub.add_parser("layers", help="per-layer time, roofline, attainable utilization and hints")
    _add_measurement_options(p)
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--top", type=int, default=20, help="show the K slowest layers or regions (default 20)")
    p.add_argument("--roofline", default=None, metavar="PNG", help="write the roofline plot to this PNG file")
    p.add_argument("--json", action="store_true", help="print everything as JSON instead of tables")
    p.set_defaults(run=cmd_layers)


def _add_store_run_options(p, default_batch: str, default_per_worker: int) -> None:
    """Options of the commands that measure a grid into a store (``survey``, ``nas measure``)."""
    p.add_argument("--batch", default=default_batch, help=f"comma-separated batch sizes (default {default_batch})")
    p.add_argument("--precision", default=None, help="comma-separated (default fp16 on GPU, fp32 on CPU)")
    p.add_argument("--backend", default="graph", help="comma-separated backends (default graph)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument("--res", type=int, default=None, help="input resolution (default: each model's native)")
    p.add_argument("--db", default="results.sqlite", help="the SQLite store (default results.sqlite)")
    p.add_argument("--jobs", type=int, default=1, help="workers at a time (one per GPU when there are several)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds one model's group of cells may take")
    p.add_argument("--per-worker", type=int, default=default_per_worker,
                   help=f"models each worker process measures in turn (default {default_per_worker}; more: less "
                   "start-up time, a crash restarts the worker on the models after it)")  # fmt: skip
    p.add_argument("--min-time-ms", type=float, default=None,
                   help="total timed milliseconds per cell (default 1000 on GPU, 200 on CPU)")  # fmt: skip
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                   help="take cuDNN's heuristic algorithms instead of autotuning every new conv shape (seconds per "
                   "new network); stored as a configuration of its own")  # fmt: skip
    p.add_argument("--cudnn-benchmark-limit", type=int, default=None, metavar="N",
                   help="cuDNN autotuning tries at most N algorithms per new conv shape (torch's default 10; 0: all; "
                   "fewer: less set-up time); stored as a configuration of its own")  # fmt: skip
    p.add_argument("--cudnn-depthwise-heuristic", action="store_true",
                   help="autotune every conv but the depthwise ones, which take cuDNN's heuristic algorithm (setting "
                   "up their candidate algorithms is a large part of autotuning's time); eager and graph backends; "
                   "stored as a configuration of its own")  # fmt: skip
    p.add_argument("--no-retry-errors", dest="retry_errors", action="store_false", help="keep earlier error rows")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")


def _add_survey(sub) -> None:
    p = sub.add_parser("survey", help="measure a grid of models x batch sizes x precisions x backends into a store")
    p.add_argument("--models", action="append", default=[], help="name or glob; repeatable (default: curated set)")
    p.add_argument("--family", action="append", default=[], help="a model family (e.g. ResNet); repeatable")
    _add_store_run_options(p, default_batch="1,8,32,128,256", default_per_worker=1)
    p.add_argument(
        "--attribute",
        choices=["representative", "all", "none"],
        default="representative",
        help="record op-class time shares for these models (default: the curated representative set)",
    )
    p.set_defaults(run=cmd_survey)
    p = sub.add_parser("report", help="an HTML report with figures and tables from a survey store")
    p.add_argument("db", help="the SQLite store")
    p.add_argument("-o", "--out", default="report", help="output folder (default report/)")
    p.set_defaults(run=cmd_report)
    p = sub.add_parser("export", help="export a survey store to CSV or Parquet")
    p.add_argument("db")
    p.add_argument("out", help="a .csv or .parquet path")
    p.set_defaults(run=cmd_export)


def _add_nas(sub) -> None:
    nas = sub.add_parser("nas", help="search spaces: sample and measure architectures (predict, search follow)")
    verbs = nas.add_subparsers(dest="nas_command", required=True)
    p = verbs.add_parser("sample", help="seeded, deduplicated architectures of a search space, as JSON lines")
    p.add_argument("--space", required=True, help="a registered search space (mbv3, regnet)")
    p.add_argument("-n", type=int, default=100, help="how many distinct architectures (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flops-min", type=float, default=None, help="lower FLOPs bound per sample (2xMAC)")
    p.add_argument("--flops-max", type=float, default=None, help="upper FLOPs bound per sample (2xMAC)")
    p.add_argument("--out", default="archs.jsonl")
    p.set_defaults(run=cmd_nas_sample)
    p = verbs.add_parser("measure", help="measure sampled architectures into a survey store (resumable)")
    p.add_argument("archs", help="a JSONL file written by `utilscope nas sample`")
    p.add_argument("--limit", type=int, default=None, help="only the first N architectures")
    _add_store_run_options(p, default_batch="256", default_per_worker=25)
    p.set_defaults(run=cmd_nas_measure)
    p = verbs.add_parser("table", help="time every distinct layer of a space alone: the predictor's latency table")
    p.add_argument("--space", required=True, help="a registered search space (mbv3, regnet)")
    p.add_argument("--archs", action="append", default=[], help="also the layers of these JSONL files; repeatable")
    p.add_argument("--batch", default="1,256", help="comma-separated batch sizes (default 1,256)")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument("--out", required=True, help="the table's JSON file; entries it already holds are kept")
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                   help="cuDNN's heuristic algorithms (as `nas measure --no-cudnn-benchmark`)")  # fmt: skip
    p.set_defaults(run=cmd_nas_table)
    p = verbs.add_parser("fit", help="fit the GPU-free predictor: latency table + learned correction, as a profile")
    p.add_argument("--space", required=True)
    p.add_argument("--db", required=True, help="a store with `utilscope nas measure` results of this space")
    p.add_argument("--table", required=True, action="append",
                   help="the space's latency table from `utilscope nas table`; repeat to merge tables of the same "
                        "configuration (e.g. one per batch size)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the held-out split (default 0)")
    p.add_argument("--out", required=True, help="the profile's JSON file")
    p.set_defaults(run=cmd_nas_fit)
    p = verbs.add_parser("predict", help="predict latency, throughput and utilization without a GPU")
    p.add_argument("archs", help="a JSONL file of architectures")
    p.add_argument("--gpu", default=None, help="use the profile shipped for this GPU (e.g. h200)")
    p.add_argument("--profile", default=None, help="a profile from `utilscope nas fit` (checked against --gpu)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default 256)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    p.set_defaults(run=cmd_nas_predict)
    p = verbs.add_parser("search", help="throughput-constrained evolutionary search; --simulate compares strategies")
    p.add_argument("--space", required=True)
    p.add_argument("--min-throughput", type=float, required=True, help="samples/s every answer must reach")
    p.add_argument("--budget", type=int, default=100, help="GPU measurements allowed (default 100)")
    p.add_argument("--simulate", metavar="DB", default=None,
                   help="answer measurements from this store's dataset; compare the strategies (CPU)")  # fmt: skip
    p.add_argument("--holdout-only", action="store_true",
                   help="simulate on the predictor's held-out architectures only (none it was fitted on)")  # fmt: skip
    p.add_argument("--pool", default=None, help="JSONL candidates to search (GPU mode; default: --pool-size sampled)")
    p.add_argument("--pool-size", type=int, default=1000, help="candidates sampled when no --pool (default 1000)")
    p.add_argument("--strategy", default="predictor", help="measure-all | flops | predictor (GPU mode)")
    p.add_argument("--objective", default="flops", help="flops, or a JSON file mapping architecture id -> value")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--gpu", default="h200", help="the predictor profile's GPU (default h200)")
    p.add_argument("--profile", default=None, help="a predictor profile instead of the shipped one")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="GPU mode: where to measure (default: cuda if present)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_nas_search)
    p = verbs.add_parser("analyze", help="FLOPs vs throughput, equal-FLOPs spread, what drives utilization")
    p.add_argument("db", help="a store with `utilscope nas measure` results")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_nas_analyze)


def _add_hardware(sub) -> None:
    p = sub.add_parser("devices", help="the datasheet peak table (dense TFLOP/s per math unit, bandwidth)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_devices)
    p = sub.add_parser("ceilings", help="measure (or show cached) GEMM and copy ceilings of this device")
    p.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if present)")
    p.add_argument("--refresh", action="store_true", help="measure again even if cached")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_ceilings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="utilscope", description="How much of a GPU does a CNN's inference really use, and why."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_count(sub)
    _add_models(sub)
    _add_profile(sub)
    _add_layers(sub)
    _add_survey(sub)
    _add_nas(sub)
    _add_hardware(sub)
    return parser


def cmd_count(args, console: Console) -> int:
    names = [args.model] if not zoo.is_glob(args.model) else zoo.list_models(args.model)
    if not names:
        raise UsageError(f"no model matches '{args.model}'")
    if len(names) == 1:
        result = count(names[0], batch=args.batch, resolution=args.res, dtype=args.dtype)
        if args.json:
            print(json.dumps(result.to_dict()))
        elif args.csv:
            print(result.layers_frame().to_csv(index=False), end="")
        else:
            from utilscope.present.count_view import render_count

            render_count(result, console, top=args.top)
        return 0
    return _count_many(names, args, console)


def _count_many(names: list[str], args, console: Console) -> int:
    from utilscope.present.count_view import summary_table

    results, failures = [], []
    for name in names:
        try:
            results.append(count(name, batch=args.batch, resolution=args.res, dtype=args.dtype))
        except UtilscopeError as exc:  # one model's failure is recorded; the others still run
            failures.append(f"{name}: {' '.join(str(exc).split())}")
    if args.json:
        print(json.dumps([r.to_dict() for r in results]))
    elif args.csv:
        import pandas as pd

        frames = [r.layers_frame().assign(model=r.model) for r in results]
        print(pd.concat(frames).to_csv(index=False), end="")
    else:
        console.print(summary_table(results))
    for failure in failures:
        print(f"utilscope: error: {failure}", file=sys.stderr)
    return EXIT_PARTIAL if failures else 0


def cmd_models(args, console: Console) -> int:
    names = zoo.list_models(args.pattern)
    if not names:
        raise UsageError(f"no model matches '{args.pattern}'")
    for name in names:
        print(f"{name}\t{zoo.native_resolution(zoo.parse_spec(name))}")
    return 0


def parse_batches(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"batch sizes must be comma-separated integers, got {text!r}") from None


def cmd_profile(args, console: Console) -> int:
    from utilscope.measure import profile
    from utilscope.present.profile_view import profile_footer, profile_table

    result = profile(
        args.model,
        batches=parse_batches(args.batch),
        precision=args.precision,
        backend=args.backend,
        device=args.device,
        resolution=args.res,
        channels_last=args.channels_last,
        peak_tflops=args.peak,
    )
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        console.print(profile_table(result))
        console.print(profile_footer(result))
    return 0 if all(row.status == "ok" for row in result.rows) else EXIT_PARTIAL


def cmd_layers(args, console: Console) -> int:
    from utilscope.attribute.attribution import attribute
    from utilscope.attribute.explain import explain
    from utilscope.present.layers_view import render_layers

    if args.top < 1:
        raise UsageError(f"--top must be at least 1, got {args.top}")
    attribution = attribute(
        args.model,
        batch=args.batch,
        precision=args.precision,
        backend=args.backend,
        device=args.device,
        resolution=args.res,
        channels_last=args.channels_last,
        peak_tflops=args.peak,
    )
    explanation = explain(attribution)
    if args.roofline:
        from utilscope.present.roofline_plot import plot_roofline

        if attribution.roofs is None:
            raise UsageError("no roofs for this device: pass --peak, or measure ceilings first")
        title = f"{attribution.model} · batch {attribution.batch} · {attribution.precision} · {attribution.backend}"
        ceiling = attribution.ceiling_roofs if attribution.ceiling_roofs != attribution.roofs else None
        plot_roofline(attribution.points, attribution.roofs, ceiling, args.roofline, title)
    if args.json:
        print(json.dumps(explanation.to_dict(), default=str))
    else:
        render_layers(explanation, console, top=args.top)
        if args.roofline:
            console.print(f"roofline plot: {args.roofline}")
    return 0


def cmd_survey(args, console: Console) -> int:
    from utilscope import survey
    from utilscope.models import sets as model_sets

    models = survey.select_models(args.models, args.family)
    chosen = {"all": set(models), "none": set(), "representative": set(model_sets.representative())}
    return _run_survey(models, args, console, frozenset(chosen[args.attribute]))


def _check_cudnn_options(args) -> None:
    """Before the store is opened: a usage error never creates (or touches) it."""
    from utilscope.measure.profile import check_depthwise_heuristic

    for backend in args.backend.split(","):
        check_depthwise_heuristic(args.cudnn_depthwise_heuristic, args.cudnn_benchmark, backend)
    limit = args.cudnn_benchmark_limit
    if limit is None:
        return
    if limit < 0:
        raise UsageError(f"--cudnn-benchmark-limit must be 0 (all algorithms) or more, got {limit}")
    if not args.cudnn_benchmark:
        raise UsageError("--cudnn-benchmark-limit limits autotuning, which --no-cudnn-benchmark turns off: give one")


def _run_survey(models: list[str], args, console: Console, attribute: frozenset[str]) -> int:
    """Plan, print the plan, run it with a progress bar; shared by ``survey`` and ``nas measure``."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from utilscope import survey
    from utilscope.hardware import resolve_device
    from utilscope.measure.profile import default_precision
    from utilscope.survey.store import Store

    if args.jobs < 1 or args.per_worker < 1 or args.timeout <= 0:
        raise UsageError("--jobs and --per-worker must be at least 1 and --timeout positive")
    if args.min_time_ms is not None and args.min_time_ms <= 0:
        raise UsageError(f"--min-time-ms must be positive, got {args.min_time_ms}")
    _check_cudnn_options(args)
    precisions = (args.precision or default_precision(resolve_device(args.device))).split(",")
    with Store(args.db) as store:
        plan = survey.plan_survey(models, parse_batches(args.batch), precisions, args.backend.split(","),
                                  args.device, store, args.res, args.retry_errors, args.cudnn_benchmark,
                                  args.cudnn_benchmark_limit, args.cudnn_depthwise_heuristic)  # fmt: skip
    console.print(f"survey: {plan.cells} cells to measure in {len(plan.groups)} groups, {plan.skipped} already "
                  f"in {args.db}; {plan.device}; {plan.software}")  # fmt: skip
    if args.dry_run or not plan.groups:
        return 0
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} cells"),
               TimeElapsedColumn(), TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("measuring", total=plan.cells)
        options = survey.WorkerOptions(args.db, args.device, args.timeout, attribute, args.min_time_ms,
                                       args.cudnn_benchmark, args.cudnn_benchmark_limit,
                                       args.cudnn_depthwise_heuristic)  # fmt: skip
        result = survey.run_survey(plan, options, args.jobs, args.per_worker,
                                   lambda cells: progress.advance(task, cells))  # fmt: skip
    per_cell = result.wall_s / result.cells if result.cells else 0.0
    console.print(f"{result.cells} cells in {result.wall_s:.1f} s ({per_cell:.2f} s per cell), "
                  f"{result.failed_cells} failed")  # fmt: skip
    for failure in result.failures[:20]:
        console.print(f"  [red]{escape(failure)}[/]")
    return EXIT_PARTIAL if result.failed_cells else 0


def cmd_nas_measure(args, console: Console) -> int:
    from utilscope.nas.sampler import load_jsonl

    archs = [arch for arch in load_jsonl(args.archs) if "id" in arch]
    if not archs:
        raise UsageError(f"{args.archs} has no architectures with ids (write it with `utilscope nas sample`)")
    if args.limit is not None:
        archs = archs[: args.limit]
    return _run_survey([f"{args.archs}:{arch['id']}" for arch in archs], args, console, frozenset())


def cmd_report(args, console: Console) -> int:
    from utilscope.report.html import build_report
    from utilscope.survey.store import Store

    with Store(args.db, create=False) as store:
        path = build_report(store.frame(), store.op_class_frame(), args.out)
    console.print(f"report: {path}")
    return 0


def cmd_export(args, console: Console) -> int:
    from utilscope.survey.store import Store

    with Store(args.db, create=False) as store:
        store.export(args.out)
    console.print(f"exported {args.db} to {args.out}")
    return 0


def cmd_nas_sample(args, console: Console) -> int:
    from utilscope.nas.sampler import sample_architectures, save_jsonl
    from utilscope.nas.space import get_space

    space = get_space(args.space)
    archs = sample_architectures(space, args.n, args.seed, args.flops_min, args.flops_max)
    path = save_jsonl(args.out, archs)
    flops = sorted(space.complexity(arch).flops for arch in archs)
    console.print(f"{len(archs)} {space.name} architectures (seed {args.seed}) in {path}; "
                  f"FLOPs {flops[0] / 1e9:.3f}–{flops[-1] / 1e9:.3f} G per sample")  # fmt: skip
    return 0


def cmd_nas_table(args, console: Console) -> int:
    from pathlib import Path

    from utilscope.nas.latency import LatencyTable, fill_table, open_table
    from utilscope.nas.sampler import load_jsonl

    archs = [arch for path in args.archs for arch in load_jsonl(path, args.space)]
    existing = LatencyTable.load(args.out) if Path(args.out).exists() else None
    table = open_table(args.space, args.precision, args.device, args.cudnn_benchmark, existing)

    start_s = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            table.save(args.out)  # an interrupted run keeps what it timed
        if done % 100 == 0 or done == total:
            console.print(f"{done}/{total} layers timed in {time.perf_counter() - start_s:.0f} s")

    fill_table(table, archs, parse_batches(args.batch), args.device, progress)
    table.save(args.out)
    console.print(f"{len(table.entries)} {table.space} layers on {table.device} at batch "
                  f"{','.join(map(str, sorted(table.batches())))} in {args.out}")  # fmt: skip
    return 0


def cmd_nas_fit(args, console: Console) -> int:
    from utilscope.nas.latency import load_tables
    from utilscope.nas.predictor import fit, measured_dataset
    from utilscope.survey.store import Store

    table = load_tables(args.table)
    if table.space != args.space:
        raise UsageError(f"{args.table[0]} is a {table.space} latency table, not {args.space}")
    with Store(args.db, create=False) as store:
        archs, measurements = measured_dataset(store.frame(), args.space)
    predictor = fit(table, archs, measurements, args.seed)
    predictor.save(args.out)
    evaluation = predictor.evaluation
    console.print(f"{args.space} predictor for {table.device} in {args.out}; held out: "
                  f"{evaluation['holdout_architectures']} architectures (seed {args.seed}); "
                  f"{evaluation['rows_without_table_entries']} rows skipped for missing table entries")  # fmt: skip
    for batch, metrics in evaluation["per_batch"].items():
        for name in ("predictor", "layer_sum", "flops_proxy"):
            console.print(f"  batch {batch} ({metrics['architectures']} held out) {name}: Spearman "
                          f"{metrics[name]['spearman']:.3f}, MAPE {metrics[name]['mape']:.1%}")  # fmt: skip
    for batch, metrics in evaluation["with_estimated_layers"].items():
        console.print(f"  batch {batch}, {metrics['architectures']} architectures with "
                      f"{metrics['mean_estimated_layers']:.1f} layers each estimated (not in the table): Spearman "
                      f"{metrics['spearman']:.3f}, MAPE {metrics['mape']:.1%}")  # fmt: skip
    for batch, metrics in evaluation["unseen_layers"].items():
        if metrics["mean_estimated_layers"] == 0:
            continue  # the table covers the whole space: no layer is unseen
        console.print(f"  batch {batch}, the held-out architectures with their {metrics['mean_estimated_layers']:.1f} "
                      f"unseen layers each (timed only for them) estimated: Spearman {metrics['spearman']:.3f}, "
                      f"MAPE {metrics['mape']:.1%}")  # fmt: skip
    return 0


def _load_predictor(profile: str | None, gpu: str | None, space: str):
    from utilscope.nas.predictor import check_profile_gpu, load_predictor, shipped_profile

    if profile is None and gpu is None:
        raise UsageError("give --gpu (a shipped profile, e.g. h200) or --profile")
    predictor = load_predictor(profile if profile is not None else shipped_profile(gpu, space))
    check_profile_gpu(predictor, gpu)
    if predictor.space != space:
        raise UsageError(f"the predictor profile is for the {predictor.space} space, not {space}")
    return predictor


def cmd_nas_predict(args, console: Console) -> int:
    from utilscope.nas.sampler import load_jsonl

    archs = load_jsonl(args.archs)
    spaces = sorted({arch["space"] for arch in archs})
    if len(spaces) != 1:
        raise UsageError(f"{args.archs} holds architectures of {len(spaces)} spaces ({', '.join(spaces)}); give one")
    predictor = _load_predictor(args.profile, args.gpu, spaces[0])
    frame = predictor.predict(archs, args.batch)
    if args.json:
        print(json.dumps({"device": predictor.table.device, "space": predictor.space, "batch": args.batch,
                          "predictions": frame.to_dict(orient="records")}))  # fmt: skip
    elif args.csv:
        print(frame.to_csv(index=False), end="")
    else:
        console.print(f"{len(frame)} {predictor.space} architectures on {predictor.table.device}, batch {args.batch} "
                      f"(predicted)")  # fmt: skip
        console.print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def _table_settings(table, device: str | None) -> tuple[str | None, str | None, bool]:
    """(precision, device, cudnn_benchmark) to measure with as the predictor's table was timed; on a CPU (tests),
    the CPU's default precision."""
    from utilscope import hardware

    on_gpu = hardware.resolve_device(device).type == "cuda"
    return (table.precision if on_gpu else None), device, table.cudnn_benchmark


def cmd_nas_search(args, console: Console) -> int:
    from pathlib import Path

    import numpy as np

    from utilscope.nas import search
    from utilscope.nas import search_setup as setup
    from utilscope.nas.predictor import screening_margins

    if args.min_throughput <= 0 or args.budget < 1:
        raise UsageError("--min-throughput must be positive and --budget at least 1")
    search.check_strategy(args.strategy)
    objective = setup.objective_for(args.objective, args.space)
    predictor = _load_predictor(args.profile, args.gpu, args.space)
    estimator = setup.predictor_estimator(predictor, args.batch)
    if args.simulate is not None:
        from utilscope.survey.store import Store

        with Store(args.simulate, create=False) as store:
            frame = store.frame()
        pool, oracle = setup.simulation_inputs(frame, args.space, args.batch)
        pool, oracle, dropped = setup.covered_pool(pool, oracle, predictor, args.batch)
        if args.holdout_only:
            pool, oracle = setup.restrict_pool(pool, oracle, set(predictor.holdout_ids))
        margins = screening_margins(predictor, args.batch)
        table = search.compare(pool, objective, args.min_throughput, oracle, estimator, args.budget, margin=margins)
        if args.json:
            print(json.dumps({"pool_size": len(pool), "dropped_without_table_entries": dropped, "margins": margins,
                              "comparison": table.to_dict(orient="records")}))  # fmt: skip
            return 0
        console.print(
            f"simulated on {len(pool)} measured {args.space} architectures at batch {args.batch} ({dropped} "
            f"without latency-table entries left out); samples/s >= {args.min_throughput:g}; screening "
            f"margins (2x held-out MAPE) {', '.join(f'{k} {v:.1%}' for k, v in margins.items())}"
        )
        console.print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        return 0
    pool_path = setup.search_pool(args.space, args.pool, args.pool_size, args.seed, Path("."))
    pool = setup.load_pool(pool_path, args.space)
    oracle = setup.GpuOracle(pool_path, args.batch, *_table_settings(predictor.table, args.device))
    screen = estimator if args.strategy == "predictor" else None
    result = search.evolve(pool, objective, args.min_throughput, args.budget, args.strategy, oracle, screen,
                           np.random.default_rng(args.seed))  # fmt: skip
    doc = {"pool": str(pool_path), "strategy": result.strategy, "best_id": result.best_id,
           "best_objective": result.best_objective, "best_samples_per_s": result.best_samples_per_s,
           "measurements": result.measurements, "steps": result.steps}  # fmt: skip
    print(json.dumps(doc)) if args.json else console.print(doc)
    return 0


def cmd_nas_analyze(args, console: Console) -> int:
    from utilscope.nas.analysis import analyze
    from utilscope.survey.store import Store

    with Store(args.db, create=False) as store:
        results = analyze(store.frame())
    if args.json:
        docs = [
            {**vars(r), "spread": r.spread.to_dict(orient="records"), "effects": r.effects.to_dict(orient="records")}
            for r in results
        ]
        print(json.dumps(docs))
        return 0
    for r in results:
        q = r.utilization_quantiles
        console.print(f"[bold]{r.space}[/] batch {r.batch}: {r.architectures} architectures; Spearman(FLOPs, "
                      f"samples/s) = {r.flops_throughput_spearman:.2f}; utilization p5 {q['p5']:.2%}, median "
                      f"{q['p50']:.2%}, p95 {q['p95']:.2%}")  # fmt: skip
        if not r.spread.empty:
            worst = r.spread.sort_values("max_over_min", ascending=False).iloc[0]
            console.print(f"  equal FLOPs (±5%), {len(r.spread)} groups: throughput differs up to "
                          f"{worst.max_over_min:.2f}× (at {worst.gflops:.2f} GFLOPs)")  # fmt: skip
        for effect in r.effects.head(6).itertuples():
            console.print(f"  {effect.feature}: Spearman {effect.spearman:+.2f} with utilization; top quarter / "
                          f"bottom quarter {effect.top_over_bottom:.2f}×")  # fmt: skip
    return 0


def cmd_devices(args, console: Console) -> int:
    from utilscope.hardware import specs_frame
    from utilscope.present.profile_view import frame_table

    frame = specs_frame()
    if args.json:
        print(frame.to_json(orient="records"))
    else:
        console.print(frame_table(frame, "dense datasheet peaks (TFLOP/s; int8 in TOPS) and memory bandwidth (GB/s)"))
    return 0


def cmd_ceilings(args, console: Console) -> int:
    from utilscope.hardware import get_ceilings, resolve_device

    ceilings = get_ceilings(resolve_device(args.device), refresh=args.refresh)
    if args.json:
        print(json.dumps(ceilings.to_dict()))
        return 0
    console.print(f"[bold]{ceilings.device_name}[/] ({ceilings.device_kind}), torch {ceilings.torch_version}")
    for precision, tflops in ceilings.gemm_tflops.items():
        console.print(f"  GEMM {precision}: {tflops:.2f} TFLOP/s")
    console.print(f"  copy: {ceilings.copy_gbs:.1f} GB/s (bytes read + written)")
    console.print(f"  {ceilings.note}  measured {ceilings.measured_at}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 200)
    warnings.filterwarnings("ignore", category=FutureWarning, module="torchvision")
    try:
        return args.run(args, console)
    except UtilscopeError as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
