"""utilscope's cache: where each kind lives (UTILSCOPE_CACHE_DIR, XDG_CACHE_HOME, ~/.cache), what ``utilscope cache``
shows, and what ``--clear`` removes (its files only); in temporary folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utilscope import cache
from utilscope.cli import main
from utilscope.errors import UsageError, UtilscopeError


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("UTILSCOPE_CACHE_DIR", str(tmp_path / "root"))
    return tmp_path / "root"


def test_the_root_is_the_override_else_xdg_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("UTILSCOPE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "utilscope"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir("predict") == tmp_path / "xdg" / "utilscope" / "predict"
    monkeypatch.setenv("UTILSCOPE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir("ceilings") == tmp_path / "mine" / "ceilings"


def test_ceilings_and_predictors_live_in_folders_of_their_own(root, tmp_path):
    """The fitted predictors used to live inside the ceilings' folder (ceilings/predict)."""
    from utilscope import hardware
    from utilscope.predict import fit_cache

    profile = tmp_path / "p.json"
    profile.write_text("{}")
    assert hardware.cache_dir() == root / "ceilings"
    assert fit_cache.cache_file(profile).parent == root / "predict"
    with pytest.raises(UsageError, match="unknown cache kind 'models'; use one of: ceilings, predict"):
        cache.cache_dir("models")


def _fill(root: Path) -> None:
    (root / "ceilings" / "predict").mkdir(parents=True)
    (root / "predict").mkdir()
    (root / "ceilings" / "cpu.json").write_bytes(b"c" * 100)
    (root / "ceilings" / "predict" / "old.pkl").write_bytes(b"o" * 1000)  # where predictors lived before
    (root / "predict" / "new.pkl").write_bytes(b"n" * 10)
    (root / "notes.txt").write_text("not ours")


def test_usage_counts_each_kind_and_clearing_one_kind_leaves_the_rest(root):
    _fill(root)
    usage = {u.kind: (u.files, u.bytes) for u in cache.cache_usage()}
    assert usage == {
        "ceilings": (1, 100),
        "predict": (2, 1010),
        "counts": (0, 0),
        "reports": (0, 0),
        "networks": (0, 0),
    }
    removed = cache.clear_cache(("predict",))
    assert [(u.kind, u.files, u.bytes) for u in removed] == [("predict", 2, 1010)]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["ceilings", "ceilings/cpu.json", "notes.txt"]
    cache.clear_cache()
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["notes.txt"]


def test_the_cache_verb_shows_without_creating_anything(root, capsys):
    assert main(["cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["root"] == str(root) and not doc["cleared"] and not root.exists()
    kinds = [(k["kind"], k["files"], k["bytes"]) for k in doc["kinds"]]
    assert kinds == [("ceilings", 0, 0), ("predict", 0, 0), ("counts", 0, 0), ("reports", 0, 0), ("networks", 0, 0)]
    assert main(["cache"]) == 0
    assert "ceilings" in capsys.readouterr().out and not root.exists()


def test_the_cache_verb_clears_one_kind_or_all(root, capsys):
    _fill(root)
    assert main(["cache", "ceilings", "--clear"]) == 0
    assert capsys.readouterr().out.strip() == f"removed 1 file (100 B) of ceilings from {root}"
    assert main(["cache", "--clear"]) == 0
    removed = f"removed 2 files (1.01 kB) of ceilings, predict, counts, reports, networks from {root}"
    assert capsys.readouterr().out.strip() == removed
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]


def test_an_unknown_kind_is_one_line_with_a_guess(root, capsys):
    assert main(["cache", "ceiling", "--clear"]) == 2
    assert capsys.readouterr().err == (
        "utilscope: error: argument kind: invalid choice 'ceiling'; did you mean ceilings? (see: utilscope cache "
        "--help)\n"
    )
    assert not root.exists()


def test_a_value_cache_keeps_json_values_by_key_one_file_per_version(root):
    first = cache.ValueCache("counts", "v1")
    assert first.get([first.key("a", 1)]) == {} and not root.exists()  # reading creates nothing
    first.put({first.key("a", 1): {"flops": 2}, first.key("b", 2): [1, 2]})
    assert first.get([first.key("a", 1), first.key("c", 3)]) == {first.key("a", 1): {"flops": 2}}
    assert cache.ValueCache("counts", "v1").get([first.key("b", 2)]) == {first.key("b", 2): [1, 2]}
    other = cache.ValueCache("counts", "v2")
    assert other.path != first.path and other.get([first.key("a", 1)]) == {}
    assert [u.files for u in cache.cache_usage(("counts",))] == [1]


def test_a_seed_answers_what_the_cache_lacks_only_for_its_own_version(root, tmp_path):
    seed = cache.write_seed(tmp_path / "seed.json.xz", "v1", {'["a"]': {"flops": 2}, '["b"]': [1.5, None]})
    seeded = cache.ValueCache("counts", "v1", seed)
    assert seeded.get(['["a"]', '["b"]', '["c"]']) == {'["a"]': {"flops": 2}, '["b"]': [1.5, None]}
    assert not root.exists() and seeded.items() == {}  # the seed is read, never copied into the cache
    seeded.put({'["a"]': {"flops": 3}})  # the cache's own value comes first
    assert seeded.get(['["a"]', '["b"]']) == {'["a"]': {"flops": 3}, '["b"]': [1.5, None]}
    assert cache.ValueCache("counts", "v2", seed).get(['["b"]']) == {}  # another version: computed again
    assert cache.ValueCache("counts", "v1", tmp_path / "none.json.xz").get(['["b"]']) == {}
    (tmp_path / "bad.json.xz").write_bytes(b"not xz")
    with pytest.raises(UtilscopeError, match="bad.json.xz is not a cache seed"):
        cache.ValueCache("counts", "v1", tmp_path / "bad.json.xz").get(['["b"]'])


def test_the_source_digest_follows_the_files_it_names():
    digest = cache.source_digest("counting")
    assert digest == cache.source_digest("counting") and len(digest) == 16
    assert digest not in (cache.source_digest("predict"), cache.source_digest("counting", "predict"))


def test_a_value_cache_that_cannot_be_written_finds_nothing_and_warns_once(tmp_path, monkeypatch):
    """A cache folder that is a file (as a read-only or full one): the values are not kept, the caller goes on,
    and one warning names the cache."""
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    monkeypatch.setenv("UTILSCOPE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(cache, "_UNWRITABLE", set())
    values = cache.ValueCache("counts", "v1")
    with pytest.warns(UserWarning, match=r"^the cache is not kept: cannot write .*counts-") as caught:
        values.put({"a": 1})
        values.put({"b": 2})
    assert len(caught) == 1 and values.get(["a", "b"]) == {} and blocker.read_text() == "not a folder"
