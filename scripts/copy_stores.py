"""Copy SQLite stores into a folder every PERIOD seconds while a GPU call writes them, until killed.

A call on the lent GPU machine brings back only what is under $OUT when it ends, and a machine can be taken back
before a script's last line: so the `h200_*.sh` survey scripts run this beside the survey. Each copy is SQLite's
online backup (consistent while the survey writes), written to ``NAME.part`` and renamed over ``NAME``.

    python3 scripts/copy_stores.py OUT STORE... [--period 60]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from contextlib import closing


def copy_store(store: str, out_dir: str) -> None:
    copy = os.path.join(out_dir, os.path.basename(store))
    with closing(sqlite3.connect(store)) as source, closing(sqlite3.connect(copy + ".part")) as target:
        source.backup(target)
    os.replace(copy + ".part", copy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--period", type=float, default=60.0, help="seconds between copies (default: %(default)s)")
    args = parser.parse_args()
    while True:
        time.sleep(args.period)
        for store in args.stores:
            if os.path.exists(store):
                copy_store(store, args.out_dir)


if __name__ == "__main__":
    main()
