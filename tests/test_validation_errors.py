"""The validation's error beside a prediction: ``predict.profiles.validation_text`` over the shipped file's rows, and
``benchmarks/predict_errors.py``, which writes that file from scored rows."""

from __future__ import annotations

import pandas as pd
from conftest import load_script

from utilscope.predict import profiles

SCRIPT = "benchmarks/predict_errors.py"


def errors(*rows: dict) -> pd.DataFrame:
    common = {"gpu": "t4", "precision": "amp", "memory_format": "contiguous", "backend": "eager", "torch": ""}
    return pd.DataFrame([{**common, **row} for row in rows], columns=profiles.VALIDATION_COLUMNS)


def test_the_gpus_own_measurements_come_first_then_nvidias_then_timms_newest_torch():
    timm = [
        {
            "source": "timm",
            "torch": "2.9.1",
            "rows": 930,
            "batches": "32–1024",
            "mape": 0.0777,
            "median_error": -0.0192,
        },
        {
            "source": "timm",
            "torch": "2.4.0",
            "rows": 846,
            "batches": "32–1024",
            "mape": 0.0789,
            "median_error": -0.0082,
        },
    ]
    dle = {"source": "dle", "rows": 9, "batches": "64, 128 and 256", "mape": 0.03, "median_error": 0.01}
    measured = {"source": "measured", "rows": 122, "batches": "1 and 256", "mape": 0.1, "median_error": -0.05}
    text = profiles.validation_text(errors(*timm), "t4", "amp", "contiguous", "eager")
    assert text == "validation MAPE 7.8% (median error -1.9%) over 930 published rows, torch 2.9.1"
    text = profiles.validation_text(errors(*timm, dle), "t4", "amp", "contiguous", "eager")
    assert text.endswith("over 9 of NVIDIA's DeepLearningExamples rows, batch 64, 128 and 256")
    text = profiles.validation_text(errors(*timm, dle, measured), "t4", "amp", "contiguous", "eager")
    assert text == (
        "validation MAPE 10.0% (median error -5.0%) over 122 cells (network, batch) measured on this GPU, "
        "batch 1 and 256"
    )


def test_another_precision_layout_backend_or_gpu_has_no_validation():
    table = errors({"source": "dle", "rows": 9, "batches": "64", "mape": 0.03, "median_error": 0.01})
    assert profiles.validation_text(table, "t4", "amp", "contiguous", "eager") is not None
    for other in (
        ("v100_sxm2", "amp", "contiguous", "eager"),
        ("t4", "fp32", "contiguous", "eager"),
        ("t4", "amp", "channels_last", "eager"),
        ("t4", "amp", "contiguous", "graph"),
    ):
        assert profiles.validation_text(table, *other) is None


def test_the_written_table_is_each_conditions_mape_median_error_and_batches():
    script = load_script(SCRIPT)
    common = {
        "gpu": "h100_sxm",
        "memory_format": "channels_last",
        "backend": "graph",
        "source": "measured",
        "torch": "",
    }
    cells = [  # (precision, batch, samples/s, predicted): +10% and -20% in fp16, +50% in fp32
        ("fp16", 1, 100.0, 110.0),
        ("fp16", 256, 1000.0, 800.0),
        ("fp32", 256, 10.0, 15.0),
    ]
    scored = pd.DataFrame(
        [
            {**common, **dict(zip(("precision", "batch", "samples_per_s", "predicted"), cell, strict=True))}
            for cell in cells
        ]
    )
    table = script.errors(scored).set_index("precision")
    assert list(table.columns) == [c for c in profiles.VALIDATION_COLUMNS if c != "precision"]
    assert table.loc["fp16", "rows"] == 2 and table.loc["fp16", "batches"] == "1 and 256"
    assert table.loc["fp16", "mape"] == 0.15 and table.loc["fp16", "median_error"] == -0.05
    assert table.loc["fp32", "batches"] == "256" and table.loc["fp32", "mape"] == 0.5


def test_nvidias_anchored_and_small_batch_rows_are_left_out(tmp_path):
    script = load_script(SCRIPT)
    rows = pd.DataFrame(
        {
            "gpu_key": ["t4"] * 3,
            "layout": ["contiguous"] * 3,
            "precision": ["fp32"] * 3,
            "backend": ["eager"] * 3,
            "batch": [64, 8, 128],
            "samples_per_s": [100.0, 100.0, 100.0],
            "predicted_samples_per_s": [90.0, 10.0, 10.0],
            "anchor": [None, None, "torchvision:resnet50"],
        }
    )
    rows.to_csv(tmp_path / "dle.csv", index=False)
    kept = script.dle_rows(tmp_path / "dle.csv")
    assert list(kept["batch"]) == [64] and list(kept["source"]) == ["dle"] and list(kept["gpu"]) == ["t4"]
