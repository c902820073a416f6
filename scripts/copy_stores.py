"""Copy SQLite stores into a folder every PERIOD seconds while a GPU call writes them, until killed.

A call on the lent GPU machine brings back only what is under $OUT when it ends, and a machine can be taken back
before a script's last line: so the `h200_*.sh` survey scripts run this beside the survey. Each copy is SQLite's
online backup (consistent while the survey writes), written to ``NAME.part``, checked with SQLite's
``integrity_check`` and renamed over ``NAME`` only if it passes: a malformed store (the lent machines' file system
returned one once, after "disk I/O error"s when a survey was stopped) never replaces the last good copy.
``--once`` copies once and exits (non-zero if a copy failed its check): the scripts' last copy, made after the
survey stopped. A store that fails it there is also kept as its files are (``NAME.raw.sqlite`` and its write-ahead
log beside it as ``NAME.raw.sqlite-wal``): on the lent machines a survey's rows once stayed in the log that the
copying process could not read, and the last good copy held 4 of its 34 cells; SQLite's ``.recover`` on the CPU
machine reads what the raw files hold.

    python3 scripts/copy_stores.py OUT STORE... [--period 60 | --once]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from contextlib import closing


def copy_store(store: str, out_dir: str) -> None:
    """Copy STORE into OUT_DIR under its name; raises sqlite3.DatabaseError, keeping the earlier copy, if malformed."""
    copy = os.path.join(out_dir, os.path.basename(store))
    part = copy + ".part"
    try:
        with closing(sqlite3.connect(store)) as source, closing(sqlite3.connect(part)) as target:
            source.backup(target)
            status = target.execute("pragma integrity_check").fetchone()[0]
        if status != "ok":
            raise sqlite3.DatabaseError(f"integrity_check: {status}")
    except sqlite3.DatabaseError as error:
        if os.path.exists(part):
            os.remove(part)
        raise sqlite3.DatabaseError(f"{store}: {error}; the last good copy is kept") from error
    os.replace(part, copy)


def keep_raw(store: str, out_dir: str) -> list[str]:
    """The store's file and its write-ahead log as they are, into OUT_DIR as ``STEM.raw.sqlite`` (and ``-wal``, so
    that SQLite reads the log with the file); the names written."""
    stem, _ = os.path.splitext(os.path.basename(store))
    raw = os.path.join(out_dir, stem + ".raw.sqlite")
    written = []
    for source, target in ((store, raw), (store + "-wal", raw + "-wal")):
        if os.path.exists(source):
            shutil.copyfile(source, target)
            written.append(target)
    return written


def copy_all(stores: list[str], out_dir: str, raw_on_failure: bool = False) -> bool:
    """One copy of each existing store; False (with the reason on stderr) if any failed, and (``raw_on_failure``)
    its raw files kept beside (``keep_raw``)."""
    copied = True
    for store in stores:
        if not os.path.exists(store):
            continue
        try:
            copy_store(store, out_dir)
        except sqlite3.DatabaseError as error:
            kept = keep_raw(store, out_dir) if raw_on_failure else []
            also = f"; its raw files kept as {', '.join(os.path.basename(k) for k in kept)}" if kept else ""
            print(f"copy_stores.py: {error}{also}", file=sys.stderr)
            copied = False
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--period", type=float, default=60.0, help="seconds between copies (default: %(default)s)")
    parser.add_argument("--once", action="store_true", help="copy once now and exit")
    args = parser.parse_args()
    if args.once:
        sys.exit(0 if copy_all(args.stores, args.out_dir, raw_on_failure=True) else 1)
    while True:
        time.sleep(args.period)
        copy_all(args.stores, args.out_dir)


if __name__ == "__main__":
    main()
