"""Results store: creation, upserts, done keys, bad rows, concurrent writers, exports, and files it must refuse."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import asdict
from enum import Enum

import numpy as np
import pandas as pd
import pytest

from utilscope.errors import StorageError, UsageError
from utilscope.report.export import export_table, read_export
from utilscope.survey.schema import GPU_THREADS, KEY_COLUMNS, SCHEMA_VERSION, VALUE_COLUMNS, CellKey, Configuration
from utilscope.survey.store import APPLICATION_ID, Store, StoreError

CONFIG = Configuration(
    "NVIDIA H200", "channels_last", "2.11.0+cu130", "91900", "580.159.04", True, None, False, GPU_THREADS
)
CELL = CellKey("resnet50", 224, 8, "fp16", "graph", CONFIG)
KEY = CELL.columns()  # the key as columns: a row may name its key either way


def make_row(**overrides) -> dict:
    """A full ok row: every value column set, floats that do not print short (to test exact round-trips)."""
    row = {
        **KEY,
        "family": "resnet",
        "flops_per_sample": 8_178_000_000,
        "params": 25_557_032,
        "status": "ok",
        "latency_ms": 1 / 3,
        "samples_per_s": 24000.123456789012,
        "achieved_tflops": 196.27,
        "utilization": 0.19837,
        "utilization_vs_ceiling": 0.3,
        "peak_tflops": 989.4,
        "peak_source": "datasheet: NVIDIA H200",
        "achieved_gbs": 1234.5,
        "bandwidth_utilization": 0.25,
        "bytes_model": "fused",
        "nvml_util": 97.5,
        "cv": 0.004,
        "unstable": False,
        "iters_per_sample": 12,
        "cuda_graph": True,
        "notes": ["a note, with a comma", 'and "quotes"'],
        "environment": {"torch": "2.11.0", "cudnn": 91900, "driver": None, "nested": {"x": [1, 2]}},
        "measured_at": "2026-01-02T03:04:05+00:00",
        "wall_s": 2.5,
    }
    row.update(overrides)
    return row


def file_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# --- creating, reopening, upserting ------------------------------------------------------------------------------


def test_a_missing_store_is_created_with_its_folders_and_reopens_with_its_rows(tmp_path):
    path = tmp_path / "deep" / "er" / "results.sqlite"
    with Store(path) as store:
        assert store.frame().empty
        assert list(store.frame().columns) == [*KEY_COLUMNS, "software", *VALUE_COLUMNS]
        store.add(make_row())
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with Store(path) as store:
        frame = store.frame()
    assert len(frame) == 1
    assert frame.loc[0, "notes"] == make_row()["notes"]
    assert frame.loc[0, "environment"] == make_row()["environment"]
    assert frame["cuda_graph"].dtype == bool and frame.loc[0, "cuda_graph"]
    assert frame.loc[0, "latency_ms"] == 1 / 3
    assert frame.loc[0, "software"] == "torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04"
    assert pd.isna(frame.loc[0, "cudnn_benchmark_limit"]) and frame.loc[0, "cudnn_benchmark"]


def test_a_row_names_its_key_as_a_cell_key_or_as_columns(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.add({"key": CELL, "status": "ok", "latency_ms": 1.0})
        store.add({**KEY, "status": "ok", "latency_ms": 2.0})  # the same cell: replaces the first
        limited = CellKey(
            "resnet50", 224, 8, "fp16", "graph", Configuration(**{**asdict(CONFIG), "cudnn_benchmark_limit": 3})
        )
        store.add({"key": limited, "status": "ok"})
        assert store.done_keys() == {CELL, limited}
        frame = store.frame()
    assert list(frame["latency_ms"].fillna(-1)) == [2.0, -1] and frame.loc[1, "cudnn_benchmark_limit"] == 3
    assert frame.loc[1, "software"].endswith(" · cudnn.benchmark_limit 3")


def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.touch()
    with Store(path) as store:
        store.add(make_row())
        assert len(store.frame()) == 1


def test_a_row_for_a_measured_key_replaces_it_whole(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.add(make_row())
        store.add(make_row(batch=16))
        store.add({**KEY, "status": "oom"})  # the same key again: every value column replaced, defaults included
        frame = store.frame()
    assert len(frame) == 2
    row = frame[frame["batch"] == 8].iloc[0]
    assert row["status"] == "oom"
    assert pd.isna(row["latency_ms"]) and pd.isna(row["flops_per_sample"])
    assert row["notes"] == [] and row["environment"] == {} and not row["cuda_graph"] and row["peak_source"] == ""
    assert row["measured_at"].endswith("+00:00")  # filled in when not given
    assert frame[frame["batch"] == 16].iloc[0]["status"] == "ok"


def test_numpy_scalars_are_accepted(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.add(make_row(batch=np.int64(32), latency_ms=np.float32(2.5), unstable=np.bool_(True)))
        frame = store.frame()
    assert frame.loc[0, "batch"] == 32 and frame.loc[0, "latency_ms"] == 2.5 and frame.loc[0, "unstable"]


def test_done_keys_count_errors_as_done_only_when_they_are_not_retried(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.add(make_row(batch=1))
        store.add(make_row(batch=8, status="oom"))
        store.add(make_row(batch=32, status="error: RuntimeError: cuDNN failed"))
        ok, oom, error = (CellKey("resnet50", 224, b, "fp16", "graph", CONFIG) for b in (1, 8, 32))
        assert store.done_keys() == {ok, oom}
        assert store.done_keys(retry_errors=True) == {ok, oom}
        assert store.done_keys(retry_errors=False) == {ok, oom, error}
        store.add(make_row(batch=32))  # the retried cell succeeded
        assert store.done_keys() == {ok, oom, error}


@pytest.mark.parametrize(
    ("row", "named"),
    [
        ({k: v for k, v in make_row().items() if k not in ("batch", "device")}, ["batch", "device"]),
        (make_row(latency=1.0, gpu="x"), ["gpu", "latency"]),
        ({k: v for k, v in make_row().items() if k != "status"}, ["status"]),
        (make_row(status="failed"), ["status", "ok", "oom"]),
        (make_row(batch="8"), ["batch"]),
        (make_row(model=None), ["model"]),
        (make_row(latency_ms="fast"), ["latency_ms"]),
        (make_row(notes="one note"), ["notes"]),
        (make_row(unstable="no"), ["unstable"]),
    ],
    ids=["missing-keys", "unknown", "no-status", "bad-status", "str-batch", "none-key", "str-float", "notes", "bool"],
)
def test_bad_rows_raise_naming_the_columns_and_write_nothing(tmp_path, row, named):
    with Store(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError) as info:
            store.add(row)
        assert store.frame().empty
    for name in named:
        assert name in str(info.value)


def test_op_classes_of_a_key_are_replaced_together(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.add_op_classes(
            CELL,
            [
                {"op_class": "conv", "flop_share": 0.9, "time_share": 0.6, "time_ms": 0.6},
                {"op_class": "norm", "flop_share": 0.05, "time_share": 0.3, "time_ms": 0.3},
            ],
        )
        store.add_op_classes(CellKey.from_columns({**KEY, "batch": 16}), [{"op_class": "conv", "flop_share": 1.0}])
        pool = Enum("Kind", {"POOL": "pool"}, type=str).POOL  # a (str, Enum) member is stored as its value
        store.add_op_classes(CELL, [{"op_class": pool, "flop_share": 0.1, "time_share": 0.1, "time_ms": 0.01}])
        frame = store.op_class_frame()
        assert list(zip(frame["batch"], frame["op_class"], strict=True)) == [(8, "pool"), (16, "conv")]
        assert pd.isna(frame.loc[1, "time_ms"])
        with pytest.raises(ValueError, match="twice"):
            store.add_op_classes(CELL, [{"op_class": "conv"}, {"op_class": "conv"}])
        with pytest.raises(ValueError, match="share"):
            store.add_op_classes(CELL, [{"op_class": "conv", "share": 1.0}])
        with pytest.raises(ValueError, match="CellKey"):
            store.add_op_classes(KEY, [])
        assert len(store.op_class_frame()) == 2  # the failed calls changed nothing


def test_a_closed_store_is_an_error(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.add(make_row())


# --- two surveys writing one store ------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from utilscope.survey.schema import CellKey, Configuration
    from utilscope.survey.store import Store

    path, name = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    with Store(path) as store:  # both processes create the (missing) file at once, too
        config = Configuration("cpu", "channels_last", "2.11", "", "", True, None, False, 1)
        for batch in range(200):
            key = CellKey(name, 224, batch, "fp32", "eager", config)
            store.add({"key": key, "status": "ok", "latency_ms": float(batch)})
    """
)


def test_two_processes_write_one_store_at_once(tmp_path):
    path = tmp_path / "shared" / "results.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("survey-a", "survey-b")
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        _, stderr = writer.communicate()
        assert writer.returncode == 0, stderr
        assert "locked" not in stderr
    with Store(path) as store:
        frame = store.frame()
        assert len(store.done_keys()) == 400
    assert len(frame) == 400
    assert frame.groupby("model").size().to_dict() == {"survey-a": 200, "survey-b": 200}
    assert sorted(frame[frame["model"] == "survey-b"]["latency_ms"]) == [float(b) for b in range(200)]


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from utilscope.survey.schema import CellKey, Configuration
    from utilscope.survey.store import Store

    with Store(sys.argv[1]) as store:  # one commit per row, as a survey stores each cell; skips the stored ones
        config = Configuration("cpu", "channels_last", "2.11", "", "", True, None, False, 1)
        done = store.done_keys()
        for batch in range(1, 1001):
            key = CellKey("killed", 224, batch, "fp32", "eager", config)
            if key not in done:
                store.add({"key": key, "status": "ok", "latency_ms": float(batch)})
    """
)


def test_a_writer_killed_with_sigkill_mid_write_keeps_every_committed_row_once_and_resumes(tmp_path):
    """SIGKILL while a process commits row after row (so most likely inside one): the store opens whole (SQLite's
    journal rolls the torn transaction back), holds each committed row once, and the same writer run again stores
    exactly the rows left."""
    import signal
    import sqlite3
    import time

    path = tmp_path / "results.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and writer.poll() is None:
        if path.exists() and _rows(path) >= 50:
            break
        time.sleep(0.02)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert writer.returncode == -signal.SIGKILL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with Store(path, create=False) as store:
        kept = sorted(store.frame()["batch"])
    assert 50 <= len(kept) < 1000 and kept == list(range(1, len(kept) + 1))  # each committed row once, in order
    finished = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], env=env, capture_output=True)
    assert finished.returncode == 0, finished.stderr
    with Store(path, create=False) as store:
        assert sorted(store.frame()["batch"]) == list(range(1, 1001))


def _rows(path) -> int:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.1)) as conn:
            return conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_truncated_store_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    path = tmp_path / "results.sqlite"
    with filled_store(path) as store:
        for batch in range(1000, 1400):  # several pages
            store.add(make_row(batch=batch))
    data = file_bytes(path)
    path.write_bytes(data[: len(data) // 2])
    assert_refused(path, "corrupt")


@pytest.mark.parametrize("verb", ["report {}", "export {} rows.csv", "gpus timm:resnet50 --db {}"])
def test_the_cli_refuses_a_truncated_store_in_one_line_exit_2_and_leaves_it(verb, tmp_path, capsys, monkeypatch):
    from utilscope.cli import main

    path = tmp_path / "results.sqlite"
    with filled_store(path) as store:
        for batch in range(1000, 1400):
            store.add(make_row(batch=batch))
    path.write_bytes(file_bytes(path)[:12288])
    before = file_bytes(path)
    monkeypatch.chdir(tmp_path)
    assert main(verb.format(path).split()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "corrupt" in err and "left unchanged" in err
    assert file_bytes(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


# --- exports ------------------------------------------------------------------------------------------------------


def filled_store(path) -> Store:
    store = Store(path)
    store.add(make_row())
    store.add(make_row(batch=16, unstable=True, cv=0.05, notes=[], environment={}, family=""))
    store.add({**KEY, "batch": 256, "status": "oom", "wall_s": 0.1})
    store.add({**KEY, "batch": 512, "status": 'error: RuntimeError: "bad", very\nbad'})
    store.add_op_classes(CELL, [{"op_class": "conv", "flop_share": 0.9, "time_share": 2 / 3, "time_ms": 0.1}])
    return store


def test_csv_export_round_trips(tmp_path):
    with filled_store(tmp_path / "r.sqlite") as store:
        expected = store.frame()
        path = export_table(store, tmp_path / "out" / "results.csv")
        ops = export_table(store, tmp_path / "out" / "ops.csv", table="op_classes")
        pd.testing.assert_frame_equal(read_export(ops, table="op_classes"), store.op_class_frame())
    pd.testing.assert_frame_equal(read_export(path), expected)
    raw = pd.read_csv(path)  # plain pandas: JSON text columns, the same numbers
    assert [json.loads(text) for text in raw["environment"]] == list(expected["environment"])
    assert raw["latency_ms"].iloc[0] == pytest.approx(1 / 3, rel=1e-15)


def test_parquet_export_round_trips(tmp_path):
    pytest.importorskip("pyarrow")
    with filled_store(tmp_path / "r.sqlite") as store:
        expected = store.frame()
        path = export_table(store, tmp_path / "results.parquet")
        ops = export_table(store, tmp_path / "ops.parquet", table="op_classes")
        pd.testing.assert_frame_equal(pd.read_parquet(ops), store.op_class_frame())
    raw = pd.read_parquet(path)
    for name in ("notes", "environment"):  # JSON text in the file
        raw[name] = pd.Series([json.loads(text) for text in raw[name]], dtype=object)
    pd.testing.assert_frame_equal(raw, expected)
    pd.testing.assert_frame_equal(read_export(path), expected)


def test_an_export_needs_a_known_suffix_and_parquet_needs_pyarrow(tmp_path, monkeypatch):
    with filled_store(tmp_path / "r.sqlite") as store:
        with pytest.raises(StoreError, match=r"\.csv or \.parquet"):
            export_table(store, tmp_path / "results.xlsx")
        with pytest.raises(StoreError, match="op_classes"):
            export_table(store, tmp_path / "results.csv", table="ops")
        monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
        with pytest.raises(StoreError, match="pip install pyarrow"):
            export_table(store, tmp_path / "results.parquet")
    assert not (tmp_path / "results.parquet").exists()


# --- files that are not (usable) stores: a clear error, and the file unchanged ------------------------------------


def assert_refused(path, match: str) -> None:
    before = file_bytes(path)
    with pytest.raises(StoreError, match=match) as info:
        Store(path)
    assert isinstance(info.value, UsageError)
    assert "unchanged" in str(info.value)
    assert file_bytes(path) == before


def test_random_bytes_are_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    path.write_bytes(np.random.default_rng(0).bytes(8192))
    assert_refused(path, "not a SQLite database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_a_damaged_sqlite_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    with filled_store(path) as store:
        for batch in range(1000, 1400):  # enough rows for several pages
            store.add(make_row(batch=batch))
    data = bytearray(file_bytes(path))
    page_size = int.from_bytes(data[16:18], "big")
    data[page_size:] = np.random.default_rng(0).bytes(len(data) - page_size)  # keep the header page, trash the rest
    path.write_bytes(bytes(data))
    assert_refused(path, "corrupt")


def test_a_full_disk_is_a_storage_error_naming_the_store_and_the_rows_stored_before_stay(tmp_path):
    """SQLite's own "database or disk is full" (its page limit reached, as a full disk ends a write): the error
    says no space is left and where, it is not a usage error, and every row committed before it stays."""
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        store.add(make_row())
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StorageError, match=rf"cannot write results store {path}: no space left .* kept") as info:
            for batch in range(1000, 1400):
                store.add(make_row(batch=batch, notes=["x" * 2000]))
        stored = len(store.frame())
    assert not isinstance(info.value, UsageError)
    with Store(path, create=False) as store:
        assert len(store.frame()) == stored >= 1 and 8 in set(store.frame()["batch"])


def test_a_store_of_a_newer_schema_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    with filled_store(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    assert_refused(path, rf"newer utilscope \(schema {SCHEMA_VERSION + 1} > {SCHEMA_VERSION}\): upgrade utilscope")


def test_another_applications_sqlite_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE songs (title TEXT)")
    conn.execute("INSERT INTO songs VALUES ('x')")
    conn.commit()
    conn.close()
    assert_refused(path, "another application.*songs")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.commit()
    conn.close()
    assert_refused(path, "another application.*0x4d2")


def test_another_applications_file_is_refused_by_the_file_rules_read_only_and_an_empty_database_is_a_store(tmp_path):
    """``store_files.check_store`` (every ``--db`` while parsing): another application's SQLite file is refused from
    its marks, to read or to write, the file byte-identical and nothing created beside it; an empty database, a
    store, and a file SQLite cannot read (left to the store, which says it is corrupt) pass."""
    from utilscope.survey.store_files import check_store

    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE songs (title TEXT)")
        conn.commit()
    before = file_bytes(other)
    for writable in (False, True):
        with pytest.raises(StoreError, match=r"other.db is a SQLite database of another application .*songs"):
            check_store(other, writable)
    assert file_bytes(other) == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
    empty = tmp_path / "empty.db"
    with contextlib.closing(sqlite3.connect(empty)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    assert empty.stat().st_size > 0
    ours = tmp_path / "results.sqlite"
    Store(ours).close()
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(ours.read_bytes()[:100] + b"\xff" * 924)
    for path in (empty, ours, damaged):
        assert check_store(path, writable=True) == path
    assert check_store(ours, writable=False) == ours


def test_a_directory_is_refused(tmp_path):
    for create in (True, False):
        with pytest.raises(UsageError, match="is a folder, expected a file"):
            Store(tmp_path, create=create)


def test_reading_a_missing_store_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        Store(tmp_path / "absent.sqlite", create=False)
    assert not (tmp_path / "absent.sqlite").exists()


def test_an_empty_path_is_refused_and_nothing_is_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for create, snapshot in ((True, False), (True, True), (False, False)):
        with pytest.raises(UsageError, match="empty path given for the results store"):
            Store("", create=create, snapshot=snapshot)
    assert list(tmp_path.iterdir()) == []


def test_reading_opens_the_store_read_only_and_leaves_the_folder_as_it_was(tmp_path):
    """A reading command's store: the file byte-identical, nothing created beside it (no WAL, no lock file), and
    nothing can be written through it."""
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        store.add(make_row())
    before = {p.name: file_bytes(p) for p in tmp_path.iterdir()}
    with Store(path, create=False) as store:
        assert len(store.frame()) == 1 and store.read_only
        with pytest.raises(StoreError, match="opened read-only"):
            store.add(make_row(batch=16))
    assert {p.name: file_bytes(p) for p in tmp_path.iterdir()} == before


def test_an_empty_file_is_not_a_store_to_read_and_stays_empty(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.touch()
    with pytest.raises(StoreError, match="is not a utilscope store \\(an empty file\\)"):
        Store(path, create=False)
    assert file_bytes(path) == b"" and [p.name for p in tmp_path.iterdir()] == ["empty.sqlite"]


def test_a_reader_sees_the_rows_a_writer_holding_the_store_open_committed(tmp_path):
    """While a survey holds the store open its rows may still be in the write-ahead log: the reader reads through
    it (and creates nothing the writer did not)."""
    path = tmp_path / "results.sqlite"
    with Store(path) as writer:
        writer.add(make_row())
        writer.add(make_row(batch=16))
        names = sorted(p.name for p in tmp_path.iterdir())
        assert "results.sqlite-wal" in names
        with Store(path, create=False) as reader:
            assert sorted(reader.frame()["batch"]) == [8, 16]
        assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_reading_a_store_of_an_older_schema_migrates_it_in_memory_only(tmp_path, capsys):
    """``export`` of a schema-1 store: exported, said to be migrated in memory; the file byte-identical, no backup."""
    from test_migrations import v1_device_and_software, write_v1_store

    from utilscope.cli import main
    from utilscope.measure.settings import CudnnSettings

    path = tmp_path / "v1.sqlite"
    row = {
        "model": "m",
        "resolution": 8,
        "batch": 1,
        "precision": "fp32",
        "backend": "eager",
        **v1_device_and_software(CudnnSettings()),
    }
    write_v1_store(path, [row])
    before = file_bytes(path)
    assert main(["export", str(path), str(tmp_path / "out.csv")]) == 0
    assert "in memory only" in capsys.readouterr().err
    assert file_bytes(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "v1.sqlite"]


def test_a_store_to_write_is_checked_before_anything_is_created(tmp_path, monkeypatch):
    """A file where a folder is expected, a folder SQLite cannot write its journal in: one line, nothing made."""
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(UsageError, match="a_file is not a folder"):
        Store(tmp_path / "a_file" / "results.sqlite")
    path = tmp_path / "results.sqlite"
    Store(path).close()
    access = os.access
    from utilscope.survey import store_files  # the store's file rules ("utilscope.survey" is the API's function)

    monkeypatch.setattr(store_files.os, "access", lambda p, mode: str(p) != str(tmp_path) and access(p, mode))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StoreError, match="permission denied on the folder"):
        Store(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _filled_store(path):
    import numpy as np

    from utilscope.report.synthetic import synthetic_store
    from utilscope.survey.store import Store

    def plain(row: dict) -> dict:  # NaN and <NA> back to None, the derived label dropped
        missing = {k for k, v in row.items() if not isinstance(v, (list, dict)) and pd.isna(v)}
        return {k: (None if k in missing else v) for k, v in row.items() if k != "software"}

    measurements, op_classes = synthetic_store(np.random.default_rng(0), models=4)
    with Store(path) as store:
        for row in measurements.to_dict(orient="records"):
            store.add(plain(row))
        for _, rows in op_classes.groupby(list(KEY_COLUMNS), dropna=False):
            key = CellKey.from_columns(plain(rows.iloc[0].to_dict()))
            classes = rows.drop(columns=[*KEY_COLUMNS, "software"])
            store.add_op_classes(key, classes.to_dict(orient="records"))
    return len(measurements)


def test_report_and_export_commands(tmp_path, capsys):
    from utilscope.cli import main

    db = tmp_path / "results.sqlite"
    rows = _filled_store(db)
    assert main(["report", str(db), "-o", str(tmp_path / "report"), "--no-predicted"]) == 0
    html = (tmp_path / "report" / "index.html").read_text()
    assert "data:image/png;base64" in html and (tmp_path / "report" / "measurements.csv").exists()
    assert main(["export", str(db), str(tmp_path / "out.csv")]) == 0
    assert len((tmp_path / "out.csv").read_text().strip().splitlines()) == rows + 1
    assert main(["report", str(tmp_path / "absent.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    assert main(["export", str(tmp_path / "junk.sqlite"), str(tmp_path / "x.csv")]) == 2


# --- claims and model records -------------------------------------------------------------------------------------


def test_claims_keep_a_cell_for_its_owner_until_released_or_expired(tmp_path):
    other = CellKey.from_columns({**KEY, "batch": 16})
    with Store(tmp_path / "r.sqlite") as store:
        assert store.claim([CELL, other], "run-a", "host:gpu0", lease_s=60) == {CELL, other}
        assert store.claim([CELL], "run-b", "host:gpu0", lease_s=60) == set()  # held by a live run
        assert store.claims() == {CELL: ("run-a", "host:gpu0"), other: ("run-a", "host:gpu0")}
        store.release("run-a")
        assert store.claim([CELL], "run-b", "host:gpu1", lease_s=-1) == set()  # claimed, but already expired
        assert store.claims() == {}
        assert store.claim([CELL], "run-c", "host:gpu1", lease_s=60) == {CELL}  # an expired claim is taken over
        store.renew("run-c", lease_s=-1)
        assert store.claims() == {} and store.claim([CELL], "run-d", "x", 60) == {CELL}
        assert len(store.frame()) == 0  # claims are not measurements


def test_a_cell_stored_after_planning_is_not_claimed_again(tmp_path):
    """Another run stored the cell between this run's plan and its claim: the claim re-checks in its transaction
    and skips it (an error row is measured again unless errors are kept)."""
    failed = CellKey.from_columns({**KEY, "batch": 16})
    with Store(tmp_path / "r.sqlite") as store:
        store.add(make_row())
        store.add(make_row(batch=16, status="error: RuntimeError: boom"))
        assert store.claim([CELL, failed], "run-a", "host:gpu0", lease_s=60) == {failed}
        store.release("run-a")
        assert store.claim([CELL, failed], "run-a", "host:gpu0", lease_s=60, retry_errors=False) == set()


def test_model_records_are_kept_beside_the_rows(tmp_path):
    record = {"space": "mbv3", "id": "0123456789abcdef", "depths": [2, 2, 2, 2, 2]}
    with Store(tmp_path / "r.sqlite") as store:
        store.add_model_record("nas:mbv3:0123456789abcdef", record)
        store.add_model_record("nas:mbv3:0123456789abcdef", record)  # again: replaced, not doubled
        assert store.model_records() == {"nas:mbv3:0123456789abcdef": record}


def test_a_refused_renewal_stops_the_claims_with_one_warning_and_no_thread_traceback(tmp_path, monkeypatch):
    import threading
    import time

    from utilscope.errors import StorageError
    from utilscope.survey import claims

    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        assert store.claim([CELL], "run-a", "host:gpu0", lease_s=60) == {CELL}
    calls = []

    def refuse(self, owner, lease_s):
        calls.append(owner)
        raise StorageError(f"cannot write results store {db}: an I/O error (SQLite: disk I/O error)")

    monkeypatch.setattr(Store, "renew", refuse)
    crashed = []
    monkeypatch.setattr(threading, "excepthook", crashed.append)
    lease = claims.Lease("run-a", "host:gpu0", None, 0, [])
    lapsed = r"^the survey's claims on its cells lapsed \(cannot write results store"
    with pytest.warns(UserWarning, match=lapsed), claims.holding(lease, str(db), lease_s=60, renew_every_s=0.01):
        time.sleep(0.2)
    assert calls == ["run-a"] and crashed == []  # renewals stop at the first refusal, quietly
    with Store(db) as store:
        assert store.claims() == {}  # released after the block, as always


def test_a_refused_release_is_one_warning_and_the_claims_expire_with_their_lease(tmp_path, monkeypatch):
    from utilscope.errors import StorageError
    from utilscope.survey import claims

    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        assert store.claim([CELL], "run-a", "host:gpu0", lease_s=60) == {CELL}

    def refuse(self, owner):
        raise StorageError(f"cannot write results store {db}: an I/O error (SQLite: disk I/O error)")

    monkeypatch.setattr(Store, "release", refuse)
    lease = claims.Lease("run-a", "host:gpu0", None, 0, [])
    unreleased = r"^the survey's claims on its cells were not released \(cannot write .*\); they expire within 60 s$"
    with pytest.warns(UserWarning, match=unreleased), claims.holding(lease, str(db), lease_s=60, renew_every_s=60):
        pass  # the block's own outcome stands: no error from the release
    monkeypatch.undo()
    with Store(db) as store:
        assert list(store.claims()) == [CELL]  # still held, until the lease runs out
