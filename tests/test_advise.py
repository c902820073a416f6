"""``advise`` on the CPU: the trials it measures, utilization on the original FLOPs, the export, bad input."""

import dataclasses
import json

import pandas as pd
import pytest
import torch
from conftest import QUICK, load_script

from utilscope.advise.advisor import AdviseRequest, Trial, advise, reproduce_command, seeded_model
from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.measure.settings import MeasureRequest
from utilscope.models import zoo
from utilscope.present.markdown import replace_block

# conv 3->13 (unaligned), BatchNorm, ReLU, conv 13->8, pool, linear 8->4: padding widens 13 to 16
UNALIGNED_SOURCE = """
import torch.nn as nn
RESOLUTION = 16


def make():
    return nn.Sequential(nn.Conv2d(3, 13, 3, padding=1), nn.BatchNorm2d(13), nn.ReLU(), nn.Conv2d(13, 8, 3, padding=1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
"""


@pytest.fixture(scope="module")
def unaligned(write_factory) -> str:
    return f"{write_factory(UNALIGNED_SOURCE, 'unaligned')}:make"


@pytest.fixture(scope="module")
def advice(unaligned, tmp_path_factory):
    export = tmp_path_factory.mktemp("advise") / "best"
    request = MeasureRequest(unaligned, device="cpu", plan=QUICK, ceilings="skip", peak_tflops=1.0)
    return advise(AdviseRequest(request, (1, 2), ladder=(1, 2, 4), export=str(export))), export


def test_each_change_is_measured_once_per_batch_with_utilization_on_the_original_flops(advice):
    advice, _ = advice
    changes = {t.change for t in advice.trials if t.batch == 1}
    # fp32 on a CPU: the alignment rule's multiple is 4 (13 channels -> 16 all the same)
    assert {"as given", "pad channels to 4", "fold BatchNorm", "memory format NCHW-contiguous"} <= changes
    pad = next(t for t in advice.trials if t.change == "pad channels to 4")
    assert pad.exact and pad.max_rel_diff <= 1e-5
    # conv1 gains 3 filters of 3*3*3 weights + 3 biases = 84, the BatchNorm 3 weights + 3 biases = 6, conv2 3 input
    # channels of 8 filters: 8*3*3*3 = 216; 84 + 6 + 216 = 306
    assert "+306 params" in pad.detail
    ok = [t for t in advice.trials if t.status == "ok"]
    # each timed three times (the default), its median within its runs' range
    assert all(t.repeats == 3 and t.samples_per_s_min <= t.samples_per_s <= t.samples_per_s_max for t in ok)
    # one FLOP count (the original's) and one peak: utilization / samples_per_s is the same for every trial
    ratios = [t.utilization / t.samples_per_s for t in ok]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)
    given = {t.batch: t for t in ok if t.change == "as given"}
    for t in ok:
        assert t.speedup == pytest.approx(t.samples_per_s / given[t.batch].samples_per_s)
    assert set(advice.best) == {1, 2} and all(advice.best[b].batch == b for b in advice.best)
    assert [t.batch for t in advice.batch_ladder] == [1, 2, 4] and advice.saturation_batch in (1, 2, 4)
    assert not advice.gpu_measurement and json.loads(json.dumps(advice.to_dict()))["flops_per_sample"] > 0


def test_the_export_computes_what_the_seeded_original_does(advice, unaligned):
    advice, export = advice
    exported = zoo.build_model(zoo.parse_spec(f"{export}/model.py:build"), 16)
    original = seeded_model(unaligned, 16, seed=0)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.allclose(exported(x), original(x), rtol=1e-5, atol=1e-6)
    assert advice.best[2].change.split(" + ")[0] in (export / "model.py").read_text()


def test_the_reproducing_command_runs_a_rewrite_from_the_export_that_holds_it():
    padded = Trial("pad channels to 8", "rewrite", 256, "graph", "fp16", True, "ok", exact=True)
    assert reproduce_command("timm:rexnet_100", padded, 224, "out", "pad channels to 8") == (
        "utilscope profile out/model.py:build --batch 256 --backend graph --precision fp16 --res 224"
    )
    at_1 = dataclasses.replace(padded, batch=1, channels_last=False)  # the export holds another change
    assert reproduce_command("timm:rexnet_100", at_1, 224, "out", "fold BatchNorm") == (
        "utilscope profile DIR/model.py:build --batch 1 --backend graph --precision fp16 --res 224 "
        "--no-channels-last  # DIR from: utilscope advise timm:rexnet_100 --export DIR --batch 1"
    )
    choice = Trial("precision bf16", "deployment", 1, "graph", "bf16", True, "ok")
    assert reproduce_command("timm:rexnet_100", choice, 224, None, None).startswith(
        "utilscope profile timm:rexnet_100 --batch 1 --backend graph --precision bf16"
    )


def test_an_aligned_model_has_nothing_to_pad(tiny):
    request = MeasureRequest(tiny, device="cpu", plan=QUICK, ceilings="skip")
    result = advise(AdviseRequest(request, (1,), ladder=(), repeats=1))
    assert not any(t.change.startswith("pad channels") for t in result.trials)
    # fp32 on a CPU wants multiples of 4: every layer is aligned (at fp16's 8 the classifier's 4 outputs are not)
    assert result.notes[0].startswith(
        "channel padding: nothing to do (0.00% of conv/linear FLOPs in layers with channels that are not multiples of 4"
    )
    # 64 of 110,592 + 64 conv/linear FLOPs, 0.06%, below 1%
    eight = advise(AdviseRequest(request, (1,), multiple=8, ladder=(), repeats=1))
    assert eight.notes[0].startswith("channel padding: nothing to do (0.06% of conv/linear FLOPs")
    assert result.batch_ladder == [] and result.saturation_batch is None


BRANCHING_SOURCE = """
import torch.nn as nn
RESOLUTION = 16


class Branching(nn.Module):  # control flow on a tensor's value: torch.fx cannot trace it
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 13, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y if y.sum() > 0 else -y


def make():
    return Branching()
"""


def test_a_model_the_padding_pass_cannot_trace_is_advised_without_padding(write_factory):
    spec = f"{write_factory(BRANCHING_SOURCE, 'branching')}:make"
    measure = MeasureRequest(spec, device="cpu", plan=QUICK, ceilings="skip")
    result = advise(AdviseRequest(measure, (1,), ladder=(), repeats=1))
    assert result.notes[0].startswith("channel padding: not tried (100.00% of conv/linear FLOPs")
    assert "torch.fx cannot trace" in result.notes[0] and [t.change for t in result.trials][:1] == ["as given"]
    assert not any(t.change.startswith("pad channels") for t in result.trials)


def test_the_cli_prints_json_and_refuses_bad_input(unaligned, capsys):
    argv = ["advise", unaligned, "--device", "cpu", "--batch", "1", "--ladder", "none", "--repeats", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    keys = {"model", "device", "trials", "best", "commands", "saturation_batch", "environment", "measured_at"}
    assert keys <= set(out)
    assert out["repeats"] == 1 and {t["repeats"] for t in out["trials"] if t["status"] == "ok"} == {1}
    assert main(["advise", unaligned, "--device", "cpu", "--multiple", "0"]) == 2
    assert "multiple" in capsys.readouterr().err
    assert main(["advise", "torchvision:no_such_net", "--device", "cpu"]) == 2
    assert main(["advise", unaligned, "--device", "cpu", "--precisions", "fp32,fp8"]) == 2
    assert "fp8" in capsys.readouterr().err
    assert main(["advise", unaligned, "--device", "cpu", "--backends", "tensorrt"]) == 2
    assert main(["advise", unaligned, "--device", "cpu", "--ladder", ""]) == 2
    assert "batch size" in capsys.readouterr().err


def test_an_advise_request_checks_itself_and_is_frozen(unaligned, tmp_path):
    measure = MeasureRequest(unaligned, device="cpu")
    request = AdviseRequest(measure, [1, 2], backends=["eager"], precisions=["fp32"], ladder=[1, 2])
    assert (request.batches, request.backends, request.precisions, request.ladder) == (
        (1, 2),
        ("eager",),
        ("fp32",),
        (1, 2),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seed = 1  # type: ignore[misc]
    for bad, match in (
        ({"batches": [0]}, "batch"),
        ({"batches": []}, "batch size"),
        ({"multiple": 0}, "multiple"),
        ({"backends": ["tensorrt"]}, "tensorrt"),
        ({"precisions": ["fp8"]}, "fp8"),
        ({"ladder": [-1]}, "batch"),
        ({"seed": -1}, "seed"),
    ):
        with pytest.raises(UsageError, match=match):
            AdviseRequest(measure, **bad)
    with pytest.raises(UsageError, match="MeasureRequest"):
        AdviseRequest(unaligned)  # type: ignore[arg-type]
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        AdviseRequest(measure, export=str(tmp_path / "a_file"))


def test_the_advise_validation_doc_holds_the_numbers_the_committed_jsons_give():
    validation = _validation_script()
    doc = validation.DOC.read_text()
    assert validation.BEGIN in doc and validation.TIMM_BEGIN in doc
    assert replace_block(doc, validation.BEGIN, validation.END, validation.generated()) == doc
    assert replace_block(doc, validation.TIMM_BEGIN, validation.END, validation.timm_generated()) == doc


def test_the_validation_table_says_a_trial_that_did_not_run_by_its_status():
    validation = _validation_script()
    given = {
        "change": "as given",
        "kind": "as given",
        "batch": 1,
        "status": "ok",
        "samples_per_s": 100.0,
        "utilization": 0.01,
        "speedup": 1.0,
    }
    pad = dict(given, change="pad channels to 8", kind="rewrite", status="rejected: 1e-2 > 1e-4", speedup=None)
    fold = dict(given, change="fold BatchNorm", kind="rewrite", samples_per_s=125.0, speedup=1.25)
    result = {
        "model": "m",
        "trials": [given, pad, fold],
        "saturation_batch": None,
        "best": {"1": dict(fold, change="fold BatchNorm")},
    }
    row = validation.speedups(result).iloc[0]
    assert (row["pad"], row["fold"], row["inference"], row["best_speedup"]) == ("rejected", "1.25x", "-", "1.25x")


def test_the_timm_table_names_the_best_combination_short():
    validation = _validation_script()
    given = {
        "change": "as given",
        "kind": "as given",
        "batch": 256,
        "status": "ok",
        "samples_per_s": 100.0,
        "utilization": 0.01,
        "speedup": 1.0,
        "exact": None,
        "max_rel_diff": None,
    }
    pad = dict(given, change="pad channels to 8", kind="rewrite", speedup=1.2, exact=True, max_rel_diff=1e-7)
    both = dict(pad, change="pad channels to 8 + fold BatchNorm", speedup=1.3)
    result = {"model": "timm:m", "trials": [given, pad, both], "best": {"256": both}}
    unaligned = pd.DataFrame(
        [{"model": "timm:m", "gflops": 1.0, "unaligned_share": 0.5, "unaligned_after": 0.0, "flops_added": 0.02}]
    )
    row = validation.timm_gains(unaligned, [result]).iloc[0]
    assert (row["pad"], row["fold"], row["best"], row["max_rel_diff"]) == ("1.20x", "-", "pad + fold 1.30x", "1.0e-07")
    assert row["utilization"] == 0.01  # the model as given


def _validation_script():
    """scripts/advise_validation.py, loaded as a module (scripts/ is not a package)."""
    return load_script("scripts/advise_validation.py")
