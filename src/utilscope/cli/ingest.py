"""``ingest``: others' published measurements into a store, as rows of their own (``survey.published``)."""

from __future__ import annotations

from rich.console import Console

from utilscope.cli.progress import progress
from utilscope.cli.values import checked, store
from utilscope.limits import check_jobs, cpu_cores
from utilscope.survey.formats import formats, read_tables
from utilscope.survey.published import JOBS_WHY
from utilscope.units import plural


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "ingest", help="bring published benchmark tables (timm's, NVIDIA's) into a store, with their provenance"
    )
    known = formats()
    p.add_argument(
        "format",
        choices=known.names(),
        help="the tables' format: " + "; ".join(f"{name}: {known[name].description}" for name in known.names()),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="the tables (never modified)")
    p.add_argument(
        "--db",
        type=store(writable=True),
        default="results.sqlite",
        help="the store, created if missing; ingesting a table again adds nothing (default: %(default)s)",
    )
    p.add_argument(
        "--no-count",
        dest="count",
        action="store_false",
        help="store the rows only; by default each row's model is also counted by utilscope's engine at "
        "the row's resolution (FLOPs, bytes; rows left uncounted by an interrupted run are counted by "
        "the next)",
    )
    p.add_argument(
        "--jobs",
        type=checked(int, lambda jobs: check_jobs(jobs, JOBS_WHY), "int"),
        default=min(4, cpu_cores()),
        help="processes counting models at a time, one thread each (default: %(default)s, this machine's "
        "cores up to 4)",
    )
    p.set_defaults(run=cmd_ingest)


SAID_LEFT_OUT = 5  # the rows a file left out that are named one by one; the rest are counted


def left_out_line(name: str, kept_out: list[str]) -> str:
    """One line: how many rows of the file its format kept out of the store, the first ``SAID_LEFT_OUT`` with why."""
    more = len(kept_out) - SAID_LEFT_OUT
    tail = f"; and {plural(more, 'more row')}" if more > 0 else ""
    return f"{name}: {plural(len(kept_out), 'row')} left out: {'; '.join(kept_out[:SAID_LEFT_OUT])}{tail}"


def cmd_ingest(args, console: Console) -> int:
    read_tables(args.format, args.files)  # a bad table is said before anything heavy is imported
    from utilscope.api import ingest

    def ingested(result) -> None:  # before counting, which takes minutes for a large table
        for name, rows, added in result.files:
            said = f"{plural(added, 'row')} added" if added else "ingested before: nothing added"
            console.print(f"{name}: {plural(rows, 'row')}, {said}", highlight=False, soft_wrap=True)
            kept_out = [why for file, why in result.left_out if file == name]
            if kept_out:
                console.print(left_out_line(name, kept_out), highlight=False, soft_wrap=True)
        console.print(f"{plural(result.added, 'published row')} added to {args.db}", highlight=False, soft_wrap=True)

    if not args.count:
        ingest(args.files, args.db, False, args.jobs, on_ingested=ingested, format_name=args.format)
        return 0
    with progress(console, "counting", "models") as update:
        result = ingest(
            args.files,
            args.db,
            True,
            args.jobs,
            on_ingested=ingested,
            on_model=lambda done, total, _: update(done, total),
            format_name=args.format,
        )
    counted_text = f"counted {plural(result.counted, 'model')} at a resolution and precision of their rows"
    console.print(
        f"{counted_text} ({result.failed} could not be built or counted: rows kept, the reason in count_status)",
        highlight=False,
    )
    said = f"{plural(result.decided, 'row')} of reparameterizable models: whether the table's run reparameterized "
    console.print(said + "them decided from its GMACs (reparam yes / no)", highlight=False)
    render_disagreements(result.disagreements, console)
    return 0


def render_disagreements(apart, console: Console, most: int = 10) -> None:
    """Where the tables' GMACs and our counts disagree (beyond 5% and timm's rounding), the largest first."""
    console.print(
        f"{plural(len(apart), 'model')} (at a resolution) whose published GMACs differ from our FLOPs / 2 "
        "by more than 5%" + (":" if len(apart) else ""),
        highlight=False,
    )
    for row in apart.head(most).itertuples():
        console.print(
            f"  {row.model} {row.resolution}px: published {row.gmacs:g} GMACs, ours {row.ours_gmacs:.3g} "
            f"({row.ratio:.2f}x)",
            highlight=False,
        )
    if len(apart) > most:
        console.print(f"  ... and {len(apart) - most} more", highlight=False)
