"""predict/measured.py and scripts/measured_networks.py: a network a profiled GPU measured whole is predicted from that
measurement, as measured on that GPU and times its measured ratio on another, with its provenance."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import load_script

from utilscope.cli import main
from utilscope.predict import fit_cache, measured, run
from utilscope.predict.measured import COLUMNS
from utilscope.predict.predictor import Prediction
from utilscope.predict.run import PredictRequest

# test_predict's synthetic profile, its fitted predictor and network file
from test_predict import net_file, predictor, profile_file  # noqa: F401  isort: skip

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "scripts/measured_networks.py"


def cell(**given) -> dict:
    row = {
        "model": "timm:net",
        "resolution": 32,
        "batch": 8,
        "precision": "fp16",
        "memory_format": "channels_last",
        "backend": "graph",
        "samples_per_s": 100.0,
        "device": "NVIDIA H200",
        "gpu": "h200_sxm",
        "torch": "2.11.0+cu130",
        "date": "2026-12-01",
        "source": "data/h200/survey.sqlite",
    }
    return {**row, **given}


@pytest.fixture()
def shipped(tmp_path, monkeypatch):
    """``write(rows)`` makes ``rows`` the only shipped measured table."""

    def write(rows: list[dict]) -> None:
        folder = tmp_path / f"measured{len(list(tmp_path.iterdir()))}"  # a new folder: a table read afresh
        folder.mkdir()
        pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(folder / "h200.csv", index=False)
        monkeypatch.setattr(measured, "MEASURED_DIR", folder)

    return write


def prediction(samples_per_s: float, gpu_key: str, bound: str = "sm") -> Prediction:
    return Prediction(
        "timm:net",
        gpu_key,
        8,
        "fp16",
        "graph",
        32,
        10**9,
        8e3 / samples_per_s,
        samples_per_s,
        0.1,
        False,
        gpu_key,
        bound,
    )


def test_the_cells_that_serve_a_gpu_are_its_own_then_its_architectures_the_profiles_first_then_by_bandwidth(
    shipped, monkeypatch
):
    gpus = ("h100_sxm", "a100_sxm4_80gb", "h100_nvl", "h200_sxm")
    shipped([cell(gpu=gpu) for gpu in gpus] + [cell(batch=16), cell(backend="eager")])
    found = measured.cells("timm:net", 8, "fp16", "channels_last", "graph")
    assert len(found) == 4
    # the H100 PCIe (2.0 TB/s): the profile's H200 first, then the H100 SXM (3.35 TB/s) before the NVL (3.9 TB/s)
    assert measured.ordered(found, "h100_pcie", "h200_sxm")["gpu"].tolist() == ["h200_sxm", "h100_sxm", "h100_nvl"]
    assert measured.ordered(found, "h100_sxm", "h200_sxm")["gpu"].tolist()[0] == "h100_sxm"
    assert measured.ordered(found, "a100_sxm4_80gb", "h200_sxm")["gpu"].tolist() == ["a100_sxm4_80gb"]
    assert measured.ordered(found, "rtx_4090", "h200_sxm").empty  # no measured GPU of its architecture
    monkeypatch.setattr(measured, "ACROSS_ARCHITECTURES", True)  # how the rule was scored: every GPU serves
    assert measured.ordered(found, "rtx_4090", "h200_sxm")["gpu"].tolist()[:2] == ["h200_sxm", "a100_sxm4_80gb"]


def test_a_measurement_is_the_prediction_on_its_gpu_and_its_ratio_elsewhere_unless_host_bound(shipped):
    shipped([cell(samples_per_s=150.0)])
    found = measured.table()
    own = measured.corrected(prediction(100.0, "h200_sxm"), found, {})
    assert own.samples_per_s == pytest.approx(150.0) and own.latency_ms == pytest.approx(8e3 / 150)
    assert own.measured_ratio == pytest.approx(1.5) and own.measured.startswith(
        "as 150 samples/s measured on the NVIDIA H200"
    )
    there = {"h200_sxm": prediction(100.0, "h200_sxm")}
    carried = measured.corrected(prediction(40.0, "h100_sxm"), found, there)
    assert carried.samples_per_s == pytest.approx(60.0) and carried.utilization == pytest.approx(0.15)
    assert (
        carried.measured.startswith("x1.50, the measured ratio of 150 samples/s")
        and "survey.sqlite" in carried.measured
    )
    host_bound = {"h200_sxm": prediction(100.0, "h200_sxm", bound="host")}
    assert measured.corrected(prediction(40.0, "h100_sxm"), found, host_bound).measured == ""
    elsewhere = replace(prediction(40.0, "h100_sxm"), resolution=64)  # measured at 32 px only
    assert measured.corrected(elsewhere, found, there).samples_per_s == 40.0


def test_predict_takes_a_measured_network_on_every_gpu_and_says_whence(
    profile_file,  # noqa: F811
    predictor,  # noqa: F811
    net_file,  # noqa: F811
    shipped,
    monkeypatch,
    capsys,
):
    monkeypatch.setattr(fit_cache, "load_predictor", lambda path, on_fit=None: predictor)
    request = PredictRequest(net_file, "h200,h100_sxm,rtx_4090", str(profile_file), (8,), resolution=32, measured=False)
    alone = {p.gpu_key: p.samples_per_s for p in run.predict_networks(request).predictions}
    shipped([cell(model=net_file, samples_per_s=2 * alone["h200_sxm"])])
    taken = {p.gpu_key: p for p in run.predict_networks(replace(request, measured=True)).predictions}
    assert taken["h200_sxm"].samples_per_s == pytest.approx(2 * alone["h200_sxm"])
    assert taken["h100_sxm"].samples_per_s == pytest.approx(2 * alone["h100_sxm"])
    assert taken["h100_sxm"].measured_ratio == pytest.approx(2.0)
    assert taken["rtx_4090"].samples_per_s == alone["rtx_4090"] and taken["rtx_4090"].measured == ""
    # the H100 alone: the H200 is predicted beside it for the ratio, and not returned
    (only,) = run.predict_networks(replace(request, gpu="h100_sxm", measured=True)).predictions
    assert only.samples_per_s == pytest.approx(2 * alone["h100_sxm"])
    args = ["predict", net_file, "--profile", str(profile_file), "--gpu", "h100_sxm", "--res", "32", "--batch", "8"]
    assert main(args) == 0
    assert "at batch 8 on the h100_sxm: x2.00, the measured ratio of" in capsys.readouterr().out.replace("\n", " ")
    assert main([*args, "--no-measured", "--json"]) == 0
    assert '"measured": ""' in capsys.readouterr().out


def store(path: Path, device: str, rows: list[tuple]) -> Path:
    """A results store's measurements: (model, samples/s, status, unstable, depthwise heuristic, measured at)."""
    with sqlite3.connect(path) as db:
        db.execute(
            "create table measurements (model, resolution, batch, precision, memory_format, backend, samples_per_s, "
            "device, torch, measured_at, status, unstable, cudnn_benchmark, cudnn_benchmark_limit, "
            "cudnn_depthwise_heuristic)"
        )
        db.executemany(
            "insert into measurements values (?, 224, 256, 'fp16', 'channels_last', 'graph', ?, ?, '2.11', ?, ?, ?, 1, "
            "-1, ?)",
            [
                (model, sps, device, at, status, unstable, heuristic)
                for model, sps, status, unstable, heuristic, at in rows
            ],
        )
    return path


def test_the_table_keeps_a_gpus_ok_stable_default_cells_the_latest_of_each(tmp_path, monkeypatch, capsys):
    script = load_script(SCRIPT)
    first = store(
        tmp_path / "a.sqlite",
        "NVIDIA H100 80GB HBM3",
        [
            ("torchvision:a", 10.0, "ok", 0, 0, "2026-12-01T00:00:00"),
            ("torchvision:b", 20.0, "ok", 1, 0, "2026-12-01T00:00:00"),  # unstable
            ("torchvision:c", 30.0, "ok", 0, 1, "2026-12-01T00:00:00"),  # cuDNN's depthwise heuristic
            ("torchvision:d", 40.0, "oom", 0, 0, "2026-12-01T00:00:00"),
        ],
    )
    again = store(
        tmp_path / "b.sqlite", "NVIDIA H100 80GB HBM3", [("torchvision:a", 11.0, "ok", 0, 0, "2026-12-02T00:00:00")]
    )
    out = tmp_path / "measured" / "h100.csv"
    monkeypatch.setattr("sys.argv", ["measured_networks.py", str(first), str(again), "--out", str(out)])
    assert script.main() == 0
    table = pd.read_csv(out)
    assert table[["model", "samples_per_s", "gpu", "date"]].values.tolist() == [
        ["torchvision:a", 11.0, "h100_sxm", "2026-12-02"]
    ]
    other = store(tmp_path / "c.sqlite", "NVIDIA H200", [("torchvision:a", 12.0, "ok", 0, 0, "2026-12-03T00:00:00")])
    monkeypatch.setattr("sys.argv", ["measured_networks.py", str(first), str(other), "--out", str(out)])
    assert script.main() == 2
    assert "hold 2 GPUs" in capsys.readouterr().err and pd.read_csv(out)["samples_per_s"].tolist() == [11.0]
    monkeypatch.setattr("sys.argv", ["measured_networks.py", str(tmp_path / "none.sqlite"), "--out", str(out)])
    assert script.main() == 2
    assert "no results store at" in capsys.readouterr().err and pd.read_csv(out)["samples_per_s"].tolist() == [11.0]
    monkeypatch.setattr("sys.argv", ["measured_networks.py", str(first), "--out", str(out), "--check"])
    assert script.main() == 1  # the file holds the later timing of torchvision:a, the first store alone the earlier
    assert "write it again" in capsys.readouterr().out and pd.read_csv(out)["samples_per_s"].tolist() == [11.0]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_each_shipped_table_is_its_gpus_stores_as_they_are(gpu, monkeypatch, capsys):
    """A store that gained cells (a GPU call) without its table written again fails here."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("sys.argv", ["measured_networks.py", "--gpu", gpu, "--check"])
    assert load_script(SCRIPT).main() == 0, capsys.readouterr().out


def test_the_shipped_tables_are_one_gpu_each_with_every_column():
    for path in sorted(measured.MEASURED_DIR.glob("*.csv")):
        table = pd.read_csv(path)
        assert list(table.columns) == list(COLUMNS) and table["gpu"].nunique() == 1
        assert path.stem == table["gpu"].iloc[0].split("_")[0] and (table["samples_per_s"] > 0).all()
