"""benchmarks/nas_general_validation.py's scores and consistency lines, closed form on hand-made rows."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("benchmarks/nas_general_validation.py")


def test_scores_are_spearman_mape_median_error_and_share_within_ten_percent(script):
    rows = pd.DataFrame(
        {
            "latency_ms": [1.0, 2.0, 4.0, 8.0],
            "predicted_ms": [1.05, 2.4, 3.6, 8.0],  # errors +5%, +20%, -10%, 0%
            "flops_per_sample": [4, 3, 2, 1],
        }
    )
    s = script.scores(rows)
    assert s["networks"] == 4 and s["rho"] == pytest.approx(1.0) and s["flops_rho"] == pytest.approx(-1.0)
    assert s["mape"] == pytest.approx(35 / 4) and s["median"] == pytest.approx(2.5)
    assert s["within"] == pytest.approx(75.0)  # -10% counts as within


def test_consistency_ranks_one_batch_size_against_another(script, capsys):
    frame = pd.DataFrame(
        {
            "space": "mbv3",
            "precision": "fp16",
            "backend": "eager",
            "id": ["a", "b", "c"] * 2,
            "batch": [1] * 3 + [32] * 3,
            "latency_ms": [1.0, 2.0, 3.0, 3.0, 2.0, 1.0],
        }
    )
    script.print_consistency(frame)
    assert capsys.readouterr().out.strip() == (
        "measured against measured, mbv3 fp16 eager: 1 vs 32: -1.000 (median latency ratio 1.00)"
    )
    script.print_consistency(frame[frame["batch"] == 1])  # one batch size: nothing to compare
    assert capsys.readouterr().out == ""
