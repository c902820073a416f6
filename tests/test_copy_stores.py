"""``scripts/copy_stores.py``: what comes back from the lent GPU machine is a store that passes SQLite's
integrity_check, and a malformed one never replaces the last good copy."""

import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import load_script

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
    assert "its raw files kept as precisions.raw.sqlite" in copied.stderr
    # no .part left behind; the malformed store's file kept as it is, for SQLite's .recover
    assert sorted(p.name for p in out.iterdir()) == ["precisions.raw.sqlite", "precisions.sqlite"]
    assert (out / "precisions.raw.sqlite").read_bytes() == store.read_bytes()
    with sqlite3.connect(out / "precisions.sqlite") as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        assert db.execute("select count(*) from measurements").fetchone() == (2000,)


def test_a_store_whose_rows_sit_in_its_write_ahead_log_comes_back_with_the_log(tmp_path):
    """The raw files of a store that fails its check: the file and its log side by side, so that opening the copy
    reads the rows only the log holds."""
    copy_stores = load_script("scripts/copy_stores.py")
    store = _store(tmp_path / "survey.sqlite", 10)
    writer = sqlite3.connect(store)
    writer.execute("pragma journal_mode = wal")
    writer.execute("pragma wal_autocheckpoint = 0")
    writer.executemany("insert into measurements (model) values (?)", [(f"late-{i}",) for i in range(5)])
    writer.commit()  # the 5 rows are in survey.sqlite-wal only; the writer stays open, as a stopped survey's might
    out = tmp_path / "out"
    out.mkdir()
    kept = copy_stores.keep_raw(str(store), str(out))
    assert [Path(k).name for k in kept] == ["survey.raw.sqlite", "survey.raw.sqlite-wal"]
    with sqlite3.connect(out / "survey.raw.sqlite") as db:
        assert db.execute("select count(*) from measurements").fetchone() == (15,)
    writer.close()
