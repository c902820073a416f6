"""Sampled architectures as zoo models (``archs.jsonl:ID``) and ``utilscope nas measure`` into a store."""

from __future__ import annotations

import pytest

import utilscope
from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.models import sets as model_sets
from utilscope.models import zoo
from utilscope.nas.sampler import sample_architectures, save_jsonl
from utilscope.nas.spaces import get_space
from utilscope.survey.store import Store


@pytest.fixture()
def archs(tmp_path):
    space = get_space("mbv3")
    records = sample_architectures(space, 3, seed=5)
    return save_jsonl(tmp_path / "archs.jsonl", records), records


def test_an_architecture_is_a_zoo_model(archs):
    path, records = archs
    spec = zoo.parse_spec(f"{path}:{records[0]['id']}")
    assert spec.source == "nas" and zoo.parse_spec(spec.id) == spec
    space = get_space("mbv3")
    assert zoo.native_resolution(spec) == records[0]["resolution"]
    assert utilscope.count(spec.id).total.flops == space.complexity(records[0]).flops
    assert model_sets.family_of(spec.id) == "NAS mbv3"
    with pytest.raises(UsageError, match="no architecture with id 'nope'"):
        zoo.parse_spec(f"{path}:nope")
    with pytest.raises(UsageError, match="no such file: .*absent.jsonl \\(the architecture file\\)"):
        zoo.parse_spec(f"{path.parent}/absent.jsonl:x")


@pytest.mark.slow
def test_nas_measure_stores_one_row_per_architecture_and_batch(archs, tmp_path):
    """The one end-to-end run of `nas measure` (about 5 s: a survey worker process builds and times two sampled
    architectures on the CPU)."""
    path, records = archs
    db = tmp_path / "nas.sqlite"
    argv = [
        "nas",
        "measure",
        str(path),
        "--device",
        "cpu",
        "--batch",
        "1",
        "--db",
        str(db),
        "--limit",
        "2",
        "--res",
        "64",
        "--min-time-ms",
        "20",
    ]
    assert main(argv) == 0
    with Store(db) as store:
        frame = store.frame()
        stored = store.model_records()
    ids = sorted(f"nas:mbv3:{r['id']}" for r in records[:2])  # named by content, wherever the file is
    assert sorted(frame["model"]) == ids and stored == {f"nas:mbv3:{r['id']}": r for r in records[:2]}
    assert set(frame["status"]) == {"ok"} and set(frame["family"]) == {"NAS mbv3"}
    moved = tmp_path / "elsewhere" / "copy.jsonl"
    moved.parent.mkdir()
    moved.write_text(path.read_text())
    assert main([*argv[:2], str(moved), *argv[3:]]) == 0  # resumed from another file: nothing left to measure
    with Store(db) as store:
        assert len(store.frame()) == 2
