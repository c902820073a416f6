"""The survey runner on the CPU: resume, crashes, OOM, hangs and two surveys sharing one store.

Each test runs real worker subprocesses on tiny models, so the file takes tens of seconds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from utilscope import survey
from utilscope.survey.store import Store

pytestmark = pytest.mark.slow

MODELS = textwrap.dedent(
    """
    import os, time
    import torch
    import torch.nn as nn

    RESOLUTION = 16

    def _cnn():
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(8, 4))

    class Faulty(nn.Module):
        def __init__(self, fault):
            super().__init__()
            self.body, self.fault = _cnn(), fault

        def forward(self, x):
            if x.device.type != "meta" and x.shape[0] >= 4:
                if self.fault == "crash":
                    os._exit(3)
                if self.fault == "oom":
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
                if self.fault == "hang":
                    time.sleep(3600)
            return self.body(x)

    def good():
        return _cnn()

    def good2():
        return nn.Sequential(_cnn(), nn.ReLU())

    def crash():
        return Faulty("crash")

    def oom():
        return Faulty("oom")

    def hang():
        return Faulty("hang")
    """
)


@pytest.fixture()
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return lambda name: f"{path}:{name}"


def _survey(db, models, batches="1,4", extra=()):
    argv = [sys.executable, "-m", "utilscope.cli", "survey", "--db", str(db), "--device", "cpu", "--batch", batches,
            "--backend", "eager", "--attribute", "none", "--timeout", "60"]  # fmt: skip
    for model in models:
        argv += ["--models", model]
    return [*argv, *extra]


def _statuses(db) -> dict:
    with Store(db) as store:
        frame = store.frame()
    return {(row.model.rsplit(":", 1)[-1], row.batch): row.status for row in frame.itertuples()}


def _key_counts(db) -> Counter:
    with Store(db) as store:
        frame = store.frame()
    return Counter(zip(frame["model"], frame["batch"], frame["precision"], frame["backend"], strict=True))


@pytest.mark.parametrize("per_worker", [1, 4])
def test_failures_are_rows_and_the_survey_goes_on(tmp_path, models, per_worker):
    """One worker per model, or all four in one worker: after the crash a new worker takes the models after it."""
    db = tmp_path / "results.sqlite"
    argv = _survey(db, [models("good"), models("crash"), models("oom"), models("good2")],
                   extra=("--per-worker", str(per_worker)))  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr  # some cells failed, the survey finished
    statuses = _statuses(db)
    assert statuses[("good", 1)] == statuses[("good", 4)] == "ok"
    assert statuses[("good2", 1)] == statuses[("good2", 4)] == "ok"  # measured after the crash
    assert statuses[("crash", 1)] == "ok"  # stored before the worker died
    assert statuses[("crash", 4)].startswith("error: worker exited with code 3")
    assert statuses[("oom", 1)] == "ok" and statuses[("oom", 4)] == "oom"


def test_progress_counts_every_cell_once(tmp_path, models):
    """The progress callback hears of each cell once, stored by a worker or recorded as failed, also across the
    worker that a crash replaces: 4 models x 2 batch sizes, one worker for all of them."""
    db = tmp_path / "results.sqlite"
    names = [models("good"), models("crash"), models("oom"), models("good2")]
    with Store(db) as store:
        plan = survey.plan_survey(names, [1, 4], ["fp32"], ["eager"], "cpu", store)
    heard = []
    result = survey.run_survey(plan, survey.WorkerOptions(str(db), "cpu", timeout_s=60), per_worker=4,
                               on_cells_done=heard.append)  # fmt: skip
    assert plan.cells == 8 and sum(heard) == 8 and result.failed_cells == 1
    assert heard.count(1) == 8  # one call per cell: the crashed cell too (its error row)


def test_a_hang_costs_only_its_cells(tmp_path, models):
    """The timeout is per model, also when one worker measures several: the worker is killed and replaced."""
    db = tmp_path / "results.sqlite"
    names = [models("good2"), models("hang"), models("good")]
    argv = _survey(db, names, extra=("--timeout", "25", "--per-worker", "3"))
    subprocess.run(argv, capture_output=True, text=True, timeout=300)
    statuses = _statuses(db)
    assert statuses[("hang", 1)] == "ok" and statuses[("hang", 4)] == "error: timeout after 25 s"
    assert statuses[("good", 4)] == statuses[("good2", 4)] == "ok"


def test_resume_after_an_interrupted_survey_measures_every_cell_once(tmp_path, models):
    db = tmp_path / "results.sqlite"
    names = [models("good"), models("good2"), models("oom")]
    runner = subprocess.Popen(_survey(db, names, batches="1,2,4"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not db.exists() or not _key_counts(db)):
        time.sleep(0.2)
    runner.kill()  # mid-way: at least one cell stored, not all of them; its worker dies with it
    runner.wait()
    time.sleep(1.0)
    interrupted = sum(_key_counts(db).values())
    assert 0 < interrupted < 9
    done = subprocess.run(_survey(db, names, batches="1,2,4"), capture_output=True, text=True, timeout=300)
    assert "already in" in done.stdout
    counts = _key_counts(db)
    assert len(counts) == 9 and set(counts.values()) == {1}  # 3 models x 3 batches, each exactly once
    assert f"{9 - interrupted} cells to measure" in done.stdout


def test_two_surveys_write_one_store_concurrently(tmp_path, models):
    db = tmp_path / "results.sqlite"
    first = subprocess.Popen(_survey(db, [models("good")], batches="1,2,4"), stdout=subprocess.DEVNULL)
    second = subprocess.Popen(_survey(db, [models("good2")], batches="1,2,4"), stdout=subprocess.DEVNULL)
    assert first.wait(timeout=300) == 0 and second.wait(timeout=300) == 0
    counts = _key_counts(db)
    assert len(counts) == 6 and set(counts.values()) == {1}


def test_plan_skips_done_cells_and_checks_input(tmp_path, models):
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        plan = survey.plan_survey([models("good")], [1, 4], ["fp32"], ["eager"], "cpu", store)
        assert plan.cells == 2 and plan.skipped == 0
        with pytest.raises(Exception, match="unknown backend"):
            survey.plan_survey([models("good")], [1], ["fp32"], ["nope"], "cpu", store)
        with pytest.raises(Exception, match="not supported on cpu"):
            survey.plan_survey([models("good")], [1], ["fp16"], ["eager"], "cpu", store)
        with pytest.raises(Exception, match="batch size must be"):
            survey.plan_survey([models("good")], [0], ["fp32"], ["eager"], "cpu", store)


def test_model_selection():
    from utilscope.models import sets as model_sets

    assert survey.select_models([], []) == model_sets.default_survey()
    regnets = survey.select_models([], ["RegNetX"])
    assert regnets and all(model_sets.family_of(m) == "RegNetX" for m in regnets)
    assert survey.select_models(["torchvision:resnet18", "torchvision:resnet1*"], []) == [
        "torchvision:resnet18",
        "torchvision:resnet101",
        "torchvision:resnet152",
    ]
    with pytest.raises(Exception, match="unknown family"):
        survey.select_models([], ["NotAFamily"])


@pytest.mark.parametrize(
    "extra, suffix, key, value",
    [(["--cudnn-benchmark-limit", "3"], "cudnn.benchmark_limit 3", "cudnn_benchmark_limit", 3),
     (["--cudnn-depthwise-heuristic"], "depthwise heuristic", "cudnn_depthwise_heuristic", True)],
)  # fmt: skip
def test_a_cudnn_setting_is_a_configuration_of_its_own(tmp_path, models, extra, suffix, key, value):
    """A survey whose autotuning tries at most N algorithms per shape, or leaves the depthwise convs to cuDNN's
    heuristics, measures every cell again (its rows have a software key of their own) and its rows record the
    setting, as the worker set it."""
    db = tmp_path / "results.sqlite"
    assert subprocess.run(_survey(db, [models("good")]), capture_output=True).returncode == 0
    again = subprocess.run(_survey(db, [models("good")], extra=extra), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "2 cells to measure" in again.stdout and suffix in again.stdout
    with Store(db) as store:
        frame = store.frame()
    assert sorted(frame["software"].str.endswith(f" · {suffix}")) == [False, False, True, True]
    assert sorted((env.get(key) for env in frame["environment"]), key=str) == sorted(
        [value, value, None, None], key=str
    )


@pytest.mark.parametrize(
    "extra, message",
    [(["--cudnn-benchmark-limit", "-1"], "must be 0"),
     (["--cudnn-benchmark-limit", "2", "--no-cudnn-benchmark"], "give one"),
     (["--cudnn-depthwise-heuristic", "--no-cudnn-benchmark"], "give one"),
     (["--cudnn-depthwise-heuristic", "--backend", "graph,compile"], "not compile")],
)  # fmt: skip
def test_bad_cudnn_benchmark_limit_is_a_usage_error(tmp_path, models, extra, message):
    result = subprocess.run(_survey(tmp_path / "r.sqlite", [models("good")], extra=extra), capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 2 and message in result.stderr and not (tmp_path / "r.sqlite").exists()
