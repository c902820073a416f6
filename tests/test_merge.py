"""Merging stores: merged shards hold the whole grid, a store merged with its copy has no conflicts and a changed
value is reported (not dropped), the output keeps the first value, copies recorded with other software versions say
which, the inputs are never written (byte for byte), and bad input is one line with exit code 2. Nothing is
measured: rows are added to the stores directly."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import pytest
from test_migrations import write_v1_store
from test_shards import add_ok_rows, cells, factory_grid, shards
from test_store import CELL, make_row

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.survey.merge import KEPT_RULE, describe_key, merge_stores
from utilscope.survey.schema import encode_key
from utilscope.survey.store import Store, StoreError


def test_merged_shards_hold_the_whole_grid(write_factory, tmp_path):
    grid = factory_grid(write_factory)
    paths = [tmp_path / f"shard{k}.sqlite" for k in (1, 2, 3)]
    for path, shard in zip(paths, shards(grid), strict=True):
        add_ok_rows(path, cells(shard))
    result = merge_stores(paths, tmp_path / "all.sqlite")
    with Store(tmp_path / "all.sqlite") as store:
        assert set(store.statuses()) == cells(grid)
    assert not result.conflicts and result.held_before["measurements"] == 0
    assert [c.tables["measurements"].added for c in result.inputs] == [len(cells(s)) for s in shards(grid)]
    assert result.held_after("measurements") == len(cells(grid))


def store_with_everything(path):
    """A store of two measurements (one with op classes), a model record and a claim."""
    other = replace(CELL, batch=32)
    with Store(path) as store:
        store.add(make_row())
        store.add(make_row(batch=32, latency_ms=2.0))
        store.add_op_classes(
            CELL,
            [
                {"op_class": "dense_conv", "flop_share": 0.9, "time_share": 0.7, "time_ms": 1.0},
                {"op_class": "elementwise", "flop_share": 0.1, "time_share": 0.3},
            ],
        )
        store.add_model_record("nas:mbv3:abc", {"space": "mbv3", "arch": [1, 2]})
        store.claim([other], "someone", "NVIDIA H200", 60.0)


def test_a_store_merged_with_its_copy_has_no_conflicts_until_one_value_changes(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    store_with_everything(a)
    shutil.copyfile(a, b)
    with Store(b) as store:  # another run's copy of the same measurement: only its provenance differs
        store.add(make_row(measured_at="2030-01-01T00:00:00+00:00", wall_s=9.0, environment={"device_uuid": "x"}))
    before = {path: path.read_bytes() for path in (a, b)}
    result = merge_stores([a, b], tmp_path / "out.sqlite")
    assert not result.conflicts
    assert [(c.added, c.identical) for c in result.inputs[1].tables.values()] == [(0, 2), (0, 1), (0, 1), (0, 0)]
    with Store(tmp_path / "out.sqlite") as store:
        assert len(store.frame()) == 2 and len(store.op_class_frame()) == 2 and not store.claims()
        assert store.frame().loc[0, "measured_at"] == "2026-01-02T03:04:05+00:00"  # the first input's row
    with Store(b) as store:
        store.add(make_row(samples_per_s=1.0))
    before[b] = b.read_bytes()
    result = merge_stores([a, b], tmp_path / "out2.sqlite")
    (conflict,) = result.conflicts
    assert (conflict.table, conflict.kept, conflict.left_out, conflict.columns) == (
        "measurements",
        a,
        b,
        ("samples_per_s",),
    )
    assert conflict.key.startswith("resnet50 224px batch 8 fp16 graph on NVIDIA H200")
    assert result.inputs[1].tables["measurements"].conflicting == 1
    with Store(tmp_path / "out2.sqlite") as store:
        assert store.frame().loc[0, "samples_per_s"] == make_row()["samples_per_s"]  # the first input's value
    assert {path: path.read_bytes() for path in (a, b)} == before  # the inputs, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite", "b.sqlite", "out.sqlite", "out2.sqlite"]


def test_op_class_and_model_record_conflicts_are_reported_and_the_output_keeps_its_own(tmp_path):
    a, out = tmp_path / "a.sqlite", tmp_path / "out.sqlite"
    store_with_everything(out)
    with Store(a) as store:
        store.add_op_classes(CELL, [{"op_class": "dense_conv", "flop_share": 1.0, "time_share": 1.0}])
        store.add_model_record("nas:mbv3:abc", {"space": "mbv3", "arch": [2, 1]})
        store.add(make_row(batch=1))
    result = merge_stores([a], out)
    assert [(c.table, c.kept, c.left_out, c.columns) for c in result.conflicts] == [
        ("op_classes", out, a, ("op_class", "flop_share", "time_share", "time_ms")),
        ("models", out, a, ("record",)),
    ]
    assert result.held_before == {"measurements": 2, "op_classes": 1, "models": 1, "published": 0}
    assert result.held_after("measurements") == 3
    with Store(out) as store:
        assert store.model_records() == {"nas:mbv3:abc": {"space": "mbv3", "arch": [1, 2]}}
        assert len(store.op_class_frame()) == 2


def test_an_older_schemas_input_is_read_without_being_written(tmp_path):
    v1 = tmp_path / "v1.sqlite"
    row = {
        "model": "torchvision:resnet18",
        "resolution": 224,
        "batch": 1,
        "precision": "fp16",
        "backend": "graph",
        "device": "NVIDIA H200",
        "software": "torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04",
    }
    write_v1_store(v1, [row])
    before = v1.read_bytes()
    result = merge_stores([v1], tmp_path / "out.sqlite")
    assert result.inputs[0].migration.backup is None and result.inputs[0].tables["measurements"].added == 1
    assert v1.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["out.sqlite", "v1.sqlite"]


def test_bad_merge_input_is_a_usage_error_that_never_touches_a_store(tmp_path):
    a, out = tmp_path / "a.sqlite", tmp_path / "out.sqlite"
    store_with_everything(a)
    before = a.read_bytes()
    (tmp_path / "notes.txt").write_text("not a store")
    for inputs, output, message in [
        ([a], a, "is also an input"),
        ([tmp_path / "b.sqlite", tmp_path / "sub" / ".." / "a.sqlite"], a, "is also an input"),
        ([a, tmp_path / "missing.sqlite"], out, "no such file"),
        ([a, tmp_path / "notes.txt"], out, "not a SQLite database"),
        ([a, tmp_path / "empty.sqlite"], out, "is not a utilscope store \\(an empty file\\)"),
        ([a, a], out, "the store .*a.sqlite is given twice: merge each store once"),
        ([a, tmp_path / "sub" / ".." / "a.sqlite"], out, "is given twice \\(as .*a.sqlite\\)"),
        ([a, tmp_path / "link.sqlite"], out, "is given twice"),
        ([a, tmp_path / "hard.sqlite"], out, "is given twice"),
        ([a], tmp_path / "link.sqlite", "is also an input"),
        ([a], tmp_path / "notes.txt", "not a SQLite database"),
        ([a], "", "empty path given for the merged results store"),
        (["", a], out, "empty path given for the results store"),
    ]:
        (tmp_path / "empty.sqlite").touch()
        (tmp_path / "link.sqlite").unlink(missing_ok=True)
        (tmp_path / "link.sqlite").symlink_to(a.name)
        (tmp_path / "hard.sqlite").unlink(missing_ok=True)
        (tmp_path / "hard.sqlite").hardlink_to(a)
        with pytest.raises((UsageError, StoreError), match=message):
            merge_stores(inputs, output)
        assert (tmp_path / "empty.sqlite").read_bytes() == b""
    assert a.read_bytes() == before and not out.exists()


def test_merge_on_the_command_line(tmp_path, capsys):
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "all" / "out.sqlite"
    store_with_everything(a)
    with Store(b) as store:
        store.add(make_row(batch=64))
        store.add(make_row(latency_ms=5.0))
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 1  # a conflict: merged, reported, exit 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{a}: measurements 2 added, 0 identical, 0 conflicting; op-class sets 1 added, 0 identical, "
        "0 conflicting; model records 1 added, 0 identical, 0 conflicting"
    )
    assert lines[1] == f"{b}: measurements 1 added, 0 identical, 1 conflicting"
    assert lines[2] == (
        f"merged 2 stores into {out}: it holds 3 measurements, 1 op-class set, 1 model record (0 measurements before)"
    )
    assert lines[3].startswith("conflict: resnet50 224px batch 8") and lines[3].endswith(
        f"{b} differs from {a} in latency_ms; kept {a}'s"
    )
    assert lines[4] == f"1 conflict: on a conflict {KEPT_RULE}"
    assert main(["merge", str(a), "-o", str(tmp_path / "copy.sqlite")]) == 0
    with sqlite3.connect(tmp_path / "copy.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 2
    missing = ["merge", str(tmp_path / "nope.sqlite"), "-o", str(tmp_path / "x.sqlite")]
    for argv, message in [(["merge", str(a), "-o", str(a)], "is also an input"), (missing, "no such file")]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.sqlite").exists()


def test_identical_rows_recorded_with_other_software_versions_say_which(tmp_path, capsys):
    """Equal values are no conflict, but the versions the copy left out recorded are named: not which GPU of the
    host, nor a version only one copy recorded."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    env = {"device_uuid": "GPU-1", "timm": "1.0.29", "torchvision": "0.20.0", "python": "3.11.7"}
    with Store(a) as store:
        for batch in (8, 32):
            store.add(make_row(batch=batch, environment=env))
        store.add(make_row(batch=64, environment={}))  # a failure row records no environment
    with Store(b) as store:
        store.add(make_row(environment={**env, "device_uuid": "GPU-2", "timm": "1.0.31"}))
        store.add(make_row(batch=32, environment={**env, "timm": "1.0.31", "python": "3.12.1"}))
        store.add(make_row(batch=64, environment={"timm": "1.0.31"}))
    result = merge_stores([a, b], tmp_path / "out.sqlite")
    counts = result.inputs[1].tables["measurements"]
    assert (counts.added, counts.identical, counts.other_versions, counts.conflicting) == (0, 3, 2, 0)
    assert counts.versions == {"timm": {("1.0.31", "1.0.29")}, "python": {("3.12.1", "3.11.7")}}
    assert not result.conflicts and result.inputs[0].tables["measurements"].other_versions == 0
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "cli.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{a}: measurements 3 added, 0 identical, 0 conflicting"
    assert lines[1] == (
        f"{b}: measurements 0 added, 3 identical (2 recorded with other timm: 1.0.31 vs kept 1.0.29; "
        "other python: 3.12.1 vs kept 3.11.7), 0 conflicting"
    )


def test_a_cpu_cells_key_names_its_thread_count():
    cell = replace(CELL, config=replace(CELL.config, device="AMD EPYC", driver="", threads=2))
    described = describe_key("measurements", encode_key(cell))
    assert described.startswith("resnet50 224px batch 8 fp16 graph on AMD EPYC (2 threads) (channels_last; torch")
