"""``survey``, ``report``, ``export``, ``merge``: measure a grid (or a shard of it) into a store, read a store back,
merge stores. The run itself is the library's ``survey.workflow.survey_grid``; ``nas measure`` shares the grid
options, their request and the console view (``cli.survey_events``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from utilscope.cli.common import (
    EXIT_INCOMPLETE,
    EXIT_PARTIAL,
    add_cudnn_options,
    add_threads_option,
    cudnn_settings,
)
from utilscope.cli.values import (
    BATCHES,
    DEVICE,
    FAMILY,
    JOBS,
    MODEL_AT,
    MODEL_SET,
    PEAK,
    RAY_ADDRESS,
    RES,
    SHARD,
    TIMED_MS,
    TIMEOUT,
    backends,
    output_file,
    output_folder,
    parse_list,
    precisions,
    store,
    text_file,
    whole,
)
from utilscope.errors import RESUME
from utilscope.files import EXPORT_FILE, EXPORT_SUFFIXES, MODEL_LIST, REPORT_FOLDER
from utilscope.limits import FIT_RULES
from utilscope.measure.backends import BACKENDS
from utilscope.models import sets as model_sets
from utilscope.precision import MEASURED
from utilscope.survey.ray_cluster import EXECUTORS, check_executor, check_reachable
from utilscope.survey.store_files import merge_paths
from utilscope.units import plural

if TYPE_CHECKING:
    from utilscope.report.workflow import ReportEvents
    from utilscope.survey.store import Store
    from utilscope.survey.workflow import SurveyRequest


def add_grid_options(p, default_batch: str, default_per_worker: int) -> None:
    """Options of the commands that measure a grid into a store (``survey``, ``nas measure``)."""
    p.add_argument(
        "--batch", type=BATCHES, default=default_batch, help="comma-separated batch sizes (default: %(default)s)"
    )
    p.add_argument(
        "--precision",
        type=precisions("--precision"),
        default=None,
        help=f"comma-separated, of {', '.join(MEASURED)} (default: fp16 on GPU, fp32 on CPU)",
    )
    p.add_argument(
        "--backend",
        type=backends("--backend"),
        default="graph",
        help=f"comma-separated, of {', '.join(BACKENDS.names())} (default: %(default)s)",
    )
    p.add_argument("--device", type=DEVICE, default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument("--res", type=RES, default=None, help="input resolution in pixels (default: each model's native)")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false", help="keep NCHW-contiguous")
    p.add_argument(
        "--peak",
        type=PEAK,
        default=None,
        help="peak TFLOP/s to measure utilization against (default: the GPU's dense datasheet peak for "
        "each precision, see `utilscope devices`; on a CPU its measured GEMM ceiling)",
    )
    p.add_argument(
        "--db",
        type=store(writable=True),
        default="results.sqlite",
        help="the SQLite store, created if missing (default: %(default)s)",
    )
    add_run_options(p, default_per_worker)
    add_threads_option(p)
    add_cudnn_options(p)
    add_cell_choices(p)
    add_executor_options(p)


def add_cell_choices(p) -> None:
    """Which of a grid's cells a run measures: errors again or not, a shard, the batch that fits, none (dry run)."""
    p.add_argument(
        "--no-retry-errors",
        dest="retry_errors",
        action="store_false",
        help="keep earlier error rows instead of measuring their cells again",
    )
    p.add_argument(
        "--shard",
        type=SHARD,
        default=None,
        metavar="K/N",
        help="measure only the K-th of N shares of the grid (1 <= K <= N; a model's batch sizes at one "
        "precision and backend stay in one shard, the same on every machine): run the N shards into N "
        "stores, e.g. as a Slurm array, then `utilscope merge` them (default: the whole grid)",
    )
    p.add_argument(
        "--fit-batch",
        nargs="?",
        const="halve",
        default=None,
        choices=FIT_RULES,
        metavar="RULE",
        help="after a batch size that runs out of memory, also measure the largest smaller one that fits, "
        "stored as a cell of its own and noted on the out-of-memory row; RULE halve or timm (timm's "
        "benchmark: 1024, 768, 512, 384, ...) (default: off; --fit-batch alone: halve)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")


def add_run_options(p, default_per_worker: int) -> None:
    """How a grid's cells are run: workers, their time limit and models, the time per cell."""
    p.add_argument(
        "--jobs",
        type=JOBS,
        default=1,
        help="workers at a time, one per GPU when there are several (default: %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=TIMEOUT,
        default=900.0,
        help="seconds one model's group of cells may take (default: %(default)g)",
    )
    p.add_argument(
        "--per-worker",
        type=whole("--per-worker"),
        default=default_per_worker,
        help="models each worker process measures in turn (default: %(default)s); more: less start-up "
        "time, and a crash restarts the worker on the models after it",
    )
    p.add_argument(
        "--min-time-ms",
        type=TIMED_MS,
        default=None,
        help="total timed milliseconds per cell (default: 1000 on GPU, 200 on CPU)",
    )


def add_executor_options(p) -> None:
    """Where the work runs: this machine, or a Ray cluster (``survey``, ``nas measure``, ``nas table``)."""
    p.add_argument(
        "--executor",
        default="local",
        choices=EXECUTORS,
        help="where the work runs: local subprocesses (one per GPU), or Ray tasks on a cluster "
        "(default: %(default)s; docs/cluster.md)",
    )
    p.add_argument(
        "--ray-address",
        type=RAY_ADDRESS,
        default=None,
        metavar="ADDR",
        help="the Ray cluster to join: HOST:PORT of its head, or auto (RAY_ADDRESS, else the cluster "
        "`ray start` started on this machine) (default: local, a private Ray started here for the run; "
        "docs/cluster.md)",
    )
    p.add_argument(
        "--gpu-types",
        default=None,
        metavar="TYPES",
        help="on Ray: 'all' measures every cell once on each GPU type of the cluster, or a comma-separated "
        "list such as A100,H100 (default: one type, the first the cluster has)",
    )


def add_parsers(sub) -> None:
    p = sub.add_parser("survey", help="measure a grid of models x batch sizes x precisions x backends into a store")
    p.add_argument(
        "--models",
        action="append",
        type=MODEL_AT,
        default=[],
        help=f"a model name or glob, NAME@RES for a resolution of its own, NAME+reparam for it "
        f"reparameterized; repeatable (default: the {len(model_sets.default_survey())} curated "
        "torchvision CNNs, when no --models-file, --family or --set is given either)",
    )
    p.add_argument(
        "--models-file",
        type=text_file(MODEL_LIST),
        default=None,
        metavar="FILE",
        help="a text file of models as --models takes them, one per line (# starts a comment) (default: none)",
    )
    p.add_argument(
        "--family",
        type=FAMILY,
        action="append",
        default=[],
        help=f"a model family, matched among every torchvision and timm model (not only the curated set); "
        f"repeatable; one of {', '.join(model_sets.families())} (default: none)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        type=MODEL_SET,
        action="append",
        default=[],
        metavar="NAME",
        help=f"a named model set (`utilscope models --set NAME` lists it); repeatable; one of "
        f"{', '.join(model_sets.set_names())} (default: none)",
    )
    add_grid_options(p, default_batch="1,8,32,128,256", default_per_worker=1)
    p.add_argument(
        "--attribute",
        choices=["representative", "all", "none"],
        default="representative",
        help="record op-class time shares for these models (default: %(default)s, the curated representative set)",
    )
    p.set_defaults(run=cmd_survey)
    _add_store_verbs(sub)


def _add_store_verbs(sub) -> None:
    """The verbs that read a store: report, export, merge."""
    p = sub.add_parser("report", help="an HTML report with figures and tables from a survey store")
    p.add_argument("db", type=store(writable=False), help="the SQLite store (from `utilscope survey` or `nas measure`)")
    p.add_argument(
        "-o",
        "--out",
        type=output_folder(REPORT_FOLDER),
        default="report",
        help="output folder, created if missing; its index.html, PNGs and measurements.csv are replaced "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--no-predicted",
        action="store_true",
        help="leave predictions out of the model view (default: predict each model of the store on the GPUs of the "
        "spec table it has no row of, in the store's most common condition: about 0.1 s a model, docs/benchmarks.md)",
    )
    p.set_defaults(run=cmd_report)
    p = sub.add_parser("export", help="export a survey store to CSV or Parquet")
    p.add_argument("db", type=store(writable=False), help="the SQLite store (from `utilscope survey` or `nas measure`)")
    p.add_argument(
        "out",
        type=output_file(EXPORT_FILE, EXPORT_SUFFIXES),
        help="a .csv or .parquet file (its folder is created if missing)",
    )
    p.set_defaults(run=cmd_export)
    p = sub.add_parser("merge", help="merge results stores (e.g. the shards of one survey) into one store")
    p.add_argument(
        "inputs", nargs="+", type=store(writable=False), metavar="STORE", help="the stores to merge (never modified)"
    )
    p.add_argument(
        "-o",
        "--out",
        type=store(writable=True),
        required=True,
        help="the merged store, created if missing; an existing one keeps its rows (not one of the inputs)",
    )
    p.set_defaults(run=cmd_merge)


def check_executor_options(args) -> None:
    """A grid command's executor and its options (``check_executor``), and that the Ray head it names answers
    (``check_reachable``), before anything heavy (Ray, torch) is imported."""
    check_executor(args.executor, args.ray_address, args.gpu_types, args.device)
    if args.executor == "ray":
        check_reachable(args.ray_address)


def cmd_survey(args, console: Console) -> int:
    check_executor_options(args)
    from utilscope.api import survey
    from utilscope.cli.survey_events import ConsoleEvents
    from utilscope.survey.plan import read_model_list, select_models, split_resolution

    listed = read_model_list(args.models_file) if args.models_file else []
    patterns, unreadable = readable_files(args.models + listed)
    models = select_models(patterns, args.family, args.sets)
    every = {split_resolution(model)[0] for model in models}  # a group is keyed by its model's id, not NAME@RES
    chosen = {"all": every, "none": set(), "representative": set(model_sets.representative())}
    request = grid_request(models, args, frozenset(chosen[args.attribute]))
    code = render_result(survey(request, events=ConsoleEvents(console, request)).result, console)
    for line in unreadable:
        print(f"utilscope: error: {line} (left out of the survey)", file=sys.stderr)
    return code or (EXIT_PARTIAL if unreadable else 0)


def readable_files(patterns: list[str]) -> tuple[list[str], list[str]]:
    """``--models`` with each glob of model files (``exports/*.onnx``) replaced by the files it matches that open,
    and the one-line reason of each that does not: a bad file in a glob is named and the others measured. A glob
    whose every file is bad is a UsageError; other patterns are left as they are."""
    from utilscope.errors import UsageError, UtilscopeError
    from utilscope.models import model_files, zoo
    from utilscope.survey.plan import split_resolution

    kept, unreadable = [], []
    for pattern in patterns:
        text, resolution = split_resolution(pattern)
        files = model_files.expand(text) if zoo.is_glob(text) else None
        if not files:
            kept.append(pattern)
            continue
        reasons = []
        for path in files:
            try:
                zoo.check_model(zoo.parse_spec(path))
            except UtilscopeError as exc:
                reasons.append(" ".join(str(exc).split()))
                continue
            kept.append(path if resolution is None else f"{path}@{resolution}")
        if len(reasons) == len(files):
            raise UsageError(f"no file that '{text}' matches opens: {reasons[0]}")
        unreadable += reasons
    return kept, unreadable


def grid_request(models: list[str], args, attribute: frozenset[str]) -> SurveyRequest:
    """The library's request for the options; built (and so checked) before the store is opened, so a usage error
    never creates or touches it."""
    from utilscope.survey.plan import SurveyGrid
    from utilscope.survey.runner import RunOptions
    from utilscope.survey.shards import parse_shard
    from utilscope.survey.workflow import SurveyRequest

    grid = SurveyGrid(
        tuple(models),
        tuple(args.batch),
        args.precision or (),
        parse_list(args.backend, "--backend"),
        args.device,
        args.res,
        args.channels_last,
        cudnn_settings(args),
        args.retry_errors,
        parse_shard(args.shard),
        args.threads,
    )
    options = RunOptions(
        args.db, args.jobs, args.per_worker, args.timeout, attribute, args.min_time_ms, args.peak, args.fit_batch
    )
    return SurveyRequest(grid, options, args.executor, args.ray_address, args.gpu_types, args.dry_run)


def render_result(result, console: Console) -> int:
    """The run's counts and table; exit 0 only when every cell claimed has a row and none is an error (or when
    there was no run: ``result`` None, a dry run or a grid already measured)."""
    from utilscope.present.survey_view import missing_lines, outcome_table, worst_errors

    if result is None:
        return 0
    per_cell = result.wall_s / result.cells if result.cells else 0.0
    console.print(
        f"{plural(result.cells, 'cell')} in {result.wall_s:.1f} s ({per_cell:.2f} s per cell): "
        f"{result.count('ok')} ok, {result.count('oom')} oom, {result.failed_cells} failed"
    )
    console.print(outcome_table(result))
    for line in worst_errors(result):
        console.print(f"  [red]{escape(line)}[/]")
    if result.missing:
        for line in missing_lines(result.missing):
            console.print(f"  [red]{escape(line)}[/]")
        print(
            f"utilscope: {plural(len(result.missing), 'planned cell')} {'has' if len(result.missing) == 1 else 'have'} "
            f"no row; {result.tally()}; {RESUME}",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    return EXIT_PARTIAL if result.failed_cells else 0


def report_migration(store: Store) -> None:
    if store.migration is not None:
        print(f"utilscope: {store.path}: {store.migration.describe()}", file=sys.stderr)


def cmd_report(args, console: Console) -> int:
    from utilscope.api import report

    result = report(args.db, args.out, not args.no_predicted, report_events(args.db, args.out))
    if result.prediction_failures:
        failures = result.prediction_failures
        print(f"utilscope: {plural(len(failures), 'model')} not predicted (first: {failures[0]})", file=sys.stderr)
    console.print(f"report: {result.path}")
    return 0


def report_events(db, out) -> ReportEvents:
    """What ``report`` tells, said on stderr while it works."""
    from utilscope.report.workflow import ReportEvents

    models = []

    def say(text: str) -> None:
        print(f"utilscope: {text}", file=sys.stderr, flush=True)

    def predicting(count: int, condition: tuple) -> None:
        models.append(count)
        say(
            f"predicting {plural(count, 'model')} on the GPUs without their rows "
            f"({' · '.join(map(str, condition[:3]))}, batch {condition[3]}; --no-predicted skips this)"
        )

    return ReportEvents(
        on_migration=say,
        on_predicting=predicting,
        on_group=lambda count, left: say(f"predicting {plural(count, 'model')} ({left} of {models[-1]} left)"),
        on_drawing=lambda: say(f"drawing the report of {db} into {out} (seconds)"),
    )


def cmd_export(args, console: Console) -> int:
    from utilscope.report.export import export_measurements
    from utilscope.survey.store import Store

    with Store(args.db, create=False) as store:
        report_migration(store)
        export_measurements(store, args.out)
    console.print(f"exported {args.db} to {args.out}")
    return 0


def cmd_merge(args, console: Console) -> int:
    """Exit 0 when merged without conflicts; 1 when some keys conflicted (each printed, the first value kept)."""
    merge_paths(args.inputs, args.out)  # the stores given twice, or the output among them: before anything heavy
    from utilscope.present.merge_view import merge_lines
    from utilscope.survey.merge import merge_stores

    result = merge_stores(args.inputs, args.out)
    for counts in result.inputs:
        if counts.migration is not None:
            print(f"utilscope: {counts.path}: {counts.migration.describe()}", file=sys.stderr)
    if result.migration is not None:
        print(f"utilscope: {result.output}: {result.migration.describe()}", file=sys.stderr)
    for line in merge_lines(result):
        style = "red" if line.startswith("conflict") else None
        console.print(escape(line), style=style, highlight=False, soft_wrap=True)
    return EXIT_PARTIAL if result.conflicts else 0
