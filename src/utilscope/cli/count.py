"""``count`` and ``models``: per-layer work of a model (no GPU needed), and the model names a glob matches."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from utilscope.cli.common import EXIT_PARTIAL
from utilscope.cli.values import BATCH, DTYPE, MODEL, MODEL_PATTERN, MODEL_SET, RES, TOP
from utilscope.errors import UsageError, UtilscopeError
from utilscope.models import sets as model_sets
from utilscope.models.sources import no_match
from utilscope.precision import COUNTED
from utilscope.present.json_text import strict_json
from utilscope.units import plural


def add_parsers(sub) -> None:
    p = sub.add_parser("count", help="per-layer FLOPs, bytes and params of a model (no GPU needed)")
    p.add_argument(
        "model",
        type=MODEL,
        help="torchvision:NAME, timm:NAME, path/file.py:factory, archs.jsonl:ID, a model file (model.onnx, "
        "model.pt2, a TorchScript model.pt; a torch.save pickle if UTILSCOPE_TRUST_PICKLE=1: docs/model-files.md), "
        "or a glob like 'timm:resnet*' or 'exports/*.onnx' (one summary row per model)",
    )
    p.add_argument("--batch", type=BATCH, default=1, help="batch size (default: %(default)s)")
    p.add_argument("--res", type=RES, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument(
        "--dtype",
        type=DTYPE,
        default="fp32",
        help=f"one of {', '.join(unit.value for unit in COUNTED)}: sets bytes per element (default: %(default)s)",
    )
    p.add_argument(
        "--top",
        type=TOP,
        default=None,
        metavar="K",
        help="show the K layers with the most FLOPs (default: 15; with --all-layers, every layer)",
    )
    p.add_argument(
        "--all-layers",
        action="store_true",
        help="every layer that does work, in execution order, with its shapes, other FLOPs and intensity",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the JSON contract instead of tables")
    fmt.add_argument("--csv", action="store_true", help="print per-layer rows as CSV")
    p.set_defaults(run=cmd_count)
    _add_models(sub)


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="list model names matching a glob, with their native resolution")
    p.add_argument(
        "pattern",
        type=MODEL_PATTERN,
        nargs="?",
        default="torchvision:*",
        help="a name or glob, e.g. 'timm:efficientnet*' or 'resnet*' (default: %(default)s)",
    )
    p.add_argument(
        "--set",
        dest="model_set",
        type=MODEL_SET,
        default=None,
        metavar="NAME",
        help=f"list a named model set with its native resolution and GFLOPs instead; one of "
        f"{', '.join(model_sets.set_names())} (default: none)",
    )
    p.add_argument(
        "--rows-of",
        default=None,
        metavar="TABLE",
        help="with --set: print MODEL@RES for each row of this timm benchmark table (data/public/"
        "timm-benchmark) whose model is in the set, sorted: what `survey --models-file` takes to measure "
        "the table's work (default: none)",
    )
    p.add_argument(
        "--with-reparam",
        action="store_true",
        help="with --rows-of: also MODEL+reparam@RES for each model timm can reparameterize (each model "
        "is built, without weights, to find out)",
    )
    p.add_argument(
        "--native-only", action="store_true", help="with --rows-of: only the rows at each model's native resolution"
    )
    p.set_defaults(run=cmd_models)


def cmd_count(args, console: Console) -> int:
    from utilscope.api import count
    from utilscope.models import zoo
    from utilscope.present.count_view import render_count

    names = zoo.model_names(args.model)
    if len(names) > 1:
        return count_many(names, args, console)
    result = count(names[0], batch=args.batch, resolution=args.res, dtype=args.dtype)
    if args.json:
        print(strict_json(result.to_dict()))
    elif args.csv:
        print(result.layers_frame().to_csv(index=False), end="")
    else:
        render_count(result, console, top=args.top, all_layers=args.all_layers)
    return 0


def count_many(names: list[str], args, console: Console) -> int:
    """One summary row per model; a model's failure is printed and the others still run."""
    import pandas as pd

    from utilscope.api import count
    from utilscope.present.count_view import summary_table

    results, failures = [], []
    for name in names:
        try:
            results.append(count(name, batch=args.batch, resolution=args.res, dtype=args.dtype))
        except UtilscopeError as exc:
            message = " ".join(str(exc).split())
            failures.append(message if name in message else f"{name}: {message}")  # named once
    if args.json:
        print(strict_json([r.to_dict() for r in results]))
    elif args.csv:
        frames = [r.layers_frame().assign(model=r.model) for r in results]
        print(pd.concat(frames).to_csv(index=False), end="")
    else:
        console.print(summary_table(results))
    for failure in failures:
        print(f"utilscope: error: {failure}", file=sys.stderr)
    return EXIT_PARTIAL if failures else 0


def cmd_models(args, console: Console) -> int:
    from utilscope.models import zoo

    if args.rows_of is not None and args.model_set is None:
        raise UsageError("--rows-of lists a table's rows of a model set: give --set NAME")
    if (args.with_reparam or args.native_only) and args.rows_of is None:
        raise UsageError(
            "--with-reparam and --native-only choose among the rows --rows-of lists: give --rows-of TABLE --set NAME"
        )
    if args.rows_of is not None:
        return list_rows_of(args.rows_of, args.model_set, args.with_reparam, args.native_only)
    if args.model_set is not None:
        return list_set(args.model_set)
    names = zoo.list_models(args.pattern)
    if not names:
        raise no_match(args.pattern)
    for name in names:
        print(f"{name}\t{zoo.native_resolution(zoo.parse_spec(name))}")
    return 0


def list_set(name: str) -> int:
    """A set's models, native resolution and GFLOPs (batch 1): from the timm table, else counted now."""
    from utilscope.api import count
    from utilscope.models import timm_sets

    members = model_sets.set_members(name)
    for model in members:
        facts = timm_sets.facts(model)
        if facts is None:
            result = count(model)
            facts = {"resolution": result.resolution, "gflops": result.total.flops / 1e9}
        print(f"{model}\t{facts['resolution']}\t{facts['gflops']:.3f}")
    print(f"{plural(len(members), 'model')}: {model_sets.set_description(name)}", file=sys.stderr)
    return 0


def list_rows_of(table: str, name: str, with_reparam: bool = False, native_only: bool = False) -> int:
    """``MODEL@RES`` per row of a timm benchmark table whose model is in set ``name``, once each, sorted by model and
    resolution (not in the table's order, which ranks its throughputs: the list says what was measured, not how
    fast); ``native_only``: only the rows at a model's native resolution; ``with_reparam``: then
    ``MODEL+reparam@RES`` for each of those models timm can reparameterize."""
    from utilscope.models import zoo
    from utilscope.survey.formats import timm_benchmark

    members = set(model_sets.set_members(name))
    rows = timm_benchmark.read_rows(Path(table))
    pairs = sorted({(row["model"], row["resolution"]) for row in rows if row["model"] in members})
    if native_only:
        pairs = [(model, res) for model, res in pairs if res == zoo.native_resolution(zoo.parse_spec(model))]
    if with_reparam:
        convertible = {
            model for model in dict(pairs) if zoo.reparameterizable(zoo.build_on_meta(zoo.parse_spec(model))[0])
        }
        pairs += [(f"{model}{zoo.REPARAM}", resolution) for model, resolution in pairs if model in convertible]
    for model, resolution in pairs:
        print(f"{model}@{resolution}")
    print(
        f"{plural(len(pairs), 'model')} at a resolution from {plural(len(rows), 'row')} of {Path(table).name} "
        f"(set {name})",
        file=sys.stderr,
    )
    return 0
