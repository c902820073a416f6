"""``cache``: what utilscope caches (measured ceilings, fitted predictors), where, how large; ``--clear`` removes it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from utilscope.cache import KINDS, cache_root, cache_usage, clear_cache
from utilscope.present.json_text import strict_json
from utilscope.units import plural, si


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "cache", help="show what utilscope caches (ceilings, fitted predictors) and where; --clear removes it"
    )
    p.add_argument(
        "kind",
        nargs="?",
        default=None,
        choices=tuple(KINDS),
        help=f"one kind of cache: {', '.join(KINDS)} (default: every kind)",
    )
    p.add_argument(
        "--clear",
        action="store_true",
        help="remove the cached files (of KIND, else of every kind); other files in the folder stay "
        "(default: only show)",
    )
    p.add_argument("--json", action="store_true", help="print the kinds, folders, files and bytes as JSON")
    p.set_defaults(run=cmd_cache)


def cmd_cache(args, console: Console) -> int:
    kinds = () if args.kind is None else (args.kind,)
    usage = clear_cache(kinds) if args.clear else cache_usage(kinds)
    if args.json:
        print(strict_json({"root": str(cache_root()), "cleared": args.clear, "kinds": [u.to_dict() for u in usage]}))
        return 0
    if args.clear:
        files, size = sum(u.files for u in usage), sum(u.bytes for u in usage)
        kinds_text = ", ".join(u.kind for u in usage)
        console.print(
            f"removed {plural(files, 'file')} ({si(size, 'B')}) of {kinds_text} from {cache_root()}",
            highlight=False,
            soft_wrap=True,
        )
        return 0
    table = Table(
        title=f"utilscope's cache: {cache_root()} (UTILSCOPE_CACHE_DIR, else XDG_CACHE_HOME/utilscope, "
        "else ~/.cache/utilscope)"
    )
    for column in ("kind", "files", "size", "folder", "holds"):
        table.add_column(column, justify="right" if column in ("files", "size") else "left")
    for u in usage:
        table.add_row(u.kind, str(u.files), si(u.bytes, "B"), str(u.folder), u.description)
    console.print(table)
    return 0
