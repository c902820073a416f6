"""Whether a file brought back from the lent GPU machine keeps everything the repository held: run it before the
returned copy replaces the repository's. For a results store (``.sqlite``): SQLite's integrity_check on the new copy,
then every row of the old one's measurements and op-class tables found in the new one by its primary key with every
column unchanged (its numbers, status and ``measured_at`` included). For a device profile (``.json``): every config
the old one timed is in the new one, the same config with the same latency. Prints what the new copy adds (rows per
device, precision and backend; configs per kind) and exits 0; 1 when a row or config was changed or lost (the first
ones named) or the new store fails its check; 2 on a usage error. OLD may be a path that does not exist yet (a first
copy): everything in NEW is then added.

    python3 scripts/check_kept.py OLD NEW
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.predict.profile_format import read_profile
from utilscope.survey.schema import PRIMARY_KEYS
from utilscope.survey.store_files import read_only_uri

TABLES = ("measurements", "op_classes")  # the measured tables; claims are a survey's leases, gone once it ends
SHOWN = 3  # the changed or lost rows named


def store_rows(path: Path, table: str) -> dict[tuple, dict]:
    """The table's rows by primary key, each as {column: value}; {} for a missing file or table."""
    if not path.exists():
        return {}
    with closing(sqlite3.connect(read_only_uri(path), uri=True)) as db:
        if not db.execute("select 1 from sqlite_master where type = 'table' and name = ?", (table,)).fetchone():
            return {}
        cursor = db.execute(f"select * from {table}")  # noqa: S608 (a table name of TABLES)
        names = [column[0] for column in cursor.description]
        key = PRIMARY_KEYS[table]
        return {tuple(row[names.index(k)] for k in key): dict(zip(names, row, strict=True)) for row in cursor}


def integrity(path: Path) -> str:
    with closing(sqlite3.connect(read_only_uri(path), uri=True)) as db:
        return db.execute("pragma integrity_check").fetchone()[0]


def compare(old: dict, new: dict) -> tuple[list, list]:
    """The keys of ``old`` whose entry ``new`` changed, and those it lost."""
    lost = [key for key in old if key not in new]
    changed = [key for key in old if key in new and new[key] != old[key]]
    return changed, lost


def check_store(old: Path, new: Path) -> bool:
    status = integrity(new)
    print(f"{new}: integrity_check {status}")
    kept = status == "ok"
    for table in TABLES:
        before, after = store_rows(old, table), store_rows(new, table)
        changed, lost = compare(before, after)
        added = Counter(
            (row.get("device"), row.get("precision"), row.get("backend"))
            for key, row in after.items()
            if key not in before
        )
        print(f"{table}: {len(before)} rows before, {len(after)} now; {len(changed)} changed, {len(lost)} lost")
        for (device, precision, backend), count in sorted(added.items(), key=str):
            print(f"  + {count} rows: {device}, {precision}, {backend}")
        for key in (changed + lost)[:SHOWN]:
            print(f"  {'changed' if key in changed else 'lost'}: {key}")
        kept = kept and not changed and not lost
    return kept


def check_profile(old: Path, new: Path) -> bool:
    before = read_profile(old) if old.exists() else {"configs": {}, "latency_ms": {}}
    after = read_profile(new)
    entries = {
        name: {key: (profile["configs"].get(key), ms) for key, ms in profile["latency_ms"].items()}
        for name, profile in (("before", before), ("after", after))
    }
    changed, lost = compare(entries["before"], entries["after"])
    added = Counter(key.split("|")[0].removeprefix("kind=") for key in entries["after"] if key not in entries["before"])
    print(
        f"{new}: {after.get('device')}, {after.get('precision')}, {after.get('memory_format')}, sample version "
        f"{after.get('sample_version')}; {len(entries['before'])} configs before, {len(entries['after'])} now; "
        f"{len(changed)} changed, {len(lost)} lost; {len(after.get('failed', {}))} failed"
    )
    if added:
        print("  + " + ", ".join(f"{count} {kind}" for kind, count in sorted(added.items())))
    for key in (changed + lost)[:SHOWN]:
        print(f"  {'changed' if key in changed else 'lost'}: {key}")
    return not changed and not lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    suffix = args.new.suffix
    if suffix not in (".sqlite", ".json") or not args.new.is_file():
        print(
            f"check_kept.py: {args.new}: not a results store (.sqlite) or device profile (.json) file", file=sys.stderr
        )
        return 2
    try:
        kept = check_store(args.old, args.new) if suffix == ".sqlite" else check_profile(args.old, args.new)
    except (sqlite3.DatabaseError, UsageError, KeyError) as error:
        print(f"check_kept.py: {args.new}: cannot be read ({error})", file=sys.stderr)
        return 1
    return 0 if kept else 1


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a reader that goes away (`| head`) ends it quietly
    sys.exit(main())
