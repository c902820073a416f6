"""Population findings (report/population.py) on small frames with closed-form answers, and the timm findings doc
recomputed from the committed CSVs."""

import numpy as np
import pandas as pd
import pytest
from conftest import load_script

from utilscope.present.markdown import replace_block
from utilscope.report import population as pop


def cells(rows):
    """Measurement rows from (model, family, gflops, batch, utilization, samples_per_s) tuples, graph backend."""
    frame = pd.DataFrame(rows, columns=["model", "family", "gflops", "batch", "utilization", "samples_per_s"])
    return frame.assign(
        flops_per_sample=frame.pop("gflops") * 1e9, backend="graph", precision="fp16", status="ok", resolution=224
    )


FRAME = cells(
    [
        ("timm:a", "A", 1.0, 256, 0.10, 100.0),
        ("timm:b", "B", 1.04, 256, 0.02, 25.0),
        ("timm:c", "B", 4.0, 256, 0.20, 50.0),
        ("timm:d", "A", 4.1, 256, 0.05, 10.0),
        ("timm:a", "A", 1.0, 1, 0.01, 1.0),
    ]
)


def test_distribution_extremes_and_family_medians():
    table = pop.distribution(FRAME).set_index(["backend", "batch"])
    assert table.loc[("graph", 256), "models"] == 4 and table.loc[("graph", 256), "p50"] == pytest.approx(0.075)
    assert table.loc[("graph", 256), "max"] == 0.20 and table.loc[("graph", 1), "models"] == 1
    assert pop.extremes(FRAME, "graph", 256, count=2)["name"].tolist() == ["c", "a"]
    assert pop.extremes(FRAME, "graph", 256, count=1, best=False)["name"].tolist() == ["b"]
    medians = pop.family_medians(FRAME, "graph", 256, min_models=2)
    assert medians["family"].tolist() == ["B", "A"]
    assert medians["median_utilization"].tolist() == pytest.approx([0.11, 0.075])


def test_the_size_matched_ratio_divides_out_the_power_law_of_size():
    rows = pop.ok_cells(cells([(f"timm:m{i}", "A", g, 256, 0.01 * g**0.5, 1.0) for i, g in enumerate([1, 4, 16])]))
    assert pop.size_matched_ratio(rows).to_numpy() == pytest.approx(np.ones(3))


def test_design_effects_inside_each_conv_style_compare_models_of_the_same_kind():
    # utilization = 0.01 sqrt(GFLOPs) x factor; the factors (2, 0.5, 0.5, 2) leave the log-log fit as it is, so
    # each model's size-matched ratio is its factor: squeeze-excite doubles, its absence halves, in both styles
    sizes, factors = [1, 2, 4, 8], [2.0, 0.5, 0.5, 2.0]
    frame = cells(
        [
            (f"timm:m{i}", "A", g, 256, 0.01 * g**0.5 * f, 1.0)
            for i, (g, f) in enumerate(zip(sizes, factors, strict=True))
        ]
    )
    design = pd.DataFrame(
        {
            "model": [f"timm:m{i}" for i in range(4)],
            "depthwise_share": [0, 0, 0.5, 0.5],
            "grouped_share": 0.0,
            "squeeze_excite": [True, False, False, True],
            "activation": "relu",
            "aligned_share": 1.0,
            "patchify_stem": False,
            "resolution": 224,
            "reparameterizable": False,
            "depth": [10, 20, 30, 40],
            "width": 64.0,
        }
    )
    marginal = pop.design_effects(frame, design, "graph", 256).set_index(["choice", "value"])
    assert marginal.loc[("squeeze-excite", "yes"), "size_matched"] == pytest.approx(2.0)
    assert marginal.loc[("conv style", "dense"), "size_matched"] == pytest.approx(1.25)
    within = pop.design_effects_within(frame, design, "graph", 256, min_models=1).set_index(["choice", "value"])
    with_se = within.loc[("squeeze-excite", "yes")]
    assert [with_se["dense size_matched"], with_se["depthwise size_matched"]] == pytest.approx([2.0, 2.0])
    assert within.loc[("squeeze-excite", "no"), "depthwise models"] == 1
    assert "conv style" not in within.index.get_level_values("choice")
    sparse = pop.design_effects_within(frame, design, "graph", 256, min_models=2).set_index(["choice", "value"])
    assert sparse.loc["squeeze-excite", "dense size_matched"].isna().all()  # one model each: too few for a median
    assert sparse.loc[("activation", "relu"), "dense size_matched"] == pytest.approx(1.25)


def test_an_outsider_is_placed_against_the_population_by_share_and_by_size():
    population = cells([(f"timm:m{i}", "A", g, 256, 0.01 * g**0.5, 1.0) for i, g in enumerate([1, 4, 16])])
    outsiders = cells([("timm:vit", "ViT", 4.0, 256, 0.04, 1.0), ("timm:tiny", "ViT", 1.0, 256, 0.001, 1.0)])
    table = pop.against_population(population, outsiders, "graph", 256)
    assert table["name"].tolist() == ["vit", "tiny"]
    assert table["population_below"].tolist() == pytest.approx([2 / 3, 0.0])  # 0.01 and 0.02 are below 0.04
    assert table["size_matched"].tolist() == pytest.approx([2.0, 0.1])  # the fit predicts 0.02 at 4 and 0.01 at 1


def test_equal_flops_pairs_join_only_different_families_within_the_tolerance():
    pairs = pop.equal_flops_pairs(FRAME, "graph", 256)
    assert list(zip(pairs["fast"], pairs["slow"], strict=True)) == [("c", "d"), ("a", "b")]
    assert pairs["ratio"].tolist() == [5.0, 4.0]
    wins = pop.family_wins(pairs, min_ratio=4.5)
    assert wins.to_dict("records") == [{"family": "B", "wins": 1, "losses": 0}, {"family": "A", "wins": 0, "losses": 1}]


def test_agreement_compares_the_same_architecture_cell_by_cell():
    other = cells([("torchvision:x", "A", 1.0, 256, 0.08, 80.0)])
    table = pop.agreement(FRAME, other, {"timm:a": "torchvision:x"})
    assert len(table) == 1 and table.loc[0, "throughput_ratio"] == pytest.approx(1.25)
    assert table.loc[0, "utilization_ratio"] == pytest.approx(1.25)


def _findings_script():
    return load_script("scripts/timm_findings.py")


def test_the_timm_findings_doc_holds_the_numbers_the_committed_csvs_give():
    findings = _findings_script()
    block = findings.render(*findings.load())
    doc = findings.DOC.read_text()
    assert findings.BEGIN in doc and replace_block(doc, findings.BEGIN, findings.END, block) == doc
    assert findings.CONCLUSIONS in doc and findings.unquoted(doc, block) == []


def test_the_conclusions_may_quote_only_numbers_the_generated_tables_hold():
    findings = _findings_script()
    doc = f"{findings.CONCLUSIONS}\nmedian 7.84%, gain 15.3x, 1,234.5 GFLOPs and 0.49\n{findings.BEGIN}\n"
    assert findings.unquoted(doc, "| 7.84% | 15.3 | 1,234.5 |") == ["0.49"]


def test_backend_gains_pair_each_model_across_backends():
    graph = cells(
        [
            ("timm:a", "A", 1.0, 256, 0.10, 100.0),
            ("timm:b", "B", 2.0, 256, 0.02, 50.0),
            ("timm:c", "B", 2.0, 256, 0.02, 50.0),
        ]
    )
    fused = cells([("timm:a", "A", 1.0, 256, 0.15, 150.0), ("timm:b", "B", 2.0, 256, 0.04, 100.0)])
    gains = pop.backend_gains(pd.concat([graph, fused.assign(backend="inference")]), "inference", "graph", 256)
    assert gains["name"].tolist() == ["b", "a"] and gains["gain"].tolist() == pytest.approx([2.0, 1.5])  # c: one side
    assert gains["utilization_over"].tolist() == pytest.approx([0.02, 0.10])
    design = pd.DataFrame(
        {
            "model": ["timm:a", "timm:b"],
            "depthwise_share": [0.0, 0.5],
            "grouped_share": 0.0,
            "squeeze_excite": False,
            "activation": "relu",
            "aligned_share": 1.0,
            "patchify_stem": False,
            "resolution": 224,
            "reparameterizable": False,
            "depth": [10, 20],
            "width": 64.0,
        }
    )
    table = pop.gains_by_design(gains, design).set_index(["choice", "value"])
    assert table.loc[("all", "all models"), "models"] == 2
    assert table.loc[("all", "all models"), "median_gain"] == pytest.approx(1.75)
    assert table.loc[("conv style", "depthwise"), "median_gain"] == pytest.approx(2.0)
