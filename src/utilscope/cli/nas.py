"""``nas sample|measure|table|fit|predict|search|analyze``: search spaces, their measurements and the predictor."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.console import Console

from utilscope.cli.survey import (
    add_executor_options,
    add_grid_options,
    check_executor_options,
    grid_request,
    render_result,
    report_migration,
)
from utilscope.cli.values import (
    BATCH,
    BATCHES,
    BUDGET,
    DEVICE,
    GPU,
    OBJECTIVE,
    PRECISION,
    SEED,
    STRATEGY,
    arch_file,
    checked,
    flops,
    output_file,
    output_folder,
    positive,
    read_by,
    store,
    whole,
)
from utilscope.errors import UsageError
from utilscope.files import (
    ARCH_FILE,
    DEVICE_PROFILE_FILE,
    LATENCY_TABLE,
    NAS_PROFILE_FILE,
    POOL_FILE,
    POOL_FOLDER,
)
from utilscope.limits import ARCHITECTURES_WHY, MAX_ARCHITECTURES, check_flops_band
from utilscope.nas.file_formats import read_predictor, read_table
from utilscope.nas.spaces import MODULES as SPACE_MODULES
from utilscope.nas.strategies import STRATEGIES
from utilscope.precision import MEASURED
from utilscope.predict.profile_format import read_profile
from utilscope.present.json_text import strict_json
from utilscope.units import plural

NAS_HELP = (
    "neural architecture search: sample a search space's architectures, measure them, time their layers "
    "(table), fit the GPU-free predictor, predict, analyze, search under a throughput floor"
)


def add_parsers(sub) -> None:
    nas = sub.add_parser("nas", help=NAS_HELP, description=NAS_HELP)
    verbs = nas.add_subparsers(dest="nas_command", required=True, metavar="VERB")
    _add_sample_measure(verbs)
    _add_table(verbs)
    _add_predict_analyze(verbs)
    _add_search(verbs)


def _space(text: str) -> str:
    """A search space's name (``nas.spaces.MODULES``, each registering the space of its name), checked while parsing
    with the registry's message."""
    if text not in SPACE_MODULES:
        raise UsageError(f"unknown search space {text!r}; use one of: {', '.join(SPACE_MODULES)}")
    return text


SPACE = checked(str, _space, "space")


def _space_help() -> str:
    return f"a registered search space: {', '.join(SPACE_MODULES)}"  # named without importing them: a fast start


def _add_sample_measure(verbs) -> None:
    p = verbs.add_parser("sample", help="seeded, deduplicated architectures of a search space, as JSON lines")
    p.add_argument("--space", type=SPACE, required=True, help=_space_help())
    p.add_argument(
        "-n",
        type=whole("-n", 1, MAX_ARCHITECTURES, ARCHITECTURES_WHY),
        default=100,
        help="how many distinct architectures (default: %(default)s)",
    )
    p.add_argument(
        "--seed",
        type=SEED,
        default=0,
        help="seed of numpy's generator: the same seed, space and -n give the same file on any machine "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--flops-min",
        type=flops("--flops-min"),
        default=None,
        help="lower FLOPs bound per sample, 2 x MACs (default: none)",
    )
    p.add_argument(
        "--flops-max",
        type=flops("--flops-max"),
        default=None,
        help="upper FLOPs bound per sample, 2 x MACs (default: none)",
    )
    p.add_argument(
        "--out",
        type=output_file(ARCH_FILE, (".jsonl",)),
        default="archs.jsonl",
        help="the .jsonl file to write, replaced if it exists; its folder is created if missing (default: %(default)s)",
    )
    p.set_defaults(run=cmd_sample)
    p = verbs.add_parser("measure", help="measure sampled architectures into a survey store (resumable)")
    p.add_argument("archs", type=arch_file(ARCH_FILE), help="a JSONL file written by `utilscope nas sample`")
    p.add_argument(
        "--limit",
        type=whole("--limit"),
        default=None,
        metavar="N",
        help="only the first N architectures (default: all)",
    )
    add_grid_options(p, default_batch="256", default_per_worker=25)
    p.set_defaults(run=cmd_measure)


def _add_table(verbs) -> None:
    p = verbs.add_parser("table", help="time every distinct layer of a space alone: the predictor's latency table")
    p.add_argument("--space", type=SPACE, required=True, help=_space_help())
    p.add_argument(
        "--archs",
        type=arch_file(ARCH_FILE),
        action="append",
        default=[],
        help="also time the layers of these JSONL files; repeatable (default: only the space's covering set of layers)",
    )
    p.add_argument("--batch", type=BATCHES, default="1,256", help="comma-separated batch sizes (default: %(default)s)")
    p.add_argument(
        "--precision", type=PRECISION, default="fp16", help=f"one of {', '.join(MEASURED)} (default: %(default)s)"
    )
    p.add_argument("--device", type=DEVICE, default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument(
        "--out",
        type=output_file(LATENCY_TABLE),
        required=True,
        help="the table's JSON file; entries it already holds are kept",
    )
    p.add_argument(
        "--no-cudnn-benchmark",
        dest="cudnn_benchmark",
        action="store_false",
        help="cuDNN's heuristic algorithms (as `nas measure --no-cudnn-benchmark`)",
    )
    add_executor_options(p)
    p.set_defaults(run=cmd_table)
    _add_fit(verbs)


def _add_fit(verbs) -> None:
    p = verbs.add_parser("fit", help="fit the GPU-free predictor: latency table + learned correction, as a profile")
    others = "the store's architectures of other spaces are left out"
    p.add_argument("--space", type=SPACE, required=True, help=f"{_space_help()}; {others}")
    measured = "a store with `utilscope nas measure` results of this space"
    p.add_argument("--db", type=store(writable=False), required=True, help=measured)
    p.add_argument(
        "--table",
        type=read_by(LATENCY_TABLE, read_table),
        required=True,
        action="append",
        help="the space's latency table from `utilscope nas table`; repeat to merge tables of the same "
        "configuration (e.g. one per batch size)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of the held-out split (default: %(default)s)")
    p.add_argument(
        "--prior-archs",
        type=whole("--prior-archs", 0, MAX_ARCHITECTURES, ARCHITECTURES_WHY),
        default=1000,
        metavar="N",
        help="the layer models' prior: the general model (`utilscope predict`) estimates the table's blocks "
        "and those of N sampled architectures; 0: no prior (default: %(default)s)",
    )
    p.add_argument(
        "--prior-profile",
        type=read_by(DEVICE_PROFILE_FILE, read_profile),
        default=None,
        metavar="FILE",
        help="the device profile of that prior (default: the one shipped for the table's GPU and "
        "precision; none shipped: no prior)",
    )
    p.add_argument("--out", type=output_file(NAS_PROFILE_FILE), required=True, help="the profile's JSON file")
    p.set_defaults(run=cmd_fit)


def _add_predict_analyze(verbs) -> None:
    p = verbs.add_parser("predict", help="predict latency, throughput and utilization without a GPU")
    p.add_argument("archs", type=arch_file(ARCH_FILE), help="a JSONL file of architectures, all of one space")
    p.add_argument(
        "--gpu",
        type=GPU,
        default=None,
        help="a GPU of the spec table (`utilscope devices`): by the NAS profile shipped for it and the space (h200), "
        "else by `utilscope predict`'s general model, transferred by datasheet (default: none; give --gpu or "
        "--profile)",
    )
    p.add_argument(
        "--profile",
        type=read_by(NAS_PROFILE_FILE, read_predictor),
        default=None,
        help="a profile from `utilscope nas fit`, checked against --gpu (default: the one shipped for --gpu)",
    )
    p.add_argument("--batch", type=BATCH, default=256, help="batch size (default: %(default)s)")
    p.add_argument(
        "--precision",
        type=PRECISION,
        default="fp16",
        help="as `utilscope predict --precision`: one a shipped device profile expresses (default: %(default)s)",
    )
    p.add_argument(
        "--backend",
        default="graph",
        choices=("graph", "eager"),
        help="graph, or eager: the same kernels launched by the host, its calls modelled from the shipped host "
        "profile (`utilscope predict --backend eager`; by the general model) (default: %(default)s)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the predictions as JSON instead of a table")
    fmt.add_argument("--csv", action="store_true", help="print the predictions as CSV instead of a table")
    p.set_defaults(run=cmd_predict)
    p = verbs.add_parser("analyze", help="FLOPs vs throughput, equal-FLOPs spread, what drives utilization")
    p.add_argument("db", type=store(writable=False), help="a store with `utilscope nas measure` results")
    p.add_argument("--json", action="store_true", help="print the analyses as JSON instead of text")
    p.set_defaults(run=cmd_analyze)


def _add_search(verbs) -> None:
    p = verbs.add_parser("search", help="throughput-constrained evolutionary search; --simulate compares strategies")
    p.add_argument("--space", type=SPACE, required=True, help=_space_help())
    p.add_argument(
        "--min-throughput",
        type=positive("--min-throughput", "samples/s"),
        required=True,
        help="samples/s every answer must reach",
    )
    p.add_argument("--budget", type=BUDGET, default=100, help="GPU measurements allowed (default: %(default)s)")
    p.add_argument(
        "--simulate",
        metavar="DB",
        type=store(writable=False),
        default=None,
        help="answer measurements from this store's dataset and compare the strategies, on a CPU "
        "(default: GPU mode, measuring on the GPU)",
    )
    p.add_argument(
        "--holdout-only",
        action="store_true",
        help="simulate on the predictor's held-out architectures only (none it was fitted on)",
    )
    _add_gpu_mode_options(p)
    objective = "what to maximize: flops, or a JSON file mapping architecture id -> value (default: %(default)s)"
    p.add_argument("--objective", type=OBJECTIVE, default="flops", help=objective)
    p.add_argument(
        "--batch",
        type=BATCH,
        default=256,
        help="the batch size throughput is measured and predicted at (default: %(default)s)",
    )
    p.add_argument(
        "--gpu",
        type=GPU,
        default="h200",
        help="the GPU: one with a shipped NAS profile (h200) is searched with measurements on this machine's GPU; "
        "any other GPU of the spec table is searched on predictions alone, `utilscope predict`'s general model "
        "transferred by datasheet, nothing measured (default: %(default)s)",
    )
    p.add_argument(
        "--profile",
        type=read_by(NAS_PROFILE_FILE, read_predictor),
        default=None,
        help="a predictor profile from `utilscope nas fit` (default: the one shipped for --gpu)",
    )
    p.add_argument(
        "--seed", type=SEED, default=0, help="seed of the evolution and of a sampled pool (default: %(default)s)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    p.set_defaults(run=cmd_search)


def _add_gpu_mode_options(p) -> None:
    """The search's options of GPU mode (no --simulate): where it measures, its candidates and what screens them."""
    p.add_argument(
        "--device",
        type=DEVICE,
        default=None,
        help="GPU mode: where to measure (default: the GPU; without one the search refuses, unless "
        "--device cpu asks for CPU measurements)",
    )
    p.add_argument(
        "--pool",
        type=arch_file(POOL_FILE),
        default=None,
        help="GPU mode: a JSONL file of the candidates (default: --pool-size of them sampled with --seed)",
    )
    p.add_argument(
        "--pool-size",
        type=whole("--pool-size", 1, MAX_ARCHITECTURES, ARCHITECTURES_WHY),
        default=1000,
        help="GPU mode: candidates sampled when there is no --pool (default: %(default)s)",
    )
    p.add_argument(
        "--work-dir",
        type=output_folder(POOL_FOLDER),
        default=None,
        metavar="DIR",
        help="GPU mode: keep the sampled pool file in this folder (default: a temporary folder, removed "
        "after the search; `nas sample -n POOL_SIZE --seed SEED` writes the same pool)",
    )
    p.add_argument(
        "--strategy",
        type=STRATEGY,
        default="predictor",
        help=f"GPU mode: what screens candidates before measuring, one of {', '.join(STRATEGIES)} "
        "(default: %(default)s)",
    )


def cmd_sample(args, console: Console) -> int:
    check_flops_band(args.flops_min, args.flops_max)  # before numpy is imported
    from utilscope.nas.sampler import sample_file
    from utilscope.nas.spaces import get_space

    space = get_space(args.space)
    start_s = time.perf_counter()

    def progress(found: int, draws: int) -> None:  # on stderr: every 10000 draws, a large or narrow sample's pace
        print(
            f"{found} of {args.n} distinct architectures after {draws} draws, {time.perf_counter() - start_s:.0f} s",
            file=sys.stderr,
        )

    archs = sample_file(args.out, space, args.n, args.seed, args.flops_min, args.flops_max, progress)
    flops = sorted(space.complexity(arch).flops for arch in archs)
    spread = f"{flops[0] / 1e9:.3f}" if flops[0] == flops[-1] else f"{flops[0] / 1e9:.3f}–{flops[-1] / 1e9:.3f}"
    console.print(
        f"{plural(len(archs), space.name + ' architecture')} (seed {args.seed}) in {args.out}; "
        f"FLOPs {spread} G per sample"
    )
    return 0


def cmd_measure(args, console: Console) -> int:
    check_executor_options(args)
    from utilscope.cli.survey_events import ConsoleEvents
    from utilscope.nas.sampler import measurement_models
    from utilscope.survey.workflow import survey_grid

    request = grid_request(measurement_models(args.archs, args.limit), args, frozenset())
    return render_result(survey_grid(request, ConsoleEvents(console, request)).result, console)


def cmd_table(args, console: Console) -> int:
    check_executor_options(args)
    if Path(args.out).exists():  # resumed: a file that is no latency table is said before anything heavy
        read_table(args.out)
    from utilscope.nas.latency import build_table
    from utilscope.survey.executors import executor_for

    start_s = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            console.print(f"{done}/{total} layers timed in {time.perf_counter() - start_s:.0f} s")

    executor = executor_for(args.executor, args.ray_address, args.gpu_types, args.device)
    table = build_table(
        args.out,
        args.space,
        args.batch,
        args.archs,
        args.precision,
        args.device,
        args.cudnn_benchmark,
        progress,
        executor,
    )
    console.print(
        f"{plural(len(table.entries), table.space + ' layer')} on {table.device} at batch "
        f"{','.join(map(str, sorted(table.batches())))} in {args.out}"
    )
    return 0


def cmd_fit(args, console: Console) -> int:
    """Every file is checked (the prior's device profile read) before the store is read and the predictor fitted."""
    from utilscope.nas.latency import load_tables
    from utilscope.nas.table_predictor import fit, measured_dataset
    from utilscope.predict.calibrate import DeviceProfile
    from utilscope.present.nas_view import render_fit
    from utilscope.survey.store import Store

    if args.prior_profile is not None:
        DeviceProfile.load(args.prior_profile)
    table = load_tables(args.table, args.space)
    with Store(args.db, create=False) as store:
        report_migration(store)
        archs, measurements = measured_dataset(store.frame(), args.space, store.model_records())
    predictor = fit(table, archs, measurements, args.seed, _prior(table, args, console))
    predictor.save(args.out)
    render_fit(predictor, args.out, args.seed, console)
    return 0


def _prior(table, args, console: Console) -> dict:
    """The general model's estimates of the space's blocks, or {} (no prior), said on the console."""
    from utilscope.nas.general import prior_estimates, shipped_general_profile

    profile = args.prior_profile or shipped_general_profile(table)
    if args.prior_archs == 0 or profile is None:
        reason = "--prior-archs 0" if args.prior_archs == 0 else f"no device profile shipped for {table.device}"
        console.print(f"layer models without the general prior ({reason})")
        return {}
    prior = prior_estimates(table, args.prior_archs, profile)
    console.print(
        f"general prior: {plural(len(prior), 'block')} estimated from the device profile {Path(profile).name}"
    )
    return prior


def cmd_predict(args, console: Console) -> int:
    from utilscope.nas.population import predict_population

    result = predict_population(args.archs, args.gpu, args.batch, args.precision, args.profile, args.backend)
    if args.json:
        print(strict_json(result.to_dict()))
    elif args.csv:
        print(result.frame.to_csv(index=False), end="")
    else:
        console.print(
            f"{plural(len(result.frame), result.space + ' architecture')} on {result.gpu}, batch {args.batch}, "
            f"{result.precision}, {result.backend} ({population_source(result)})"
        )
        if result.backend == "eager":
            console.print(
                f"eager {result.host}: latency_ms is one forward timed alone, samples_per_s forwards back to back"
                if result.host
                else "eager: no host profile is shipped: the GPU's time alone (`predict --backend eager` says more)"
            )
        console.print(result.frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def population_source(result) -> str:
    """How a population was predicted, in words (docs/nas.md says what is validated where)."""
    if result.predictor == "table":
        return "predicted by the GPU's NAS latency table and correction, validated on its measured networks"
    if result.transferred_from:
        return (
            f"predicted by transfer from the {result.transferred_from} device profile: the general model's "
            "numbers, not validated on this GPU's NAS measurements"
        )
    return "predicted by the general model of the GPU's own device profile"


def cmd_search(args, console: Console) -> int:
    from utilscope.nas.search_setup import (
        SearchRequest,
        search_by_prediction,
        search_on_device,
        searches_by_prediction,
        simulate,
    )
    from utilscope.present.nas_view import render_device_search, render_predicted_search, render_simulation
    from utilscope.survey.store import Store

    request = SearchRequest(
        args.space,
        args.min_throughput,
        args.budget,
        args.objective,
        args.batch,
        args.gpu,
        args.profile,
        args.seed,
        args.strategy,
    )
    if args.simulate is not None:
        with Store(args.simulate, create=False) as store:
            report_migration(store)
            frame, records = store.frame(), store.model_records()
        simulation = simulate(request, frame, records, args.holdout_only)
        if args.json:
            print(
                strict_json(
                    {
                        "pool_size": simulation.pool_size,
                        "dropped_without_table_entries": simulation.dropped,
                        "margins": simulation.margins,
                        "comparison": simulation.comparison.to_dict(orient="records"),
                    }
                )
            )
        else:
            render_simulation(request, simulation, console)
        return 0
    if searches_by_prediction(request):
        predicted = search_by_prediction(request, args.pool, args.pool_size)
        if args.json:
            print(strict_json(predicted.to_dict()))
        else:
            render_predicted_search(predicted, console)
        return 0
    search = search_on_device(request, args.pool, args.pool_size, args.work_dir, args.device)
    if args.json:
        print(strict_json(search.to_dict()))
    else:
        render_device_search(search, console)
    return 0


def cmd_analyze(args, console: Console) -> int:
    from utilscope.nas.analysis import analyze
    from utilscope.present.nas_view import render_analysis
    from utilscope.survey.store import Store

    with Store(args.db, create=False) as store:
        report_migration(store)
        results = analyze(store.frame(), store.model_records())
    if args.json:
        print(strict_json([result.to_dict() for result in results]))
    else:
        render_analysis(results, console)
    return 0
