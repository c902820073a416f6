"""``gpus``: one model on every GPU a store has rows for, measured or published (``report.atlas``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from utilscope.cli.values import MODEL, input_file
from utilscope.errors import UsageError
from utilscope.files import RESULTS_STORE
from utilscope.present.json_text import strict_json
from utilscope.survey.formats.table import UNPUBLISHED_BATCH
from utilscope.units import plural

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_STORE = "results.sqlite"
CHECKOUT = Path(__file__).resolve().parents[3]  # a source checkout's root (src/utilscope/cli/gpus.py)
ATLAS = "data/public/atlas.sqlite"  # in a checkout: timm's and NVIDIA's tables, the H200's rows in timm's condition
SHIPPED_ATLAS = CHECKOUT / ATLAS
SHOWN = {
    "gpu": "GPU",
    "source": "source",
    "table": "table",
    "condition": "condition",
    "resolution": "res",
    "batch": "batch",
    "reparam": "reparam",
    "samples_per_s": "samples/s",
    "utilization": "FLOP util",
}


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "gpus",
        help="one model on every GPU a store has rows for (ours and published), or, without "
        "a model, the atlas's summary per GPU and conv class",
    )
    p.add_argument(
        "model",
        nargs="?",
        type=MODEL,
        default=None,
        help="a model id, e.g. timm:resnet50 (a bare name is taken as a timm model: the atlas's rows are timm's; "
        "count and profile try torchvision first) (default: none: the summary of every GPU in timm's condition)",
    )
    p.add_argument(
        "--db",
        type=input_file(RESULTS_STORE),
        default=None,
        help=f"the store, a survey's with published tables ingested (default: {DEFAULT_STORE} when there is one "
        f"here, else the atlas shipped in a checkout of utilscope, {ATLAS})",
    )
    p.add_argument(
        "--torch",
        metavar="VERSION",
        help="compare only the published tables of this torch version, e.g. 2.4; our measured rows are kept "
        "(default: none: per GPU, the table of the newest torch)",
    )
    p.add_argument(
        "--same-batch",
        action="store_true",
        help="pair two GPUs' rows only where they ran at one batch (default: each at its table's batch, counted "
        "as other_batch: the PRO 6000 ran at 2048, rows that ran out of memory at less)",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(run=cmd_gpus)


def cmd_gpus(args, console: Console) -> int:
    if args.same_batch and args.model is not None:  # before anything heavy is imported
        raise UsageError("--same-batch applies to the summary (no model); a model's rows each show their batch")
    from utilscope.report import atlas
    from utilscope.survey.store import Store

    db = args.db or default_store()
    with Store(db, create=False) as store:
        frame = atlas.of_torch(atlas.atlas_rows(store.frame(), store.published_frame()), args.torch)
    if args.model is None:
        gains = atlas.dynamo_gain(atlas.comparable(frame))
        return print_summary(atlas.main_rows(frame), gains, args.json, console, args.same_batch)
    rows = atlas.one_model(frame, args.model)
    if rows.empty:
        known = ", ".join(sorted(frame["gpu"].unique())) or "none"
        raise UsageError(
            f"{args.model}: no counted row in {db} (GPUs with rows: {known}; published rows are "
            "counted by `utilscope ingest`)"
        )
    if args.json:
        print(strict_json(rows.to_dict(orient="records")))
        return 0
    render_model(rows, console)
    return 0


def render_model(rows: pd.DataFrame, console: Console) -> None:
    """One table per condition (rows of two conditions are not the same work), in ``atlas.one_model``'s order; where
    two rows of a table would look alike (MLPerf's systems of one GPU), the name their source gives them is shown; a
    batch the source does not publish is "n/a"; where the rows hold models counted alike (``atlas.counted_alike``:
    another source's name for the network), each row's model."""
    from utilscope.present.profile_view import frame_table
    from utilscope.report import atlas

    models = list(dict.fromkeys(rows["model"]))
    model = models[0] if len(models) == 1 else f"{' = '.join(models)} (counted alike)"
    for condition, alike in rows.groupby("condition", sort=False):
        columns = [column for column in SHOWN if column != "condition"]
        if alike.duplicated(["gpu", "table", "resolution", "batch", "reparam"]).any():  # told apart by their label
            columns.insert(columns.index("table") + 1, "gpu_label")
        if len(models) > 1:
            columns.insert(0, "model")
        shown = alike[columns].rename(columns={**SHOWN, "gpu_label": "as published"})
        shown["FLOP util"] = shown["FLOP util"].map(lambda value: f"{value:.1%}")
        shown["samples/s"] = shown["samples/s"].map(lambda value: f"{value:,.0f}")
        shown["batch"] = shown["batch"].map(lambda value: "n/a" if value == UNPUBLISHED_BATCH else str(value))
        title = (
            f"{model}, {condition}, on {plural(alike['gpu'].nunique(), 'GPU')}: FLOP utilization against each GPU's "
            "datasheet peak for the row's precision; rows of another table or reparameterization are not alike"
        )
        console.print(frame_table(shown, title))
    differences = atlas.condition_differences(rows)
    if differences:
        console.print(f"Not the same work from one table to the next: they differ in {differences}.", soft_wrap=True)


def default_store() -> str:
    """``results.sqlite`` here when there is one, else the shipped atlas (said on stderr, so that a reader knows where
    the rows come from); a UsageError naming both when neither is (utilscope installed without its checkout's
    data)."""
    if Path(DEFAULT_STORE).exists():
        return DEFAULT_STORE
    if SHIPPED_ATLAS.is_file():
        print(
            f"utilscope: no {DEFAULT_STORE} here: reading the shipped atlas, {SHIPPED_ATLAS} (timm's, NVIDIA's and "
            "MLPerf's published rows, the H200's and H100's in timm's condition); --db STORE reads another",
            file=sys.stderr,
        )
        return str(SHIPPED_ATLAS)
    raise UsageError(
        f"no such file: {DEFAULT_STORE} (the default store), and no shipped atlas ({SHIPPED_ATLAS}: a checkout of "
        "utilscope has it); give --db STORE, e.g. a store `utilscope ingest` filled"
    )


def print_summary(rows, gains, as_json: bool, console: Console, same_batch: bool = False) -> int:
    """Per GPU and conv class: utilization quartiles; per GPU pair: utilization and speed ratios; rank correlation;
    per GPU and torch: compile over eager (``gains``: ``atlas.dynamo_gain``); ``same_batch``: pairs of rows run at
    one batch only."""
    from utilscope.present.profile_view import frame_table
    from utilscope.report import atlas

    if rows["gpu"].nunique() == 0:
        raise UsageError("no counted rows in timm's condition (amp, NCHW, eager) in this store")
    classes, pairs = atlas.class_summary(rows), atlas.pair_ratios(rows, same_batch)
    spearman = atlas.rank_correlation(rows, same_batch)
    dynamo = gains.groupby(["gpu", "torch", "source"])["gain"].describe()[["count", "25%", "50%", "75%"]].reset_index()
    swap_counts, swaps = atlas.rank_swaps(rows, same_batch)
    families = atlas.family_ratios(rows, same_batch=same_batch)
    if as_json:
        print(
            strict_json(
                {
                    "classes": classes.to_dict(orient="records"),
                    "pairs": pairs.to_dict(orient="records"),
                    "spearman": spearman.round(4).to_dict(),
                    "dynamo": dynamo.to_dict(orient="records"),
                    "swap_counts": swap_counts.to_dict(orient="records"),
                    "swaps": swaps.to_dict(orient="records"),
                    "families": families.to_dict(orient="records"),
                }
            )
        )
        return 0
    tables = ", ".join(f"{gpu}: {table}" for gpu, table in rows.groupby("gpu")["table"].first().items())
    console.print(frame_table(classes.round(4), f"FLOP utilization per GPU and conv class ({tables})"))
    if not pairs.empty:
        console.print(
            frame_table(pairs.round(3), f"the same rows on two GPUs: medians of bigger / smaller{BATCHES[same_batch]}")
        )
        console.print(
            frame_table(spearman.round(3).reset_index(), f"Spearman rank correlation of samples/s{BATCHES[same_batch]}")
        )
    if not dynamo.empty:
        console.print(frame_table(dynamo.round(3), "compile / eager samples/s on the same rows (quartiles)"))
    print_swaps_and_families(swap_counts, swaps, families, console, BATCHES[same_batch])
    return 0


SHOWN_SWAPS, SHOWN_FAMILIES = 10, 5
# said in the title of every table that pairs two GPUs' rows: which batches were paired
BATCHES = {
    False: "; each GPU's rows at its table's batch (other_batch: shared rows run at different batches on the two)",
    True: "; only rows run at one batch on both GPUs (--same-batch)",
}


def print_swaps_and_families(swap_counts, swaps, families, console: Console, batches: str) -> None:
    """Equal-FLOP rank swaps per GPU pair (and the largest), and per pair the families that keep the most and the
    least of their utilization on the bigger GPU; ``batches``: which batches were paired (``BATCHES``)."""
    import pandas as pd

    from utilscope.present.profile_view import frame_table
    from utilscope.report import atlas

    if swap_counts.empty:
        return
    console.print(
        frame_table(
            swap_counts.round(3),
            f"rows within {atlas.FLOPS_ALIKE:.0%} in FLOPs that the two GPUs "
            f"order differently (each by more than {atlas.SWAP_MARGIN:.0%}){batches}",
        )
    )
    if not swaps.empty:
        console.print(
            frame_table(
                swaps.head(SHOWN_SWAPS).round(3),
                f"the {SHOWN_SWAPS} largest swaps (swing: the quotient of the two GPUs' speed ratios)",
            )
        )
    for (small, big), part in families.groupby(["smaller", "bigger"], sort=False):
        shown = pd.concat([part.head(SHOWN_FAMILIES), part.tail(SHOWN_FAMILIES)]).drop_duplicates()
        title = f"families on {big} against {small}: the {SHOWN_FAMILIES} keeping the most and the least utilization"
        console.print(frame_table(shown.drop(columns=["smaller", "bigger"]).round(3), title))
