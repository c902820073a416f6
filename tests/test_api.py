"""The Python API (``utilscope.api``) on the CPU: each function on a tiny model (or the shipped H200 profile, or a
published table), its result's ``to_frame()`` and ``to_dict()``, and its checks of the options it is given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import QUICK, TINY_FLOPS
from torch import nn

import utilscope
from utilscope import api
from utilscope.errors import UsageError
from utilscope.measure.settings import MeasureRequest

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "data" / "public" / "timm-benchmark" / "benchmark-infer-amp-nhwc-pt240-cu124-rtx3090.csv"
ON_CPU = {"device": "cpu", "backend": "eager", "plan": QUICK, "ceilings": "skip"}  # a quick CPU measurement


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)
    )


def test_the_package_binds_the_api_without_hiding_a_subpackage():
    """``utilscope.api`` holds the seven functions; the package binds those whose names no subpackage has, so that
    ``import utilscope.predict.predictor as pr`` imports the module."""
    import utilscope.predict.predictor as pr
    from utilscope.survey import workflow

    for name in ("count", "profile", "attribute", "predict", "advise", "survey", "ingest"):
        assert callable(getattr(api, name)), name
    for name in ("count", "profile", "ingest"):
        assert getattr(utilscope, name) is getattr(api, name), name
    assert utilscope.predict.predictor is pr and utilscope.api is api
    assert utilscope.SurveyRequest is workflow.SurveyRequest and utilscope.PredictRequest.__name__ == "PredictRequest"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        utilscope.nothing  # noqa: B018


def test_importing_the_package_leaves_the_heavy_modules_unimported():
    code = (
        "import sys, utilscope; print(sorted(m for m in ('sklearn', 'utilscope.advise.advisor', "
        "'utilscope.predict.predictor', 'utilscope.survey.runner', 'utilscope.attribute.attribution') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_count_takes_a_spec_or_a_module_and_gives_a_frame_and_a_dict(tiny):
    result = api.count(tiny)
    frame = result.to_frame()
    assert result.total.flops == TINY_FLOPS and frame["flops"].sum() == TINY_FLOPS
    assert {"name", "type", "op_class", "flops", "other_flops", "bytes", "params", "intensity"} <= set(frame)
    doc = json.loads(json.dumps(result.to_dict()))
    assert {"model", "batch", "resolution", "dtype", "total", "layers", "unsupported"} <= set(doc)
    module = api.count(small_cnn(), batch=2, resolution=16)  # conv 2*8*16*16*27 + linear 2*8*4, per sample
    assert module.total.flops == 2 * (110_592 + 64) and module.model == "Sequential"
    resnet = api.count("torchvision:resnet18", resolution=64)
    assert resnet.to_frame()["op_class"].eq("dense_conv").sum() > 10 and not resnet.unsupported


def test_profile_measures_a_row_per_batch_size_on_the_cpu(tiny):
    result = api.profile(tiny, [1, 2], **ON_CPU)
    frame = result.to_frame()
    assert list(frame["batch"]) == [1, 2] and set(frame["status"]) == {"ok"} and (frame["latency_ms"] > 0).all()
    assert set(frame["device"]) == {result.device} and result.to_dict()["rows"][0]["batch"] == 1
    same = api.profile(MeasureRequest(tiny, **ON_CPU), [1])
    assert same.model == result.model and same.backend == "eager"
    with pytest.raises(UsageError, match="unknown backend"):
        api.profile(tiny, [1], device="cpu", backend="warp")


def test_attribute_gives_each_layers_time_on_the_cpu(tiny):
    explanation = api.attribute(tiny, batch=2, iters=1, **ON_CPU)
    frame = explanation.to_frame()
    assert {"name", "op_class", "flops", "time_ms", "time_share", "flop_share"} <= set(frame)
    assert frame["flops"].sum() == 2 * TINY_FLOPS and frame["time_share"].sum() == pytest.approx(1.0)
    doc = explanation.to_dict()
    assert doc["model"] == explanation.attribution.model and doc["batch"] == 2 and "findings" in doc
    with pytest.raises(UsageError, match="needs a CUDA device"):
        api.attribute(tiny, device="cpu", backend="inference")


def test_advise_measures_its_trials_on_the_cpu(tiny):
    heard = []
    advice = api.advise(tiny, on_trial=heard.append, batches=(2,), ladder=(), **ON_CPU)
    frame = advice.to_frame()
    assert len(frame) == len(heard) == len(advice.trials) >= 1 and set(frame["batch"]) == {2}
    assert "as given" in set(frame["kind"]) and advice.ladder_frame().empty
    assert advice.model == tiny and advice.to_dict()["model"] == tiny  # Advice's attributes read through
    with pytest.raises(UsageError, match="unknown option ladders; valid: .*ladder"):
        api.advise(tiny, ladders=(1,))


def test_profile_attribute_and_advise_measure_a_module_as_given_without_changing_it():
    net = small_cnn()
    before = [t.clone() for t in net.state_dict().values()]
    profiled = api.profile(net, [1, 2], resolution=16, **ON_CPU)
    assert profiled.model.startswith("module:Sequential-") and list(profiled.to_frame()["batch"]) == [1, 2]
    assert profiled.flops_per_sample == api.count(net, resolution=16).total.flops
    layers = api.attribute(net, batch=2, resolution=16, **ON_CPU).to_frame()
    assert len(layers) >= 4  # conv, relu, pool, linear (a flatten may be its own row)
    advice = api.advise(net, batches=(2,), ladder=(), resolution=16, **ON_CPU)
    assert advice.model.startswith("module:Sequential-") and "as given" in set(advice.to_frame()["kind"])
    assert all(torch.equal(a, b) for a, b in zip(before, net.state_dict().values(), strict=True))


@pytest.fixture(scope="module")
def resnet_on_h200():
    """torchvision's ResNet-18 at 64 px predicted on the H200 from the shipped profile (fitted once, cached)."""
    return api.predict("torchvision:resnet18", "h200", batches=(1, 8), resolution=64)


def test_predict_uses_the_shipped_h200_profile_on_a_cpu_only_machine(resnet_on_h200):
    frame = resnet_on_h200.to_frame()
    assert list(frame["batch"]) == [1, 8] and set(frame["gpu_key"]) == {"h200_sxm"} and "layers" not in frame
    assert (frame["latency_ms"] > 0).all() and frame["utilization"].between(0, 1).all()
    assert frame["samples_per_s"].iloc[1] > frame["samples_per_s"].iloc[0]  # batch 8 keeps the GPU busier
    layers = resnet_on_h200.layers_frame()
    assert {"model", "gpu_key", "batch", "name", "predicted_ms"} <= set(layers) and set(layers["batch"]) == {1, 8}
    doc = resnet_on_h200.to_dict()
    assert doc["failures"] == [] and doc["predictions"][0]["usd_per_hour"] is None
    assert Path(doc["profile"]).name == "h200_fp16_graph.json"


def test_predict_transfers_to_another_gpu_and_takes_a_module(resnet_on_h200):
    priced = api.predict(small_cnn(), "rtx_4090", batches=(4,), resolution=32, prices={"rtx4090": 0.5})
    (row,) = priced.to_dict()["predictions"]
    assert row["gpu_key"] == "rtx_4090" and row["transferred_from"] == "NVIDIA H200" and row["model"] == "Sequential"
    assert row["samples_per_usd"] == pytest.approx(row["samples_per_s"] * 3600 / 0.5)
    with pytest.raises(UsageError, match="unknown GPU 'rtx_5900'; closest: rtx_5090"):
        api.predict("torchvision:resnet18", "rtx_5900")
    with pytest.raises(UsageError, match="price 'h200'"):
        api.predict("torchvision:resnet18", "h200", prices={"h200": -1})
    with pytest.raises(UsageError, match="give --gpu"):
        api.predict("torchvision:resnet18")


def test_survey_measures_a_tiny_grid_into_a_store_and_resumes(tiny, tmp_path):
    db = tmp_path / "r.sqlite"
    options = {"batches": (1, 2), "device": "cpu", "backends": ("eager",), "min_time_ms": 20}
    planned = api.survey(tiny, db, dry_run=True, **options)
    assert planned.result is None and planned.to_dict()["planned_cells"] == 2 and not db.exists()
    outcome = api.survey(tiny, db, **options)
    frame = outcome.to_frame()
    assert sorted(frame["batch"]) == [1, 2] and set(frame["status"]) == {"ok"}
    assert outcome.to_dict()["cells"] == 2 and outcome.to_dict()["missing"] == []
    again = api.survey([tiny], db, **options)  # every cell stored: nothing to run
    assert again.result is None and again.to_frame().empty and again.to_dict()["skipped_cells"] == 2
    with pytest.raises(UsageError, match="give the store"):
        api.survey(tiny)
    with pytest.raises(UsageError, match="unknown option batch;"):
        api.survey(tiny, db, batch=1)


def test_ingest_brings_a_published_table_and_counts_a_small_one(tmp_path):
    db = tmp_path / "pub.sqlite"
    result = api.ingest(str(PUBLISHED), db, count=False)
    rows = len(PUBLISHED.read_text().splitlines()) - 1
    assert result.to_frame().to_dict(orient="records") == [{"file": PUBLISHED.name, "rows": rows, "added": rows}]
    assert result.counted is None and api.ingest([PUBLISHED], db, count=False).added == 0  # ingested before
    table = tmp_path / "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv"
    table.write_text(PUBLISHED.read_text().splitlines()[0] + "\nresnet10t,176,9000.0,113.7,1024,5.44,0.70,2.4\n")
    counted = api.ingest(table, tmp_path / "counted.sqlite")
    doc = counted.to_dict()
    assert (doc["added"], doc["counted"], doc["failed"], doc["disagreements"]) == (1, 1, 0, [])
