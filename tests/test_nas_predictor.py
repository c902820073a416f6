"""The latency-table predictor and `utilscope nas table|fit|predict|search` on the CPU.

A synthetic table (each layer's milliseconds a fixed function of its key) and networks "measured" at exactly
1.25 x the sum of their layers give closed-form expectations: the learned correction is log(1.25) with no slope.
"""

from __future__ import annotations

import copy
import gc
import json
import statistics
import zlib

import numpy as np
import pandas as pd
import pytest
import torch

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.hardware.specs import gpu_matches
from utilscope.nas import table_predictor as P
from utilscope.nas.latency import LatencyTable, distinct_layers, fill_table, load_tables, open_table
from utilscope.nas.sampler import sample_architectures, save_jsonl
from utilscope.nas.space import parse_layer_key
from utilscope.nas.spaces import get_space
from utilscope.survey.schema import GPU_THREADS, CellKey, Configuration
from utilscope.survey.store import Store

SYNTHETIC = Configuration("NVIDIA H200", "channels_last", "synthetic", "", "", False, None, False, GPU_THREADS)

BATCHES = (1, 256)
SLOWDOWN = 1.25  # measured network latency / sum of its layers, by construction


def _layer_ms(key: str, batch: int) -> float:
    return (1 + zlib.crc32(key.encode()) % 100) / 1000 * (1 if batch == 1 else 40)


def _table(archs) -> LatencyTable:
    layers = distinct_layers(get_space("mbv3"), archs)
    entries = {layer.key: {b: _layer_ms(layer.key, b) for b in BATCHES} for layer in layers}
    return LatencyTable("mbv3", "NVIDIA H200", "synthetic", "fp16", False, entries)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """60 mbv3 architectures in a JSONL file, a table of their layers, their 'measurements' and a store of them."""
    folder = tmp_path_factory.mktemp("nas")
    space = get_space("mbv3")
    archs = sample_architectures(space, 60, seed=3)
    path = save_jsonl(folder / "archs.jsonl", archs)
    table = _table(archs)
    rows = []
    for arch in archs:
        for batch in BATCHES:
            layer_sum = sum(_layer_ms(layer.key, batch) for layer in space.layers(arch))
            latency = SLOWDOWN * layer_sum
            rows.append(
                {"id": arch["id"], "batch": batch, "latency_ms": latency, "samples_per_s": batch / latency * 1e3}
            )
    measurements = pd.DataFrame(rows)
    db = folder / "nas.sqlite"
    with Store(db) as store:
        for row in rows:
            key = CellKey(f"nas:mbv3:{row['id']}", 0, row["batch"], "fp16", "graph", SYNTHETIC)
            store.add(
                {"key": key, "status": "ok", "latency_ms": row["latency_ms"], "samples_per_s": row["samples_per_s"]}
            )
        for arch in archs:
            store.add_model_record(f"nas:mbv3:{arch['id']}", arch)
    return {
        "archs": archs,
        "by_id": {a["id"]: a for a in archs},
        "path": path,
        "table": table,
        "measurements": measurements,
        "db": db,
        "folder": folder,
    }


def test_holdout_split_is_fixed_by_its_seed():
    ids = [f"a{i}" for i in range(50)]
    first = P.holdout_split(ids, seed=0)
    assert len(first) == 10  # 20% of 50
    assert first == P.holdout_split(list(reversed(ids)), seed=0)  # order of the input does not matter
    assert first != P.holdout_split(ids, seed=1)


@pytest.fixture(scope="module")
def fitted(dataset) -> P.TablePredictor:
    """The predictor fitted on the dataset (split seed 0), fitted once: a test that changes it works on a copy."""
    return P.fit(dataset["table"], dataset["by_id"], dataset["measurements"], seed=0)


def test_fit_learns_the_constant_slowdown_and_round_trips(dataset, fitted, tmp_path):
    predictor = fitted
    for batch in BATCHES:
        correction = predictor.corrections[batch]
        assert correction.intercept == pytest.approx(np.log(SLOWDOWN), abs=1e-9)  # log(1.25)
        assert np.allclose(correction.coef, 0.0, atol=1e-9)  # nothing else varies
        frame = predictor.predict_frame(dataset["archs"], batch)
        assert np.allclose(frame["latency_ms"], SLOWDOWN * frame["layer_sum_ms"], rtol=1e-9)
        assert np.allclose(frame["samples_per_s"], batch / frame["latency_ms"] * 1e3)
        metrics = predictor.evaluation["per_batch"][str(batch)]
        assert metrics["predictor"]["mape"] < 1e-9 and metrics["predictor"]["spearman"] == pytest.approx(1.0)
        # the sum alone is 1/1.25 of the latency, so its throughput is 1.25x the measured one: 25% off
        assert metrics["layer_sum"]["mape"] == pytest.approx(SLOWDOWN - 1)
    # H200 fp16 dense peak 989.4 TFLOP/s: utilization = flops x samples/s / peak
    frame = predictor.predict_frame(dataset["archs"][:1], 256)
    assert frame["utilization"][0] == pytest.approx(frame["gflops"][0] * 1e9 * frame["samples_per_s"][0] / 989.4e12)
    loaded = P.load_table_predictor(
        predictor.save(tmp_path / "profile.json")
    )  # fit -> save -> load -> same predictions
    for batch in BATCHES:
        pd.testing.assert_frame_equal(
            loaded.predict_frame(dataset["archs"], batch), predictor.predict_frame(dataset["archs"], batch)
        )
    assert loaded.holdout_ids == predictor.holdout_ids and loaded.evaluation == predictor.evaluation


def test_missing_layers_and_batches_are_clear_errors(dataset, fitted):
    predictor = copy.deepcopy(fitted)  # the fixture's predictor and table stay whole
    arch = dataset["archs"][0]
    layer = get_space("mbv3").layers(arch)[1]
    del predictor.table.entries[layer.key]  # the table covers the whole space (its covering set): drop one layer
    assert not P.covered(predictor.table, arch, 256)
    estimated = predictor.predict_frame([arch], 256)  # the block model estimates the missing layer
    assert estimated["estimated_layers"][0] == 1 and estimated["latency_ms"][0] > 0
    head = get_space("mbv3").layers(arch)[-1]
    del predictor.table.entries[head.key]  # 5 heads (one per resolution): too few for a head model, and for a GPU
    predictor.table.device = "NVIDIA A100-SXM4-80GB"  # without a shipped device profile no general model either
    with pytest.raises(UsageError, match=r"has no entry for layer head\(\d+\) at batch 256"):
        predictor.predict_frame([arch], 256)
    with pytest.raises(UsageError, match="no model for batch 8"):
        predictor.predict_frame(dataset["archs"], 8)


@pytest.mark.parametrize("name", ["mbv3", "regnet"])
def test_design_matrix_adds_up_each_network_layer_by_layer(name):
    """Each network's layer sum, estimated layers, layer count, FLOPs and features in the design matrix (built from
    the distinct layers of all networks at once) are those of a loop over the network's own layers."""
    space = get_space(name)
    archs = sample_architectures(space, 40, seed=6)
    layers = list(dict.fromkeys(layer for arch in archs for layer in space.layers(arch)))
    missing = {layer.key for layer in layers[1::7]}  # the table lacks these: the estimator gives 3 x their entry
    entries = {layer.key: {256: _layer_ms(layer.key, 256)} for layer in layers if layer.key not in missing}
    table = LatencyTable(name, "NVIDIA H200", "synthetic", "fp16", False, entries)
    asked = []

    def estimate(layers, costs, batch):
        asked.append([layer.key for layer in layers])
        assert costs == [space.layer_cost(layer.kind, layer.config) for layer in layers]
        return np.array([3 * _layer_ms(layer.key, batch) for layer in layers])

    design = P.design_matrix(table, archs, 256, estimate_layers=estimate)
    assert len(asked) == 1 and sorted(asked[0]) == sorted(missing)  # each missing layer estimated once
    for row, arch in zip(design.itertuples(index=False), archs, strict=True):
        network = space.layers(arch)
        expected = sum((3 if layer.key in missing else 1) * _layer_ms(layer.key, 256) for layer in network)
        assert row.layer_sum_ms == pytest.approx(expected, rel=1e-12)
        assert row.estimated_layers == sum(layer.key in missing for layer in network)
        assert row.layers == len(network) and row.flops == space.complexity(arch).flops
    features = design[[column for column in design.columns if column.startswith("f:")]]
    assert features.to_dict("records") == [{f"f:{k}": v for k, v in space.features(a).items()} for a in archs]
    with pytest.raises(UsageError, match="has no entry for layer"):
        P.design_matrix(table, archs, 256)  # no estimator: a missing layer is an error naming it
    bad = {**archs[0], "resolution": "224"}
    with pytest.raises(UsageError, match=f"{name} architecture field 'resolution'"):
        P.design_matrix(table, [*archs, bad], 256, estimate_layers=estimate)
    with pytest.raises(UsageError, match="no architectures"):
        P.design_matrix(table, [], 256, estimate_layers=estimate)


def test_predict_leaves_the_garbage_collector_as_it_found_it(dataset, fitted):
    """predict pauses the cyclic collector while it composes networks, and restores the caller's setting."""
    predictor = fitted
    assert gc.isenabled()
    predictor.predict_frame(dataset["archs"][:3], 256)
    assert gc.isenabled()
    gc.disable()
    try:
        predictor.predict_frame(dataset["archs"][:3], 256)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_profiles_are_checked_against_the_gpu(fitted, tmp_path):
    assert gpu_matches("h200", "NVIDIA H200") and P.gpu_matches("H200", "NVIDIA H200")
    assert gpu_matches("nvidia-h200", "NVIDIA H200") and P.gpu_matches("NVIDIA H200", "NVIDIA H200")
    assert not gpu_matches("a100", "NVIDIA H200") and not gpu_matches("h20", "NVIDIA H200")
    assert not gpu_matches("a", "NVIDIA H200") and not gpu_matches("", "NVIDIA H200")
    assert P.shipped_profile("h200", "mbv3").is_file()
    with pytest.raises(UsageError, match="no shipped predictor profile for GPU 'a100'"):
        P.shipped_profile("a100", "mbv3")
    with pytest.raises(UsageError, match="is for NVIDIA H200, not 'a100'"):
        P.check_profile_gpu(fitted, "a100")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(UsageError, match="not a utilscope predictor profile"):
        P.load_table_predictor(bad)


def test_cli_fit_predict_and_bad_input(dataset, tmp_path, capsys):
    table_path = dataset["table"].save(tmp_path / "table.json")
    profile = tmp_path / "profile.json"
    assert (
        main(
            [
                "nas",
                "fit",
                "--space",
                "mbv3",
                "--db",
                str(dataset["db"]),
                "--table",
                str(table_path),
                "--out",
                str(profile),
                "--prior-archs",
                "0",
            ]
        )
        == 0
    )
    assert "without the general prior (--prior-archs 0)" in capsys.readouterr().out
    assert (
        main(
            [
                "nas",
                "fit",
                "--space",
                "mbv3",
                "--db",
                str(dataset["db"]),
                "--table",
                str(table_path),
                "--out",
                str(tmp_path / "no.json"),
                "--prior-archs",
                "-1",
            ]
        )
        == 2
    )
    assert "--prior-archs must be at least 0 and at most 100000" in capsys.readouterr().err
    assert main(["nas", "predict", str(dataset["path"]), "--profile", str(profile), "--batch", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "NVIDIA H200" and len(doc["predictions"]) == 60
    assert main(["nas", "predict", str(dataset["path"]), "--profile", str(profile), "--gpu", "a100_sxm4_80gb"]) == 2
    assert "is for NVIDIA H200, not 'a100_sxm4_80gb'" in capsys.readouterr().err
    assert main(["nas", "predict", str(dataset["path"]), "--gpu", "a100"]) == 2  # nothing shipped for an A100
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text('{"space": "mbv3", "resolution": 224, "depths": [2, 2]\n')
    assert main(["nas", "predict", str(malformed), "--gpu", "h200"]) == 2
    assert "malformed.jsonl:1: not JSON" in capsys.readouterr().err
    assert main(["nas", "search", "--space", "nope", "--min-throughput", "1", "--simulate", str(dataset["db"])]) == 2
    assert "unknown search space 'nope'" in capsys.readouterr().err


def test_cli_search_simulation_with_a_perfect_predictor(dataset, fitted, tmp_path, capsys):
    profile = fitted.save(tmp_path / "profile.json")  # as `nas fit` writes it (test_cli_fit_predict_and_bad_input)
    floor = float(dataset["measurements"].query("batch == 256")["samples_per_s"].median())
    capsys.readouterr()
    search = ["nas", "search", "--space", "mbv3", "--min-throughput", str(floor), "--budget", "40"]
    search += ["--simulate", str(dataset["db"]), "--profile", str(profile)]
    assert main([*search, "--json"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    rows = {(r["strategy"], r["target"]): r for r in doc["comparison"]}
    assert doc["pool_size"] == 60 and doc["margins"]["predictor"] < 1e-6  # 2 x held-out MAPE of a perfect fit
    assert rows[("predictor", "best")]["measurements"] == 1 and rows[("predictor", "best")]["found"]
    assert rows[("measure-all", "best")]["measurements"] >= 1
    assert rows[("predictor", "front")]["relative_objective"] is None  # NaN (no answer to compare) is null
    assert main([*search, "--holdout-only", "--json"]) == 0
    assert strict_loads(capsys.readouterr().out)["pool_size"] == 12  # the 20% of 60 held out when fitting


def test_layer_modules_compose_to_the_network():
    """The latency table's layers are the network: same parameters, and each layer's input is the previous
    layer's output."""
    for name in ("mbv3", "regnet"):
        space = get_space(name)
        for arch in sample_architectures(space, 3, seed=5):
            layers = space.layers(arch)
            with torch.device("meta"):  # shapes and parameter counts only: no weights to initialize or multiply
                modules = [space.build_layer(layer) for layer in layers]
                network_params = sum(p.numel() for p in space.build(arch).parameters())
            assert sum(p.numel() for m in modules for p in m.parameters()) == network_params
            x = torch.zeros(1, 3, layers[0].in_size, layers[0].in_size, device="meta")
            with torch.no_grad():
                for layer, module in zip(layers, modules, strict=True):
                    assert tuple(x.shape[1:]) == (layer.in_channels, layer.in_size, layer.in_size)
                    x = module.eval()(x)
            assert tuple(x.shape) == (1, 1000)


def test_latency_table_on_the_cpu_resumes_and_checks_its_configuration(tmp_path):
    space = get_space("regnet")
    arch = space.validate(
        {
            "space": "regnet",
            "resolution": 32,
            "depth": 13,
            "w0": 24,
            "wa": 36.44,
            "wm": 2.49,
            "group_width": 8,
            "bottleneck_ratio": 1,
            "se": False,
        }
    )
    table = open_table("regnet", "fp32", "cpu", cudnn_benchmark=False)
    timed = []
    fill_table(table, [arch], [1], "cpu", lambda done, total: timed.append(done))
    keys = {layer.key for layer in space.layers(arch)}
    assert set(table.entries) == keys and len(timed) == len(keys)
    assert all(ms > 0 for per in table.entries.values() for ms in per.values())
    loaded = LatencyTable.load(table.save(tmp_path / "table.json"))
    again = open_table("regnet", "fp32", "cpu", cudnn_benchmark=False, existing=loaded)
    fill_table(again, [arch], [1], "cpu", lambda done, total: timed.append(done))
    assert len(timed) == len(keys)  # nothing measured twice
    with pytest.raises(UsageError, match="the existing table is for regnet"):
        open_table("regnet", "fp32", "cpu", cudnn_benchmark=True, existing=loaded)


def test_tables_of_one_configuration_merge_and_others_are_refused(tmp_path):
    """Tables timed per batch size (e.g. side by side on two GPUs) merge into one; another configuration is refused."""
    per_batch = {"a": {1: 0.5}, "b": {1: 0.7}}, {"a": {256: 9.0}, "c": {256: 4.0}}
    paths = [
        LatencyTable("mbv3", "NVIDIA H200", "s", "fp16", False, entries).save(tmp_path / f"t{i}.json")
        for i, entries in enumerate(per_batch)
    ]
    merged = load_tables(paths)
    assert merged.entries == {"a": {1: 0.5, 256: 9.0}, "b": {1: 0.7}, "c": {256: 4.0}}
    other = LatencyTable("mbv3", "NVIDIA H200", "s", "fp16", True, {"a": {8: 1.0}}).save(tmp_path / "other.json")
    with pytest.raises(UsageError, match=r"other\.json is a table for mbv3 on NVIDIA H200 in fp16, not "):
        load_tables([paths[0], other])


def test_layer_costs_add_up_to_the_network():
    """The analytic cost of each latency-table layer sums to the network's analytic FLOPs and params."""
    for name in ("mbv3", "regnet"):
        space = get_space(name)
        for arch in sample_architectures(space, 5, seed=11):
            costs = [space.layer_cost(*parse_layer_key(layer.key)) for layer in space.layers(arch)]
            assert sum(c.flops for c in costs) == space.complexity(arch).flops
            assert sum(c.params for c in costs) == space.complexity(arch).params
            assert all(c.activations > 0 for c in costs)


def test_layer_model_learns_a_power_law():
    """Table entries that follow ms = 1e-9 x (flops + 1): the block model, fitted from the table when a layer is
    missing, estimates missing layers close to the law (trees are piecewise constant: within 15%, median 3%)."""
    space = get_space("mbv3")
    archs = sample_architectures(space, 30, seed=4)
    table, layers = _table(archs), {layer.key: layer for layer in distinct_layers(space, archs)}
    law = {key: 1e-9 * (space.layer_cost(*parse_layer_key(key)).flops + 1) for key in table.entries}
    table.entries = {key: {256: ms} for key, ms in law.items()}
    assert P.layer_model_report(table)["block@256"]["holdout_mape"] < 0.05
    blocks = sorted((k for k in table.entries if k.startswith("block")), key=law.get)
    keys = blocks[20:-20:40]  # inside the range of the entries: trees do not extrapolate
    for key in keys:
        del table.entries[key]
    predictor = P.TablePredictor(table, {}, None)
    assert predictor.layer_models == {}  # nothing fitted until a layer is missing
    costs = [space.layer_cost(*parse_layer_key(key)) for key in keys]
    estimates = predictor.estimate_layers([layers[key] for key in keys], costs, 256)
    assert set(predictor.layer_models) == {"block@256"}
    ratios = [ms / law[key] for key, ms in zip(keys, estimates, strict=True)]
    assert all(abs(r - 1) < 0.15 for r in ratios) and abs(statistics.median(ratios) - 1) < 0.03


def test_the_general_prior_carries_the_layer_models_beyond_the_table():
    """The general model's estimates (the prior) follow ms = 1e-9 x (flops + 1) for every block; the table holds
    twice that for all but the largest blocks. Trees alone cannot extrapolate to those; on the prior they estimate
    twice the law there (the residual trees learn the constant log 2; trees are piecewise constant: within 20%,
    median 5%)."""
    space = get_space("mbv3")
    archs = sample_architectures(space, 30, seed=4)
    table, layers = _table(archs), {layer.key: layer for layer in distinct_layers(space, archs)}
    law = {key: 1e-9 * (space.layer_cost(*parse_layer_key(key)).flops + 1) for key in table.entries}
    blocks = sorted((k for k in table.entries if k.startswith("block")), key=law.get)
    largest = blocks[-60:]  # the 25 resolutions put near neighbours below the largest 20
    table.entries = {key: {256: 2 * ms} for key, ms in law.items() if key not in largest}
    prior = {key: {256: law[key]} for key in blocks}
    costs = [space.layer_cost(*parse_layer_key(key)) for key in largest]
    on_prior = P.TablePredictor(table, {}, None, prior_ms=prior).estimate_layers(
        [layers[k] for k in largest], costs, 256
    )
    alone = P.TablePredictor(table, {}, None).estimate_layers([layers[k] for k in largest], costs, 256)
    with_prior = [ms / (2 * law[key]) for key, ms in zip(largest, on_prior, strict=True)]
    without = [ms / (2 * law[key]) for key, ms in zip(largest, alone, strict=True)]
    assert all(abs(r - 1) < 0.2 for r in with_prior) and abs(statistics.median(with_prior) - 1) < 0.05
    # trees are piecewise constant: without the prior the largest table blocks are their ceiling
    assert statistics.median(without) < 0.85 and min(without) < 0.6


def strict_loads(text: str):
    """json.loads that fails on NaN / Infinity, which strict JSON parsers refuse."""

    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_cli_search_measures_on_the_device(tmp_path, capsys):
    """GPU mode, on the CPU: evolution over a small pool, each candidate measured with `profile`, within budget."""
    archs = [a for a in sample_architectures(get_space("mbv3"), 60, seed=2) if a["resolution"] <= 136][:6]
    pool = save_jsonl(tmp_path / "pool.jsonl", archs)
    # a floor of 0.01 samples/s: the mechanics, not the machine's speed (a loaded 2-core machine once missed 1/s)
    assert (
        main(
            [
                "nas",
                "search",
                "--space",
                "mbv3",
                "--min-throughput",
                "0.01",
                "--budget",
                "2",
                "--pool",
                str(pool),
                "--strategy",
                "measure-all",
                "--device",
                "cpu",
                "--batch",
                "1",
                "--json",
            ]
        )
        == 0
    )
    doc = strict_loads(capsys.readouterr().out)
    assert doc["measurements"] == 2 and doc["best_id"] in {a["id"] for a in archs}, doc
    assert doc["best_samples_per_s"] > 0.01 and doc["pool"] == str(pool) and doc["device"] == "cpu"


SEARCH = [
    "nas",
    "search",
    "--space",
    "mbv3",
    "--budget",
    "1",
    "--strategy",
    "measure-all",
    "--batch",
    "1",
    "--pool-size",
    "4",
]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "this machine has none: compare the strategies on a measured store with --simulate DB"),
        (["--device", "cpu", "--work-dir", "a_file"], "the pool folder (--work-dir) a_file exists and is not a folder"),
        (["--device", "cpu", "--work-dir", "w", "--pool", "a_file"], "with --pool nothing is written"),
        (["--device", "cpu", "--pool-size", "0"], "--pool-size must be at least 1"),
    ],
)
def test_gpu_mode_search_refuses_before_sampling_or_measuring(extra, message, tmp_path, monkeypatch, capsys):
    """Without a GPU it used to measure on the CPU for minutes, exit 0, and leave a pool file in the current
    folder; now it refuses unless --device cpu is given, and nothing is written or measured."""
    from utilscope.nas import search_setup

    def measured(*args, **kwargs):
        raise AssertionError("measured")

    monkeypatch.setattr(search_setup, "profile", measured)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text('{"space": "mbv3"}\n')  # a file, and one of architectures as the parser reads it
    assert main([*SEARCH, "--min-throughput", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]


def test_gpu_mode_search_keeps_a_sampled_pool_only_in_its_work_dir(tmp_path, monkeypatch, capsys):
    """Without --work-dir the sampled pool goes to a temporary folder, removed after; with it, it stays there.
    The result is a table or strict JSON (no answer: null, not -Infinity / NaN), never a dict repr."""
    monkeypatch.chdir(tmp_path)
    assert main([*SEARCH, "--device", "cpu", "--min-throughput", "1e12", "--json"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert doc["pool"] is None and doc["pool_size"] == 4 and doc["measurements"] == 1
    assert doc["best_id"] is None and doc["best_objective"] is None and doc["best_samples_per_s"] is None
    assert list(tmp_path.iterdir()) == []
    assert main([*SEARCH, "--device", "cpu", "--min-throughput", "1", "--work-dir", "pools"]) == 0
    out = capsys.readouterr().out
    [pool] = (tmp_path / "pools").iterdir()
    assert pool.name == "mbv3_pool_seed0_n4.jsonl" and "pools/mbv3_pool_seed0_n4.jsonl" in out
    assert "its samples/s" in out and "1 of a budget of 1" in out and "{" not in out
