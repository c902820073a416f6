"""scripts/take_back.py on the CPU: a GPU call's pack is unpacked and each file sorted to its place in the
checkout; a profile is taken only when every config the checkout's copy timed is kept, unchanged; without --apply
nothing is written."""

from __future__ import annotations

import gzip
import tarfile

from conftest import load_script

from utilscope.predict.calibrate import DeviceProfile
from utilscope.predict.ops import OpConfig

CONFIGS = [OpConfig("conv", 1, 8, 8, 8, 3), OpConfig("activation", 1, 8, 8, 8, variant="relu")]


def profile(path, latencies_ms: list[float]):
    """A device profile of the H100 with the first len(latencies_ms) configs timed at those latencies."""
    made = DeviceProfile("NVIDIA H100 80GB HBM3", "fp16", "graph", {}, 0, {"device_name": "NVIDIA H100 80GB HBM3"})
    for config, ms in zip(CONFIGS, latencies_ms, strict=False):
        made.configs[config.key] = config.__dict__
        made.latency_ms[config.key] = ms
    return made.save(path)


def returned_call(tmp_path, root):
    """The checkout's two profiles (one config each) and a call's pack: one profile extended, one changed, a log,
    a layers run and a rows file."""
    profiles = root / "src/utilscope/predict/profiles"
    profiles.mkdir(parents=True)
    for name in ("h100_fp16_graph.json", "h100_amp_graph.json"):
        profile(profiles / name, [0.5])
    out = tmp_path / "out"
    (out / "predict_layers/h100_fp16_eager_b1").mkdir(parents=True)
    profile(out / "h100_fp16_graph.json", [0.5, 0.25])  # a config added: kept
    profile(out / "h100_amp_graph.json", [0.75, 0.25])  # the timed config changed: refused
    (out / "calibrate_h100_fp16.log").write_text("log")
    (out / "predict_layers/h100_fp16_eager_b1/m.json").write_text('{"model": "m"}')
    (out / "h100_fp16_graph.rows-0123.csv.gz").write_bytes(b"")
    call = tmp_path / "call"
    call.mkdir()
    with tarfile.open(call / "calibrate_h100-120000.tgz", "w:gz") as pack:
        pack.add(out, arcname=".")
    return call


def test_a_dry_run_writes_nothing_and_names_the_profile_that_changed(tmp_path, capsys):
    root = tmp_path / "checkout"
    call = returned_call(tmp_path, root)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    code = load_script("scripts/take_back.py").main([str(call), "--gpu", "h100", "--root", str(root)])
    out = capsys.readouterr().out
    assert code == 1 and sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert "profile: h100_amp_graph.json" in out and "NOT TAKEN" in out and "1 changed, 0 lost" in out
    assert "other: h100_fp16_graph.rows-0123.csv.gz: not taken" in out and "dry run" in out


def test_apply_takes_what_passes_each_to_its_place(tmp_path):
    root = tmp_path / "checkout"
    call = returned_call(tmp_path, root)
    argv = [str(call), "--gpu", "h100", "--date", "2026-12-07", "--root", str(root), "--apply"]
    assert load_script("scripts/take_back.py").main(argv) == 1  # the changed profile
    profiles = root / "src/utilscope/predict/profiles"
    assert len(DeviceProfile.load(profiles / "h100_fp16_graph.json").latency_ms) == 2
    assert list(DeviceProfile.load(profiles / "h100_amp_graph.json").latency_ms.values()) == [0.5]  # kept as it was
    logs = root / "benchmarks/results/h100-2026-12-07/logs"
    assert (logs / "calibrate_h100_fp16.log").read_text() == "log"
    layers = root / "benchmarks/results/predict/layers/h100_fp16_eager_b1/m.json.gz"
    assert gzip.decompress(layers.read_bytes()) == b'{"model": "m"}'
    assert not list(profiles.glob("*.rows-*"))
    load_script("scripts/take_back.py").main(argv)  # again: the log is kept beside the first
    assert (logs / "calibrate_h100_fp16_2.log").is_file()
