"""The GPU atlas: published and measured rows in one frame with their conditions (closed-form utilization), one
table per GPU and condition, reparameterizable models kept out of comparisons, ``utilscope gpus`` and the report's
atlas section. Only the RTX 3090 table's rows are read (the 5090 and PRO 6000 tables are the predictor's test set)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace

import pandas as pd
import pytest
from test_published import NCHW_3090
from test_store import CONFIG, make_row

from utilscope import hardware
from utilscope.cli import main
from utilscope.report import atlas, atlas_html, model_view
from utilscope.report.figures import Kind
from utilscope.survey.schema import CellKey
from utilscope.survey.store import Store
from utilscope.versions import torch_key

FLOPS = 8_000_000_000  # counted FLOPs per sample given to every published row: closed-form utilization
BYTES = 100_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return atlas_store(tmp_path_factory.mktemp("atlas"))


def atlas_store(folder):
    """Ten rows of timm's 3090 table, their -dynamo twin (the same rows, other name: compile), counted by hand,
    and our H200 rows of two of their models, one a reparameterized MobileOne (also the browser tests' atlas)."""
    with open(NCHW_3090) as f:
        lines = f.read().splitlines()
    rows = [lines[0]] + [
        line
        for line in lines[1:]
        if line.split(",")[0] in ("resnet50", "resnet18", "mobileone_s1", "efficientnet_b0", "convnext_tiny")
    ][:10]
    eager = folder / NCHW_3090.name
    eager.write_text("\n".join(rows) + "\n")
    dynamo = folder / "benchmark-infer-amp-nchw-pt240-cu124-rtx3090-dynamo.csv"
    shutil.copy(eager, dynamo)
    db = folder / "atlas.sqlite"
    assert main(["ingest", "timm-benchmark", str(eager), str(dynamo), "--db", str(db), "--no-count"]) == 0
    h200 = replace(CONFIG, device="NVIDIA H200")
    with Store(db) as s:
        for model, resolution, precision in s.published_uncounted():
            reparam = "yes" if "mobileone" in model else "n/a"  # as infer_reparam decides from the GMACs
            s.set_published_counts(
                [
                    (
                        model,
                        resolution,
                        precision,
                        {
                            "flops_per_sample": FLOPS,
                            "other_flops_per_sample": sum(map(ord, model)),  # apart: no two count alike
                            "bytes_per_sample": BYTES,
                            "count_status": "ok",
                            "reparam": reparam,
                            "conv_class": "dense",
                        },
                    )
                ],
            )
        for model in ("timm:resnet50", "timm:mobileone_s1", "timm:mobileone_s1+reparam"):
            key = CellKey(model, 224, 1024, "amp", "eager", replace(h200, memory_format="contiguous"))
            s.add(
                make_row(
                    **key.columns(),
                    samples_per_s=1e4,
                    utilization=FLOPS * 1e4 / 989.4e12,
                    peak_tflops=989.4,
                    achieved_gbs=1000.0,
                    flops_per_sample=FLOPS,
                )
            )
    return db


def test_published_and_measured_rows_share_one_frame_with_their_conditions(store):
    with Store(store, create=False) as s:
        frame = atlas.atlas_rows(s.frame(), s.published_frame())
    published = frame[frame["source"] == atlas.PUBLISHED]
    assert set(published["gpu"]) == {"rtx_3090"} and set(published["backend"]) == {"eager", "compile"}
    first = published[published["backend"] == "eager"].iloc[0]
    # utilization = counted FLOPs x samples/s / (71 TFLOP/s: the 3090's fp16 tensor peak with fp32 accumulate)
    assert first["utilization"] == pytest.approx(FLOPS * first["samples_per_s"] / 71e12)
    assert first["intensity"] == pytest.approx(80.0) and first["condition"] == "amp · contiguous · eager"
    ours = frame[frame["source"] == atlas.MEASURED].set_index(["model", "reparam"])
    assert set(ours.index) == {("timm:resnet50", "n/a"), ("timm:mobileone_s1", "no"), ("timm:mobileone_s1", "yes")}
    assert set(ours["gpu"]) == {"h200_sxm"} and set(ours["conv_class"]) == {"dense"}
    assert ours["bytes_per_sample"].iloc[0] == pytest.approx(1000e9 / 10_000)
    with Store(store, create=False) as s:
        plain = s.frame()
    plain = plain[plain["model"] == "timm:mobileone_s1"]  # measured without its +reparam twin (a survey half done)
    assert list(atlas.measured_rows(plain, {}, {"timm:mobileone_s1"})["reparam"]) == ["no"]  # never compared


def test_comparisons_take_one_table_per_gpu_and_reparameterizable_models_reparameterized(store):
    with Store(store, create=False) as s:
        frame = atlas.atlas_rows(s.frame(), s.published_frame())
    rows = atlas.main_rows(frame)
    assert set(rows["backend"]) == {"eager"}
    mobileone = rows[rows["model"] == "timm:mobileone_s1"]  # reparameterized on both GPUs, its plain H200 row out
    assert set(zip(mobileone["gpu"], mobileone["reparam"], strict=True)) == {("rtx_3090", "yes"), ("h200_sxm", "yes")}
    assert set(rows["gpu"]) == {"rtx_3090", "h200_sxm"} and atlas.gpu_order(rows) == ["rtx_3090", "h200_sxm"]
    gains = atlas.dynamo_gain(frame)
    assert len(gains) == len(frame[(frame["backend"] == "compile")]) and set(gains["gain"]) == {1.0}


def test_gpus_shows_one_model_on_every_gpu_and_refuses_an_unknown_one(store, capsys):
    assert main(["gpus", "resnet50", "--db", str(store), "--json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert {(r["gpu"], r["backend"]) for r in rows} == {
        ("h200_sxm", "eager"),
        ("rtx_3090", "eager"),
        ("rtx_3090", "compile"),
    }
    assert main(["gpus", "timm:nosuchnet", "--db", str(store)]) == 2  # no such model: refused while parsing
    assert "unknown model 'timm:nosuchnet'" in capsys.readouterr().err
    assert main(["gpus", "timm:lcnet_050", "--db", str(store)]) == 2  # a model the store has no row of
    assert "timm:lcnet_050: no counted row" in capsys.readouterr().err
    assert main(["gpus", "resnet50", "--db", str(store), "--same-batch"]) == 2
    assert "--same-batch applies to the summary" in capsys.readouterr().err


def test_gpus_prints_one_table_per_condition_named_in_its_title(store, capsys):
    assert main(["gpus", "resnet50", "--db", str(store)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "timm:resnet50, amp · contiguous · eager, on 2 GPUs" in out
    assert "timm:resnet50, amp · contiguous · compile, on 1 GPU" in out
    assert "Not the same work from one table to the next: they differ in backend: compile, eager." in out


def test_gpus_without_a_store_reads_results_sqlite_here_else_the_shipped_atlas_else_says_both(
    store, tmp_path, monkeypatch, capsys
):
    from utilscope.cli import gpus

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gpus, "SHIPPED_ATLAS", tmp_path / "none.sqlite")
    assert main(["gpus", "resnet50"]) == 2
    err = capsys.readouterr().err
    assert "no such file: results.sqlite (the default store), and no shipped atlas (" in err and err.count("\n") == 1
    monkeypatch.setattr(gpus, "SHIPPED_ATLAS", store)
    assert main(["gpus", "resnet50", "--json"]) == 0  # the shipped atlas, said on stderr
    captured = capsys.readouterr()
    assert {row["gpu"] for row in json.loads(captured.out)} == {"h200_sxm", "rtx_3090"}
    assert captured.err == f"utilscope: no results.sqlite here: reading the shipped atlas, {store} (timm's, " + (
        "NVIDIA's and MLPerf's published rows, the H200's and H100's in timm's condition); --db STORE reads another\n"
    )
    (tmp_path / "results.sqlite").write_bytes(b"")  # one here comes first, and is said to be no store
    assert main(["gpus", "resnet50"]) == 2
    assert "results.sqlite" in capsys.readouterr().err


def test_the_report_has_an_atlas_with_gpu_boxes_and_every_compared_row(store, tmp_path, monkeypatch):
    assert main(["report", str(store), "-o", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<h2>GPU atlas</h2>" in page and 'data-gpu="g-rtx_3090"' in page and 'data-gpu="g-h200_sxm"' in page
    assert page.count('alt="One model across GPUs" src="atlas_slope.png"') == 1  # the PNG beside the page
    for figure in atlas_html.FIGURES:  # each drawn once: a static one as its PNG, the point clouds in the page
        static = figure.kind is Kind.STATIC
        assert (tmp_path / "report" / figure.png).exists() == static, figure.id
        assert page.count(f'id="{figure.id}"') == 1 and page.count(f'data-figure="{figure.id}"') == int(not static)
    assert (tmp_path / "report" / "atlas_slope.png").stat().st_size > 1000
    table = page[page.index('<table id="atlas-table"') :]
    table = table[: table.index("</table>")]
    assert "<td>timm:resnet50</td>" in table and "<td>timm:mobileone_s1</td>" in table
    # the model view: resnet50's rows, measured (the H200), published (the 3090's two tables) and predicted for every
    # other GPU of the spec table, in the store's most common condition, each with its validation where there is one
    data = json.loads(re.search(r'<script type="application/json" id="model-data">(.*?)</script>', page).group(1))
    texts = [[data["texts"][code] for code in row] for row in data["rows"]["timm:resnet50"]]  # cells: indices
    rows = pd.DataFrame(texts, columns=["condition", *data["columns"]])
    by_kind = rows.groupby("kind")["GPU"].agg(set)
    assert by_kind["measured"] == {"NVIDIA H200 SXM"} and by_kind["published"] == {"NVIDIA GeForce RTX 3090"}
    spec_gpus = {  # those with an fp16 unit for amp (not the P40, nor the Maxwell and Kepler rows)
        spec.name
        for spec in hardware.load_specs()
        if spec.memory_bandwidth_gbs and spec.sm_count and "fp16" in spec.precisions
    }
    assert by_kind["predicted"] == spec_gpus - {"NVIDIA H200 SXM", "NVIDIA GeForce RTX 3090"}
    predicted = rows[rows["kind"] == "predicted"].set_index("GPU")
    assert set(predicted["condition"]) == {"amp · contiguous · eager"} and set(predicted["batch"]) == {"1024"}
    errors = model_view.validation_errors().query("gpu == 'rtx_4090' and memory_format == 'contiguous'")
    newest = errors.sort_values("torch", key=lambda c: c.map(torch_key)).iloc[-1]
    assert f"validation MAPE {newest['mape']:.1%}" in predicted.loc["NVIDIA GeForce RTX 4090", "table / how"]
    assert "not validated on this GPU" in predicted.loc["NVIDIA L4", "table / how"]
    assert predicted["table / how"].str.match(r"bound: (sm|memory|tensor|launch)").all()
    # a second report predicts nothing: the rows come from the cache (kind reports), the same to the character
    from utilscope.predict import run

    monkeypatch.setattr(run, "predict_table", lambda request, *_: pytest.fail(f"predicted again: {request.models}"))
    assert main(["report", str(store), "-o", str(tmp_path / "again")]) == 0
    again = (tmp_path / "again" / "index.html").read_text()
    pattern = r'<script type="application/json" id="model-data">(.*?)</script>'
    assert re.search(pattern, again).group(1) == re.search(pattern, page).group(1)


def test_the_summary_gives_class_quartiles_and_pair_ratios_of_shared_rows(store, capsys):
    with Store(store, create=False) as s:
        rows = atlas.main_rows(atlas.atlas_rows(s.frame(), s.published_frame()))
    pairs = atlas.pair_ratios(rows)
    (pair,) = pairs.to_dict(orient="records")  # one class (dense) on one pair of GPUs
    shared = rows[rows["model"].isin(["timm:resnet50", "timm:mobileone_s1"]) & (rows["resolution"] == 224)]
    speed = shared.pivot_table(index="model", columns="gpu", values="samples_per_s", aggfunc="first")
    # the same FLOPs on both: utilization scales by samples/s x the peaks' ratio, 71 / 989.4
    assert (pair["smaller"], pair["bigger"], pair["rows"], pair["other_batch"]) == ("rtx_3090", "h200_sxm", 2, 0)
    assert pair["speedup"] == pytest.approx((speed["h200_sxm"] / speed["rtx_3090"]).median())
    assert pair["utilization_ratio"] == pytest.approx(pair["speedup"] * 71 / 989.4)
    classes = atlas.class_summary(rows)
    assert list(classes["gpu"]) == ["rtx_3090", "h200_sxm"] and list(classes["rows"]) == [len(rows) - 2, 2]
    assert main(["gpus", "--db", str(store), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) == {"classes", "pairs", "spearman", "dynamo", "swap_counts", "swaps", "families"}
    assert summary["dynamo"][0]["50%"] == 1.0


def test_torch_keeps_one_torch_versions_published_tables_and_our_rows(store, capsys):
    frame = pd.DataFrame(
        {
            "source": [atlas.PUBLISHED, atlas.PUBLISHED, atlas.MEASURED],
            "torch": ["2.4.0", "2.9.1", "2.11.0+cu130"],
        }
    )
    assert list(atlas.of_torch(frame, "2.4")["torch"]) == ["2.4.0", "2.11.0+cu130"]
    assert list(atlas.of_torch(frame, "2.9.1")["torch"]) == ["2.9.1", "2.11.0+cu130"]
    assert atlas.of_torch(frame, None).equals(frame)
    assert main(["gpus", "--db", str(store), "--torch", "2.4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dynamo"][0]["50%"] == 1.0
    assert main(["gpus", "--db", str(store), "--torch", "2.9"]) == 2
    assert "--torch 2.9: no published table of that torch version (the store's: 2.4.0)" in capsys.readouterr().err


def test_another_sources_name_for_a_network_is_counted_alike_and_a_network_of_equal_flops_is_not():
    """``atlas.counted_alike``: torchvision's ResNet-50 (NVIDIA's and MLPerf's name) counts as timm's to the unit at
    224 px, FLOPs, other FLOPs and bytes; a GroupNorm variant with the same convolutions has other FLOPs of its own,
    a padded variant other bytes; a model counted at no shared resolution is not compared."""
    rows = pd.DataFrame(
        {
            "model": ["timm:resnet50", "torchvision:resnet50", "torchvision:resnet50", "timm:resnet50_gn", "timm:tf_rn"]
            + ["timm:small"],
            "resolution": [224, 224, 224, 224, 224, 160],
            "precision": ["amp", "amp", "int8", "amp", "amp", "amp"],
            "flops_per_sample": [8e9, 8e9, 8e9, 8e9, 8e9, 8e9],
            "other_flops_per_sample": [4e7, 4e7, 4e7, 9e7, 4e7, 4e7],
            "bytes_per_sample": [2e8, 2e8, float("nan"), 2e8, 2.1e8, 2e8],
        }
    )
    assert atlas.counted_alike(rows, "timm:resnet50") == ["torchvision:resnet50"]
    assert atlas.counted_alike(rows, "torchvision:resnet50") == ["timm:resnet50"]
    assert atlas.counted_alike(rows, "timm:resnet50_gn") == [] and atlas.counted_alike(rows, "timm:nope") == []
    assert set(
        atlas.one_model(rows.assign(condition="c", gpu="g", source="s", table="t", reparam="n/a"), "resnet50")["model"]
    ) == {"timm:resnet50", "torchvision:resnet50"}


def test_equal_flop_rows_that_two_gpus_order_differently_are_swaps():
    rows = pd.DataFrame(
        {
            "model": ["timm:resnet18", "timm:resnet34", "timm:resnet50"] * 2,
            "resolution": [224] * 6,
            "gpu": ["rtx_3090"] * 3 + ["h200_sxm"] * 3,
            "flops_per_sample": [10e9, 10.3e9, 20e9] * 2,
            "samples_per_s": [100.0, 90.0, 50.0, 300.0, 330.0, 140.0],
            "utilization": [0.4, 0.3, 0.2, 0.1, 0.12, 0.04],
            "peak_tflops": [71.0] * 3 + [989.4] * 3,
            "batch": [1024, 1024, 512, 1024, 1024, 1024],  # resnet50 ran out of memory on the 3090 only
        }
    )
    counts, swaps = atlas.rank_swaps(rows)
    assert counts.to_dict(orient="records") == [
        {
            "smaller": "rtx_3090",
            "bigger": "h200_sxm",
            "rows": 3,
            "other_batch": 1,
            "equal_flop_pairs": 1,
            "swaps": 1,
            "share": 1.0,
        }
    ]
    (swap,) = swaps.to_dict(orient="records")  # resnet18 is 1.11x resnet34 on the 3090, 0.91x on the H200
    assert (swap["first"], swap["second"]) == ("timm:resnet18@224", "timm:resnet34@224")
    assert swap["swing"] == pytest.approx((100 / 90) / (300 / 330))
    (family,) = atlas.family_ratios(rows).to_dict(orient="records")
    assert family["family"] == "ResNet" and (family["rows"], family["other_batch"]) == (3, 1)
    assert family["utilization_ratio"] == pytest.approx(0.25) and family["speedup"] == pytest.approx(3.0)
    (same,) = atlas.rank_swaps(rows, same_batch=True)[0].to_dict(orient="records")  # resnet50 left out
    assert (same["rows"], same["other_batch"], same["swaps"]) == (2, 0, 1)
    (family,) = atlas.family_ratios(rows, minimum_rows=2, same_batch=True).to_dict(orient="records")
    assert (family["rows"], family["speedup"]) == (2, pytest.approx((3.0 + 330 / 90) / 2))


def test_a_model_is_predicted_at_its_native_resolution_among_its_most_common_ones():
    def rows(model, *resolutions, backend="eager"):
        return [
            {"model": model, "resolution": r, "precision": "amp", "memory_format": "contiguous", "backend": backend}
            for r in resolutions
        ]

    frame = pd.DataFrame(
        rows("timm:resnet50", 160, 176, 224, 288)  # one row each, as timm's tables give it: 224 is its own
        + rows("timm:efficientnet_b3", 256, 320, 320)  # 320 the most common, though 288 is its own
        + rows("nowhere:net", 288, 256)  # no native resolution known: the smaller
        + rows("timm:convnext_tiny", 288, 288, backend="compile")  # nothing in the condition: all its rows
    )
    chosen = model_view._resolutions(frame, ("amp", "contiguous", "eager", 1024))
    assert chosen.to_dict() == {
        "timm:resnet50": 224,
        "timm:efficientnet_b3": 320,
        "nowhere:net": 256,
        "timm:convnext_tiny": 288,
    }


def test_a_gpu_predicted_from_its_own_profile_says_so_and_no_transfer_validation():
    def predicted(gpu_key, name, source):
        return {
            "model": "timm:resnet50", "gpu_key": gpu_key, "gpu": name, "transferred_from": source,
            "precision": "amp", "memory_format": "contiguous", "backend": "eager", "resolution": 224,
            "batch": 1024, "samples_per_s": 1.0, "utilization": 0.1, "bound": "sm",
        }  # fmt: skip

    predictions = pd.DataFrame(
        [predicted("h200_sxm", "NVIDIA H200 SXM", ""), predicted("l4", "NVIDIA L4", "NVIDIA H200")]
    )
    measured = pd.DataFrame({"model": ["timm:resnet50"], "gpu": ["rtx_3090"]})
    rows = model_view._as_rows(predictions, measured).set_index("gpu")
    assert rows.loc["h200_sxm", "table"] == "utilscope predict (from its own profile)"
    assert rows.loc["h200_sxm", "validation"] == model_view.OWN_PROFILE
    assert rows.loc["l4", "table"] == "utilscope predict (from NVIDIA H200)"
    assert rows.loc["l4", "validation"] == "not validated on this GPU"


def test_the_atlas_figures_show_cnns_and_its_point_clouds_keep_the_others_one_legend_click_away(store):
    from utilscope.report import interactive

    with Store(store, create=False) as s:
        frame = atlas.atlas_rows(s.frame(), s.published_frame())
    hybrid = frame.assign(conv_class=frame["conv_class"].where(frame["model"] != "timm:resnet50", "attention-hybrid"))
    figure = interactive.atlas_gpu_points(hybrid)
    hidden = [trace for trace in figure.data if trace.visible == "legendonly"]
    assert hidden and all(interactive.NON_CNN in trace.name for trace in hidden)
    assert {text for trace in hidden for text in trace.customdata[:, 0]} == {"timm:resnet50"}
    shown = [trace for trace in figure.data if trace.visible != "legendonly"]
    assert "timm:resnet50" not in {text for trace in shown for text in trace.customdata[:, 0]}
    rows = atlas.main_rows(hybrid)
    assert set(rows[atlas.is_cnn(rows)]["model"]) == set(rows["model"]) - {"timm:resnet50"}


def test_the_atlas_table_puts_the_gpus_we_measured_first(store):
    from utilscope.report.atlas_html import table_gpus

    with Store(store, create=False) as s:
        rows = atlas.main_rows(atlas.atlas_rows(s.frame(), s.published_frame()))
    assert atlas.gpu_order(rows) == ["rtx_3090", "h200_sxm"] and table_gpus(rows) == ["h200_sxm", "rtx_3090"]
