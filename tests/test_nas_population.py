"""Populations on any GPU (``nas.population``): each network's numbers are those ``predict`` gives it, one at a time."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

import numpy as np
import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.hardware.specs import lookup_gpu
from utilscope.nas.population import PopulationPredictor
from utilscope.nas.sampler import sample_architectures, save_jsonl
from utilscope.nas.spaces import get_space
from utilscope.predict import fit_cache, layers
from utilscope.predict.calibrate import DeviceProfile
from utilscope.predict.features import Gpu
from utilscope.predict.host import CALL_KINDS, HostProfile
from utilscope.predict.ops import sample_configs

BATCH = 2


@pytest.fixture(scope="module")
def predictor(tmp_path_factory):
    """A device profile of the H200 whose configs take arbitrary (hashed) times: trees of 5 iterations, fitted fast."""
    profile = DeviceProfile("NVIDIA H200", "fp16", "graph", {}, 5, {"device_name": "NVIDIA H200"})
    for config in sample_configs(300, seed=5):
        profile.configs[config.key] = config.__dict__
        profile.latency_ms[config.key] = 0.01 + zlib.crc32(config.key.encode()) % 1000 / 1e4
    path = profile.save(tmp_path_factory.mktemp("profile") / "synthetic.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UTILSCOPE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setattr(layers, "ITERATIONS", 5)
        return fit_cache.load_predictor(path)


@pytest.mark.parametrize("space_name", ["mbv3", "regnet"])
@pytest.mark.parametrize("gpu", [None, "v100_sxm2", "t4"])
def test_a_population_gets_what_predict_gives_each_network(predictor, space_name, gpu, tmp_path):
    space = get_space(space_name)
    archs = sample_architectures(space, 3, seed=8)
    path = save_jsonl(tmp_path / "archs.jsonl", archs)
    target = None if gpu is None else Gpu.from_spec(lookup_gpu(gpu, "fp16"), "fp16")
    population = PopulationPredictor(predictor, space, BATCH, "fp16", target)
    frame = population.predict_frame(archs)
    for arch, row in zip(archs, frame.itertuples(), strict=True):
        (one,) = predictor.predict_on(f"{path}:{arch['id']}", BATCH, [target])
        assert row.id == arch["id"]
        assert row.latency_ms == pytest.approx(one.latency_ms, rel=1e-12)
        assert row.samples_per_s == pytest.approx(one.samples_per_s, rel=1e-12)
        assert row.utilization == pytest.approx(one.utilization, rel=1e-12)
        assert row.gflops == pytest.approx(one.flops / BATCH / 1e9, rel=1e-12)
        assert row.gflops == pytest.approx(space.complexity(arch).flops / 1e9, rel=1e-12)  # the analytic count
    assert population.transferred_from == ("" if gpu is None else "NVIDIA H200")
    again = population.predict_frame(archs[::-1])  # every layer is known now: nothing is traced again
    assert np.allclose(again["latency_ms"].to_numpy()[::-1], frame["latency_ms"].to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("space_name", ["mbv3", "regnet"])
@pytest.mark.parametrize("conv_us", [2.0, 600.0])  # the GPU's pace, the host's
def test_an_eager_population_chains_its_layers_timelines_as_predict_does_a_network(
    predictor, space_name, conv_us, tmp_path
):
    host = HostProfile("a CPU", "2.0", "NVIDIA H200", {kind: conv_us if kind == "conv" else 1.0 for kind in CALL_KINDS})
    eager = replace(predictor, host=host)
    space = get_space(space_name)
    archs = sample_architectures(space, 3, seed=8)
    path = save_jsonl(tmp_path / "archs.jsonl", archs)
    frame = PopulationPredictor(eager, space, BATCH, "fp16", None, "eager").predict_frame(archs)
    graph = PopulationPredictor(predictor, space, BATCH, "fp16").predict_frame(archs)
    for arch, row, device in zip(archs, frame.itertuples(), graph.itertuples(), strict=True):
        (one,) = eager.predict_on(f"{path}:{arch['id']}", BATCH, [None], backend="eager")
        # the network's stages and blocks above the space's layers are not module calls of any layer: within 1%
        assert row.samples_per_s == pytest.approx(one.samples_per_s, rel=0.01)  # back to back: the longer side
        assert row.latency_ms == pytest.approx(one.latency_ms, rel=0.01)
        assert row.latency_ms >= device.latency_ms  # never faster than the GPU alone
    assert (frame["latency_ms"] > graph["latency_ms"] * 1.5).all() == (conv_us == 600.0)


def test_a_fused_backend_or_another_precision_is_refused(predictor):
    with pytest.raises(UsageError, match="on the graph or eager backend, not inference"):
        PopulationPredictor(predictor, get_space("mbv3"), BATCH, "fp16", backend="inference")
    with pytest.raises(UsageError, match="it predicts fp16 and autocast to it, not bf16"):
        PopulationPredictor(predictor, get_space("mbv3"), BATCH, "bf16")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpu", "t4", "--precision", "fp32"], "no device profile expresses fp32"),
        (["--gpu", "t4", "--precision", "bf16"], "NVIDIA T4 has no bf16 unit"),
        (["--gpu", "all"], "a population is predicted for one GPU of the spec table at a time"),
        ([], "give --gpu"),
    ],
)
def test_cli_refuses_what_no_profile_predicts_in_one_line(extra, message, tmp_path, capsys, monkeypatch):
    from utilscope.predict import profiles

    if message.startswith("no device profile"):  # every precision has a shipped profile: a registry of fp16 alone
        fp16 = [entry for entry in profiles.shipped() if entry.precision == "fp16"]
        monkeypatch.setattr(profiles, "shipped", lambda: fp16)
    path = save_jsonl(tmp_path / "archs.jsonl", sample_architectures(get_space("mbv3"), 2, seed=1))
    assert main(["nas", "predict", str(path), "--batch", "32", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_search_for_a_gpu_without_a_nas_profile_ranks_its_predicted_candidates(predictor, monkeypatch, capsys):
    """`nas search --gpu t4` on a CPU: the pool predicted on the T4 (by transfer), nothing measured; the feasible
    candidates best objective first."""
    from utilscope.nas import population

    def on(space, gpu, batch, precision="fp16", profile=None):
        target = Gpu.from_spec(lookup_gpu(gpu, precision), precision)
        return PopulationPredictor(predictor, get_space(space), batch, precision, target)

    monkeypatch.setattr(population, "population_predictor", on)
    args = ["nas", "search", "--space", "mbv3", "--gpu", "t4", "--batch", "2", "--pool-size", "6"]
    assert main([*args, "--min-throughput", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predicted"] and doc["gpu"] == "NVIDIA T4" and doc["transferred_from"] == "NVIDIA H200"
    assert doc["pool_size"] == doc["feasible"] == len(doc["candidates"]) == 6
    objectives = [row["objective"] for row in doc["candidates"]]
    assert objectives == sorted(objectives, reverse=True)
    assert main([*args, "--min-throughput", "1e12"]) == 0
    out = capsys.readouterr().out
    assert "predicted by transfer from the NVIDIA H200" in out and "no architecture is predicted" in out


def test_the_h200_table_answers_at_the_resolutions_it_lacks_with_the_general_model_for_stem_and_head(
    predictor, monkeypatch
):
    """The H200's mbv3 table holds stems and heads at OFA's old 5 resolutions only: at the 20 others they are the
    general model's milliseconds (too few of them to fit a layer model), and a network there gets an answer."""
    from utilscope.nas import general
    from utilscope.nas.general import general_block_ms
    from utilscope.nas.space import Layer
    from utilscope.nas.table_predictor import load_table_predictor, shipped_profile

    monkeypatch.setattr(general, "shipped_general_profile", lambda table: "synthetic.json")
    monkeypatch.setattr(fit_cache, "load_predictor", lambda path: predictor)
    table = load_table_predictor(shipped_profile("h200", "mbv3"))
    space = get_space("mbv3")
    stem, head = Layer("stem", (128,), 3, 128), Layer("head", (4,), 160, 4)
    assert not table.table.entries.get(stem.key) and not table.table.entries.get(head.key)
    costs = [space.layer_cost(layer.kind, layer.config) for layer in (stem, head)]
    estimated = table.estimate_layers([stem, head], costs, 1)
    assert np.allclose(estimated, general_block_ms(predictor, space, [stem, head], 1), rtol=1e-12)
    arch = {**sample_architectures(space, 1, seed=3)[0], "resolution": 128}
    row = table.predict_frame([arch], 1).iloc[0]
    assert np.isfinite(row.latency_ms) and row.latency_ms > 0 and row.estimated_layers >= 2
