"""scripts/gpu_conditions.sh, sourced by every gpu_*.sh script, on the CPU: `packed_out` packs what a call wrote
under $OUT into one file (the lender brings back at most 8 files, 2 folders down), and `condition_args` maps a
condition's name to its flags."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sourced(command: str, out: Path) -> subprocess.CompletedProcess:
    """``command`` run by bash with scripts/gpu_conditions.sh sourced and OUT set to ``out``."""
    return subprocess.run(
        ["bash", "-c", f"source scripts/gpu_conditions.sh && {command}"],
        cwd=ROOT,
        env={"OUT": str(out), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_packed_out_packs_every_file_into_one_and_leaves_earlier_packs(tmp_path):
    names = ["calibrate_h100_fp16.log", "h100_fp16_graph.json", "predict_layers/h100_fp16/m1.json"]
    names += [f"predict_layers/h100_fp16/m{i}.log" for i in range(2, 12)]  # 13 files: over the lender's 8
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    (tmp_path / "earlier-120000.tgz").write_bytes(b"kept")
    result = sourced("packed_out calibrate_h100", tmp_path)
    assert result.returncode == 0, result.stderr
    packs = sorted(p.name for p in tmp_path.iterdir())
    assert len(packs) == 2 and packs[0].startswith("calibrate_h100-") and packs[1] == "earlier-120000.tgz"
    with tarfile.open(tmp_path / packs[0]) as pack:
        members = {m.name.removeprefix("./"): pack.extractfile(m).read().decode() for m in pack if m.isfile()}
    assert members == {name: name for name in names}
    assert "13 files" in result.stdout


def test_packed_out_with_nothing_new_writes_nothing(tmp_path):
    assert sourced("packed_out empty", tmp_path).returncode == 0
    assert list(tmp_path.iterdir()) == []


def test_condition_args_maps_names_to_flags_and_refuses_unknown_ones(tmp_path):
    result = sourced('for c in fp16 amp fp32_nchw; do condition_args $c; echo "$c:${args[*]}"; done', tmp_path)
    assert result.stdout.splitlines() == [
        "fp16:",
        "amp:--precision amp --no-channels-last",
        "fp32_nchw:--precision fp32 --no-channels-last",
    ]
    assert sourced("condition_args fp8", tmp_path).returncode == 1


def stub_gpu_tools(bin_dir: Path) -> None:
    """An nvidia-smi that names an H100 and a python3 that only logs its arguments, in ``bin_dir``."""
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\necho "NVIDIA H100 80GB HBM3, 580.159.04"\n')
    (bin_dir / "python3").write_text('#!/bin/sh\necho "$@" >> "$OUT/python3.args"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)


def test_gpu_calibrate_keeps_profiles_elsewhere_starting_each_from_the_shipped_one(tmp_path):
    stub_gpu_tools(tmp_path / "bin")
    keep, out = tmp_path / "keep", tmp_path / "out"
    keep.mkdir()
    (keep / "h100_amp_graph.json").write_text("timed on this machine")
    env = {"OUT": str(out), "PROFILES": str(keep), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    result = subprocess.run(
        ["bash", "scripts/gpu_calibrate.sh", "60", "5", "fp16", "amp"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    shipped = ROOT / "src/utilscope/predict/profiles/h100_fp16_graph.json"
    assert (keep / "h100_fp16_graph.json").read_bytes() == shipped.read_bytes()
    assert (keep / "h100_amp_graph.json").read_text() == "timed on this machine"
    packs = [p.name for p in out.iterdir()]
    assert len(packs) == 1 and packs[0].startswith("calibrate_h100-")
