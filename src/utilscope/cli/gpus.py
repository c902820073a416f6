"""``gpus``: one model on every GPU a store has rows for, measured or published (``report.atlas``)."""

from __future__ import annotations

from rich.console import Console

from utilscope.errors import UsageError
from utilscope.present.json_text import strict_json
from utilscope.present.profile_view import frame_table
from utilscope.report import atlas
from utilscope.survey.store import Store

SHOWN = {"gpu": "GPU", "source": "source", "table": "table", "condition": "condition", "resolution": "res",
         "batch": "batch", "reparam": "reparam", "samples_per_s": "samples/s", "utilization": "FLOP util"}  # fmt: skip


def add_parsers(sub) -> None:
    p = sub.add_parser("gpus", help="one model on every GPU a store has rows for: ours (measured) and published")
    p.add_argument("model", help="a model id, e.g. timm:resnet50 (a bare name is a timm model)")
    p.add_argument("--db", default="results.sqlite",
                   help="the store, a survey's with published tables ingested (default: %(default)s)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(run=cmd_gpus)


def cmd_gpus(args, console: Console) -> int:
    with Store(args.db, create=False) as store:
        frame = atlas.atlas_rows(store.frame(), store.published_frame())
    rows = atlas.one_model(frame, args.model)
    if rows.empty:
        known = ", ".join(sorted(frame["gpu"].unique())) or "none"
        raise UsageError(f"{args.model}: no counted row in {args.db} (GPUs with rows: {known}; published rows are "
                         "counted by `utilscope ingest`)")  # fmt: skip
    if args.json:
        print(strict_json(rows.to_dict(orient="records")))
        return 0
    shown = rows[list(SHOWN)].rename(columns=SHOWN)
    shown["FLOP util"] = shown["FLOP util"].map(lambda value: f"{value:.1%}")
    shown["samples/s"] = shown["samples/s"].map(lambda value: f"{value:,.0f}")
    title = (
        f"{rows['model'].iloc[0]} on {rows['gpu'].nunique()} GPUs: FLOP utilization against each GPU's datasheet "
        "peak for the row's precision; rows of another condition, table or reparameterization are not alike"
    )
    console.print(frame_table(shown, title))
    return 0
