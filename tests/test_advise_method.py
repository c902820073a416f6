"""``advise``'s method on the CPU: each trial timed several times and ranked by its median, rewrites checked on
several inputs, the environment and time recorded. Timings come from a scripted ``run_sweep``, so the medians are
closed-form."""

import json
from datetime import datetime, timedelta

import pytest
import torch
from conftest import QUICK
from torch import nn

from utilscope.advise import advisor, rewrites
from utilscope.advise.advisor import AdviseRequest, advise, median_fields, repeated
from utilscope.advise.rewrites import CHECK_INPUTS, EXACT_RTOL, check_exact, check_inputs
from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.measure.environment import VERSION_KEYS
from utilscope.measure.settings import MeasureRequest
from utilscope.measure.sweep import ProfileRow

# conv 3->13 (unaligned), BatchNorm, ReLU, conv 13->8, pool, linear 8->4: padding widens 13 to 16, BatchNorm folds
UNALIGNED_SOURCE = """
import torch.nn as nn
RESOLUTION = 16


def make():
    return nn.Sequential(nn.Conv2d(3, 13, 3, padding=1), nn.BatchNorm2d(13), nn.ReLU(), nn.Conv2d(13, 8, 3, padding=1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
"""


def row(samples_per_s: float, batch: int = 1, status: str = "ok") -> ProfileRow:
    """A timed row: latency from the throughput, utilization 1e-3 per sample/s (a peak that makes it so)."""
    if status != "ok":
        return ProfileRow(batch=batch, status=status)
    return ProfileRow(
        batch=batch,
        status="ok",
        samples_per_s=samples_per_s,
        latency_ms=batch * 1e3 / samples_per_s,
        utilization=samples_per_s * 1e-3,
    )


def test_a_trial_reports_the_median_of_its_runs_with_their_range():
    fields = median_fields([row(100.0), row(130.0), row(110.0)])
    # sorted 100, 110, 130: the median is 110, its latency 1000 / 110 ms (the middle of 10, 9.09, 7.69)
    assert fields == {
        "status": "ok",
        "repeats": 3,
        "samples_per_s_runs": [100.0, 130.0, 110.0],
        "samples_per_s": 110.0,
        "samples_per_s_min": 100.0,
        "samples_per_s_max": 130.0,
        "latency_ms": pytest.approx(1e3 / 110),
        "utilization": pytest.approx(0.110),
    }
    # an even count: the mean of the middle two, (100 + 120) / 2 = 110
    assert median_fields([row(120.0), row(100.0)])["samples_per_s"] == 110.0


def test_a_failed_run_ends_the_repeats_and_gives_its_status_without_a_median():
    script = iter([row(100.0), row(0.0, status="oom"), row(100.0)])
    calls = []

    def run_once():
        calls.append(1)
        return next(script)

    rows = repeated(run_once, 3)
    assert len(calls) == 2 and [r.status for r in rows] == ["ok", "oom"]  # the oom is not run again
    fields = median_fields(rows)
    assert fields == {"status": "oom", "repeats": 1, "samples_per_s_runs": [100.0]}
    assert len(repeated(lambda: row(5.0), 4)) == 4


@pytest.fixture(scope="module")
def unaligned(write_factory) -> str:
    return f"{write_factory(UNALIGNED_SOURCE, 'unaligned_method')}:make"


def scripted(monkeypatch, speeds: list[float]) -> list[int]:
    """Replace the advisor's ``run_sweep`` with one giving ``speeds`` in turn (samples/s), one per call; the batch
    sizes it was called with are returned as they come."""
    script, batches = iter(speeds), []

    def run_sweep(sweep, sizes):
        batches.append(sizes[0])
        return [row(next(script), sizes[0])]

    monkeypatch.setattr(advisor, "run_sweep", run_sweep)
    return batches


def test_the_ranking_uses_the_median_not_a_lucky_run(unaligned, monkeypatch):
    # at batch 1, three runs each, in the order advise takes them: as given, padded, BatchNorm folded, NCHW
    speeds = [100.0, 100.0, 100.0, 90.0, 300.0, 95.0, 120.0, 118.0, 121.0, 100.0, 99.0, 101.0]
    batches = scripted(monkeypatch, speeds)
    measure = MeasureRequest(unaligned, device="cpu", plan=QUICK, ceilings="skip", peak_tflops=1.0)
    result = advise(AdviseRequest(measure, (1,), ladder=()))
    assert batches == [1] * 12  # four trials x 3 runs; only folding gains, so no combination is tried
    trials = {t.change: t for t in result.trials}
    assert set(trials) == {"as given", "pad channels to 4", "fold BatchNorm", "memory format NCHW-contiguous"}
    pad, fold = trials["pad channels to 4"], trials["fold BatchNorm"]
    # padding's mean (161.7) and best run (300) beat folding's, its median (95) does not: 95 / 100 = 0.95x
    assert (pad.samples_per_s, pad.samples_per_s_min, pad.samples_per_s_max, pad.repeats) == (95.0, 90.0, 300.0, 3)
    assert pad.samples_per_s_runs == [90.0, 300.0, 95.0] and pad.speedup == pytest.approx(0.95)
    assert fold.samples_per_s == 120.0 and fold.speedup == pytest.approx(1.2)
    assert result.best[1].change == "fold BatchNorm"


def test_the_json_records_the_environment_the_time_and_the_method(unaligned, monkeypatch):
    scripted(monkeypatch, [100.0] * 12)
    measure = MeasureRequest(unaligned, device="cpu", plan=QUICK, ceilings="skip", peak_tflops=1.0)
    before = datetime.now().astimezone()
    out = json.loads(json.dumps(advise(AdviseRequest(measure, (1,), ladder=())).to_dict()))
    environment = out["environment"]
    assert set(VERSION_KEYS) <= set(environment) and environment["torch"] == torch.__version__
    assert (environment["device_type"], environment["precision"]) == ("cpu", "fp32")
    measured_at = datetime.fromisoformat(out["measured_at"])
    assert measured_at.utcoffset() == timedelta(0) and before - timedelta(seconds=1) <= measured_at
    assert out["wall_s"] > 0 and out["repeats"] == 3 and all(t["repeats"] == 3 for t in out["trials"])
    assert out["exactness"]["rtol"] == EXACT_RTOL and out["exactness"]["precision"] == "fp32"
    assert [(i["batch"], i["seed"]) for i in out["exactness"]["inputs"]] == list(CHECK_INPUTS)


class WrongUnlessBatchTwo(nn.Module):
    """``inner``, plus 0.5 on every output of a batch other than 2: right on the first check input only."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x)
        return y if x.shape[0] == 2 else y + 0.5


def test_a_rewrite_exact_on_one_input_only_fails_the_check_on_the_others():
    inputs = check_inputs(8, 3)
    assert [tuple(x.shape) for x in inputs] == [(b, 3, 8, 8) for b, _ in CHECK_INPUTS]
    assert not torch.equal(inputs[0][:1], inputs[1])  # different seeds draw different images
    original = nn.Identity()
    assert check_exact(original, WrongUnlessBatchTwo(nn.Identity()), inputs[:1]) == (0.0, 0.0)
    # every other input is off by 0.5, relative to its own largest |value|; the worst is the smallest such max
    smallest = min(float(x.abs().max()) for x, (batch, _) in zip(inputs, CHECK_INPUTS, strict=True) if batch != 2)
    max_abs, max_rel = check_exact(original, WrongUnlessBatchTwo(nn.Identity()), inputs)
    # (x + 0.5) - x in fp32 is 0.5 within one rounding of x's magnitude
    assert max_abs == pytest.approx(0.5, abs=1e-6) and max_rel == pytest.approx(0.5 / smallest, rel=1e-5)
    assert max_rel > EXACT_RTOL


def test_advise_rejects_a_rewrite_that_is_wrong_on_a_later_check_input(unaligned, monkeypatch):
    fold = rewrites.fold_batchnorm

    def inexact_fold(model, example):
        folded, notes = fold(model, example)
        return WrongUnlessBatchTwo(folded), notes

    monkeypatch.setattr(rewrites, "fold_batchnorm", inexact_fold)
    scripted(monkeypatch, [100.0] * 9)  # as given, padded, NCHW: the rejected rewrite is not timed
    measure = MeasureRequest(unaligned, device="cpu", plan=QUICK, ceilings="skip", peak_tflops=1.0)
    result = advise(AdviseRequest(measure, (1,), ladder=()))
    folded = next(t for t in result.trials if t.change == "fold BatchNorm")
    assert folded.status.startswith("rejected: outputs differ") and folded.exact is False
    assert folded.max_abs_diff == pytest.approx(0.5, abs=1e-5) and folded.samples_per_s is None
    pad = next(t for t in result.trials if t.change == "pad channels to 4")
    assert pad.exact and pad.max_rel_diff <= 1e-5 and pad.max_abs_diff <= 1e-5


def test_the_repeat_count_is_checked(unaligned, capsys):
    measure = MeasureRequest(unaligned, device="cpu")
    assert AdviseRequest(measure).repeats == 3 and AdviseRequest(measure, repeats=1).repeats == 1
    for bad in (0, -2, 2.5, True, "3"):
        with pytest.raises(UsageError, match="repeats must be at least 1"):
            AdviseRequest(measure, repeats=bad)
    assert main(["advise", unaligned, "--device", "cpu", "--repeats", "0"]) == 2
    error = capsys.readouterr().err.strip()
    assert "--repeats must be at least 1, got 0" in error and len(error.splitlines()) <= 2
