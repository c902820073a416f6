"""``scripts/copy_stores.py``: what comes back from the lent GPU machine is a store that passes SQLite's
integrity_check, and a malformed one never replaces the last good copy."""

import sqlite3
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "copy_stores.py"


def _store(path: Path, rows: int) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("create table measurements (id integer primary key, model text)")
        db.execute("create index by_model on measurements (model)")
        db.executemany("insert into measurements (model) values (?)", [(f"model-{i:05d}",) for i in range(rows)])
    return path


def _copy(out: Path, store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--once", str(out), str(store)], capture_output=True, text=True)


def test_a_good_store_is_copied_and_a_malformed_one_keeps_the_last_good_copy(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    store = _store(tmp_path / "precisions.sqlite", 2000)
    assert _copy(out, store).returncode == 0
    with sqlite3.connect(out / "precisions.sqlite") as db:
        assert db.execute("select count(*) from measurements").fetchone() == (2000,)
    data = bytearray(store.read_bytes())
    data[4096 * 3 : 4096 * 3 + 200] = b"\xff" * 200  # a page of the table or its index overwritten
    store.write_bytes(bytes(data))
    copied = _copy(out, store)
    assert copied.returncode == 1 and "the last good copy is kept" in copied.stderr
    assert sorted(p.name for p in out.iterdir()) == ["precisions.sqlite"]  # no .part left behind
    with sqlite3.connect(out / "precisions.sqlite") as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        assert db.execute("select count(*) from measurements").fetchone() == (2000,)
