"""``scripts/check_kept.py``: a copy brought back from the GPU machine passes only if it keeps every earlier store
row and profile config unchanged, and it says what it adds."""

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from conftest import load_script
from test_store import make_row

from utilscope.predict.profile_format import PROFILE_FORMAT
from utilscope.survey.store import Store

check_kept = load_script("scripts/check_kept.py")


def _check(old: Path, new: Path, capsys) -> SimpleNamespace:
    """The script's exit status and what it printed."""
    returncode = check_kept.main([str(old), str(new)])
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=returncode, stdout=out, stderr=err)


def _store(path: Path, *rows: dict) -> Path:
    with Store(path) as store:
        for row in rows:
            store.add(row)
    return path


def test_a_store_that_adds_rows_passes_and_one_that_changes_or_loses_a_row_fails(tmp_path, capsys):
    old = _store(tmp_path / "old.sqlite", make_row(batch=1), make_row(batch=8))
    new = _store(tmp_path / "new.sqlite", make_row(batch=1), make_row(batch=8), make_row(batch=256, precision="fp32"))
    kept = _check(old, new, capsys)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "measurements: 2 rows before, 3 now; 0 changed, 0 lost" in kept.stdout
    assert "+ 1 rows: NVIDIA H200, fp32, graph" in kept.stdout
    changed = _store(tmp_path / "changed.sqlite", make_row(batch=1, samples_per_s=1.0))
    failed = _check(old, changed, capsys)
    assert failed.returncode == 1
    assert "1 changed, 1 lost" in failed.stdout and "changed: ('resnet50', 224, 1," in failed.stdout
    assert _check(tmp_path / "first.sqlite", old, capsys).returncode == 0  # a first copy: everything is added


def test_the_check_only_reads_nothing_is_created_beside_either_store(tmp_path, capsys):
    old = _store(tmp_path / "old.sqlite", make_row(batch=1))
    new = _store(tmp_path / "new.sqlite", make_row(batch=1), make_row(batch=8))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert _check(old, new, capsys).returncode == 0
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_a_malformed_store_fails_its_check(tmp_path, capsys):
    new = _store(tmp_path / "new.sqlite", *(make_row(batch=b) for b in range(1, 400)))
    with sqlite3.connect(new) as db:
        db.execute("pragma wal_checkpoint(truncate)")
    data = bytearray(new.read_bytes())
    data[4096 * 3 : 4096 * 3 + 400] = b"\xff" * 400
    new.write_bytes(bytes(data))
    assert _check(tmp_path / "none.sqlite", new, capsys).returncode == 1


def _profile(path: Path, latencies: dict[str, float]) -> Path:
    configs = {key: {"kind": key.split("|")[0].removeprefix("kind=")} for key in latencies}
    profile = {"format": PROFILE_FORMAT, "device": "NVIDIA H200", "configs": configs, "latency_ms": latencies}
    path.write_text(json.dumps(profile))
    return path


def test_a_profile_keeps_every_timed_config_with_its_latency(tmp_path, capsys):
    old = _profile(tmp_path / "old.json", {"kind=conv|batch=1": 0.5, "kind=batch_norm|batch=2": 0.1})
    resumed = {"kind=conv|batch=1": 0.5, "kind=batch_norm|batch=2": 0.1, "kind=cast|batch=4": 0.2}
    kept = _check(old, _profile(tmp_path / "new.json", resumed), capsys)
    assert kept.returncode == 0 and "2 configs before, 3 now; 0 changed, 0 lost" in kept.stdout
    assert "+ 1 cast" in kept.stdout
    retimed = _check(old, _profile(tmp_path / "retimed.json", {**resumed, "kind=conv|batch=1": 0.6}), capsys)
    assert retimed.returncode == 1 and "changed: kind=conv|batch=1" in retimed.stdout


def test_a_file_of_another_kind_is_a_usage_error(tmp_path, capsys):
    other = tmp_path / "rows.csv"
    other.write_text("a,b\n")
    refused = _check(tmp_path / "old.csv", other, capsys)
    assert refused.returncode == 2 and "not a results store (.sqlite) or device profile (.json) file" in refused.stderr
