"""Shards of a survey grid: every cell in exactly one shard, a group's batch sizes together, the same shards
whatever the model order or the store (a stable hash, pinned), bad shards one line with exit code 2. Nothing is
measured."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.survey.plan import Group, SurveyGrid, expand_grid, plan_survey
from utilscope.survey.shards import Shard, shard_number
from utilscope.survey.store import Store
from utilscope.units import plural

NAMES = [f"m{i}" for i in range(8)]
SOURCE = "import torch.nn as nn\nRESOLUTION = 16\n" + "".join(
    f"\n\ndef {name}():\n    return nn.Sequential(nn.Conv2d(3, {4 + i}, 3), nn.ReLU())\n"
    for i, name in enumerate(NAMES)
)


def factory_grid(write_factory) -> SurveyGrid:
    """8 tiny models x 2 backends (16 groups) x 3 batch sizes, on the CPU."""
    path = write_factory(SOURCE, "shard_models")
    return SurveyGrid(tuple(f"{path}:{name}" for name in NAMES), (1, 2, 4), ("fp32",), ("eager", "graph"), "cpu")


@pytest.fixture(scope="module")
def grid(write_factory) -> SurveyGrid:
    return factory_grid(write_factory)


def cells(grid: SurveyGrid) -> set:
    """Every cell key of the grid (of its shard)."""
    config, groups = expand_grid(grid)
    return {key for group in groups for key in group.keys(config)}


def shards(grid: SurveyGrid, count: int = 3) -> list[SurveyGrid]:
    return [replace(grid, shard=Shard(k, count)) for k in range(1, count + 1)]


def add_ok_rows(path, keys, **values) -> None:
    with Store(path) as store:
        for key in keys:
            store.add({"key": key, "status": "ok", "latency_ms": 1.0 + key.batch, **values})


def test_shards_partition_the_grid_by_group_whatever_the_model_order(grid):
    whole = cells(grid)
    parts = [cells(shard) for shard in shards(grid)]
    assert sum(len(part) for part in parts) == len(whole) == 8 * 2 * 3  # every cell in exactly one shard
    assert set().union(*parts) == whole
    assert [cells(shard) for shard in shards(replace(grid, models=grid.models[::-1]))] == parts
    for shard in shards(grid):  # a group's batch sizes stay together
        assert all(group.batches == grid.batches for group in expand_grid(shard)[1])


def test_a_groups_shard_is_a_stable_hash_of_its_identity_alone():
    group = Group("torchvision:resnet50", 224, "fp16", "graph", (1, 8))
    # SHA-256 of ["torchvision:resnet50", 224, "fp16", "graph"]: pinned, so a new version shards as the old one did
    assert shard_number(group, 3) == 3 and shard_number(group, 7) == 6
    assert shard_number(group.only((256,)), 3) == 3 and shard_number(replace(group, spec="elsewhere"), 3) == 3
    assert shard_number(replace(group, precision="bf16"), 3) in (1, 2, 3) and shard_number(group, 1) == 1


def test_the_shard_of_a_plan_skips_what_its_store_holds(grid, tmp_path):
    shard = Shard(shard_number(expand_grid(grid)[1][0], 3), 3)  # the model ids hold a temporary path: not fixed
    sharded = replace(grid, shard=shard)
    mine = sorted(cells(sharded), key=str)
    theirs = sorted(cells(grid) - set(mine), key=str)
    add_ok_rows(tmp_path / "r.sqlite", [mine[0], theirs[0]])
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(sharded, store)
    assert plan.cells == len(mine) - 1 and plan.skipped == 1 and plan.grid.shard == shard


@pytest.mark.parametrize("text", ["0/3", "4/3", "x", "3", "1/0", "-1/3", "1/3/3", ""])
def test_a_bad_shard_is_one_line(text):
    with pytest.raises(UsageError, match="a shard is K/N") as error:
        Shard.parse(text)
    assert "\n" not in str(error.value)


def test_the_survey_plans_and_lists_only_its_shard(grid, tmp_path, capsys):
    models = [arg for model in grid.models for arg in ("--models", model)]
    argv = [
        "survey",
        "--device",
        "cpu",
        "--precision",
        "fp32",
        "--backend",
        "eager,graph",
        "--batch",
        "1,2,4",
        *models,
        "--db",
        str(tmp_path / "r.sqlite"),
    ]
    listed = []
    for k in (1, 2, 3):
        assert main([*argv, "--shard", f"{k}/3", "--dry-run"]) == 0
        out = capsys.readouterr().out
        expected = cells(replace(grid, shard=Shard(k, 3)))
        groups = plural(len(expected) // 3, "group")
        line = f"survey: shard {k}/3 of the grid: {plural(len(expected), 'cell')} to measure in {groups}"
        assert line in out
        listed += re.findall(r":(m\d)#[0-9a-f]+ *│ *16 │ fp32 *│ (eager|graph) *│ 1,2,4", out)  # the dry run's rows
    assert sorted(listed) == sorted((name, backend) for name in NAMES for backend in ("eager", "graph"))
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize("shard", ["0/3", "4/3", "x"])
def test_a_bad_shard_option_is_a_usage_error_that_never_creates_the_store(grid, tmp_path, shard, capsys):
    db = tmp_path / "r.sqlite"
    argv = ["survey", "--device", "cpu", "--models", grid.models[0], "--db", str(db), "--shard", shard]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "a shard is K/N" in err and err.count("\n") == 1 and not db.exists()


def test_a_model_at_a_resolution_of_its_own_is_a_group_of_its_own(tmp_path):
    """NAME@RES: one model at two resolutions is two groups (two cells in a store); the others take --res."""
    from utilscope.survey.plan import read_model_list, select_models, split_resolution

    listed = tmp_path / "models.txt"
    listed.write_text("# timm's rows\ntorchvision:resnet18@64  # a comment\n\ntorchvision:resnet18@96\n")
    models = select_models([*read_model_list(listed), "torchvision:alexnet"], [])
    assert models == ["torchvision:resnet18@64", "torchvision:resnet18@96", "torchvision:alexnet"]
    grid = SurveyGrid(tuple(models), (1,), ("fp32",), ("eager",), "cpu", resolution=80)
    _, groups = expand_grid(grid)
    assert [(g.model, g.resolution) for g in groups] == [
        ("torchvision:resnet18", 64),
        ("torchvision:resnet18", 96),
        ("torchvision:alexnet", 80),
    ]
    assert split_resolution("file:/a@b/m.py:make") == ("file:/a@b/m.py:make", None)
    (tmp_path / "comments.txt").write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="lists no model"):
        read_model_list(tmp_path / "comments.txt")
