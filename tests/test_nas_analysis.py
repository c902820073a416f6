"""Analysis of a space's measurements: closed-form cases on a synthetic store of real sampled architectures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from utilscope.errors import UsageError
from utilscope.nas.analysis import analyze, equal_flops_spread, spearman
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.spaces import get_space


def test_spearman_is_pearson_on_ranks():
    x = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0])
    assert spearman(x, x**3) == pytest.approx(1.0)  # monotonic: rank correlation 1
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert np.isnan(spearman(x[:2], x[:2]))  # too few points


def _store_frame(tmp_path, n=12):
    """(measurements, records) as a store holds them: rows keyed by content ids, the records beside them."""
    space = get_space("mbv3")
    records = sample_architectures(space, n, seed=7)
    rows = []
    for record in records:
        flops = space.complexity(record).flops
        expand = space.features(record)["expand_ratio_mean"]
        utilization = 0.01 * expand  # by construction: utilization grows with the expand ratio only
        samples_per_s = utilization * 989.4e12 / flops
        rows.append(
            {
                "model": f"nas:mbv3:{record['id']}",
                "family": "NAS mbv3",
                "device": "NVIDIA H200",
                "resolution": 224,
                "status": "ok",
                "batch": 256,
                "precision": "fp16",
                "backend": "graph",
                "flops_per_sample": flops,
                "samples_per_s": samples_per_s,
                "utilization": utilization,
            }
        )
    return pd.DataFrame(rows), {f"nas:mbv3:{record['id']}": record for record in records}


def test_analysis_finds_the_feature_that_drives_utilization(tmp_path):
    frame, records = _store_frame(tmp_path)
    [result] = analyze(frame, records)
    assert (result.space, result.batch, result.architectures) == ("mbv3", 256, 12)
    top = result.effects.iloc[0]
    assert top.feature == "expand_ratio_mean" and top.spearman == pytest.approx(1.0)
    assert top.top_over_bottom > 1
    assert result.utilization_quantiles["p50"] == pytest.approx(frame["utilization"].median())


def test_equal_flops_spread():
    # two architectures at 1.00 and 1.02 GFLOPs (one ±5% bin), one at 2 GFLOPs alone
    frame = pd.DataFrame(
        {
            "model": ["a", "b", "c"],
            "flops_per_sample": [1.00e9, 1.02e9, 2.0e9],
            "samples_per_s": [1000.0, 1500.0, 700.0],
        }
    )
    spread = equal_flops_spread(frame)
    assert len(spread) == 1 and spread.loc[0, "max_over_min"] == pytest.approx(1.5)  # 1500 / 1000


def test_no_nas_rows_is_a_clear_error():
    frame = pd.DataFrame({"model": ["torchvision:resnet18"], "status": ["ok"]})
    with pytest.raises(UsageError, match="no successful measurements of sampled architectures"):
        analyze(frame, {})


def test_analyze_cli_needs_an_existing_store(tmp_path, capsys):
    from utilscope.cli import main

    assert main(["nas", "analyze", str(tmp_path / "absent.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_report_draws_the_nas_figures_only_for_nas_rows(tmp_path):
    from utilscope.report.nas_plots import nas_figures

    frame, records = _store_frame(tmp_path)
    (tmp_path / "report").mkdir()
    page = nas_figures(frame, records, tmp_path / "report")
    # the point cloud is interactive (in the page), the distribution and the effects are PNGs beside it
    assert '<div class="plot" id="nas_throughput_vs_gflops"></div>' in page
    assert '<script type="application/json" data-figure="nas_throughput_vs_gflops">' in page
    assert sorted(path.name for path in (tmp_path / "report").iterdir()) == [
        "nas_feature_effects.png",
        "nas_utilization.png",
    ]
    assert all(path.stat().st_size > 1000 for path in (tmp_path / "report").iterdir())
    zoo_only = pd.DataFrame({"model": ["torchvision:resnet18"], "status": ["ok"]})
    assert nas_figures(zoo_only, {}, tmp_path) == ""


def test_a_nas_store_is_analyzed_from_any_folder(tmp_path, monkeypatch):
    """The committed store names its architectures by content and holds their records: no file is needed."""
    from utilscope.cli import main

    store = Path(__file__).resolve().parent.parent / "data" / "h200" / "nas.sqlite"
    monkeypatch.chdir(tmp_path)
    assert main(["nas", "analyze", str(store), "--json"]) == 0
