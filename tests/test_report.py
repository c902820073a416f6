"""The survey report: summary numbers on hand-made frames (arithmetic in comments), the whole page on a synthetic
store (files, headline numbers, tables, embedded images, no network references), every figure on a store where
every row failed, the figure tables (unique ids, each figure built once) and how a figure of each kind is rendered.
The page in a real browser: tests/test_browser.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from utilscope.errors import UsageError
from utilscope.report import (
    atlas_html,
    build_report,
    families,
    gpu_plots,
    html,
    interactive,
    model_view,
    nas_plots,
    plots,
)
from utilscope.report.figures import Figure, Kind, render
from utilscope.report.html import (
    OP_CLASS_FIGURES,
    SURVEY_FIGURES,
    batch_summary,
    nvml_summary,
    ranked_models,
    utilization_cards,
)
from utilscope.report.synthetic import synthetic_store

REPO = Path(__file__).resolve().parents[1]
# every section's table of figures, in page order
TABLES = {
    "survey": SURVEY_FIGURES,
    "op classes": OP_CLASS_FIGURES,
    "NAS": nas_plots.FIGURES,
    "GPU comparison": gpu_plots.FIGURES,
    "atlas": atlas_html.FIGURES,
}
PAGE_FIGURES = SURVEY_FIGURES + OP_CLASS_FIGURES  # the figures of a one-GPU survey store's page
PNG_NAMES = [figure.png for figure in PAGE_FIGURES if figure.kind is Kind.STATIC]
INTERACTIVE_IDS = [figure.id for figure in PAGE_FIGURES if figure.kind is Kind.INTERACTIVE]


@pytest.fixture(scope="module")
def store() -> tuple[pd.DataFrame, pd.DataFrame]:
    # 12 models in 4 families x batches 1, 8, 32, 128, 256 x backends graph, inference = 120 rows;
    # the largest model of each family runs out of memory at batch 256 (4 x 2 rows) and 2 rows are errors
    return synthetic_store(np.random.default_rng(20250101), models=12, families=4)


@pytest.fixture(scope="module")
def report(store, tmp_path_factory) -> Path:
    measurements, op_classes = store
    return build_report(measurements, op_classes, tmp_path_factory.mktemp("report"))


def failed_store(measurements: pd.DataFrame) -> pd.DataFrame:
    """Every row out of memory, its metrics NaN: what a survey on too small a GPU stores."""
    metrics = ["latency_ms", "samples_per_s", "achieved_tflops", "utilization", "nvml_util"]
    return measurements.assign(status="oom", **{column: np.nan for column in metrics})


def row(model: str, batch: int, backend: str, utilization: float, status: str = "ok", **extra) -> dict:
    return dict(
        model=model,
        resolution=224,
        precision="fp16",
        device="gpu",
        software="sw",
        batch=batch,
        backend=backend,
        family="F",
        status=status,
        utilization=utilization,
        nvml_util=extra.pop("nvml_util", np.nan),
        **extra,
    )


# ---------------------------------------------------------------------------------------------- numbers


def test_the_synthetic_store_has_the_shape_the_tests_assume(store):
    measurements, op_classes = store
    assert len(measurements) == 120
    assert measurements["family"].nunique() == 4
    assert (measurements["status"] == "oom").sum() == 8
    assert measurements["status"].str.startswith("error:").sum() == 2
    # op classes: each of the 24 series at its largest successful batch, 8 classes each
    assert len(op_classes) == 24 * 8


def test_batch_summary_median_best_and_per_backend():
    frame = pd.DataFrame(
        [
            row("a", 8, "graph", 0.10),
            row("b", 8, "graph", 0.30),
            row("a", 8, "inference", 0.20),
            row("b", 8, "inference", np.nan, status="oom"),
        ]
    )
    (summary,) = batch_summary(frame).to_dict("records")
    # ok rows 0.10, 0.30, 0.20: median 0.20, best 0.30 by b on graph; graph median (0.10 + 0.30) / 2 = 0.20
    assert summary["ok"] == 3 and summary["failed"] == 1
    assert summary["median_utilization"] == pytest.approx(0.20)
    assert summary["best_utilization"] == pytest.approx(0.30)
    assert summary["best_model"] == "b (graph)"
    assert summary["median graph"] == pytest.approx(0.20)
    assert summary["median inference"] == pytest.approx(0.20)


def test_ranked_models_take_each_model_at_its_largest_successful_batch_on_its_best_backend():
    frame = pd.DataFrame(
        [
            row("a", 128, "graph", 0.40),
            row("a", 256, "graph", 0.30),  # a's largest batch on graph: 0.30, not the 0.40 at 128
            row("a", 256, "inference", 0.35),  # a's best backend at its largest batch
            row("b", 128, "graph", 0.20),
            row("b", 256, "graph", np.nan, status="oom"),  # b's largest successful batch is 128
            row("c", 256, "graph", 0.05),
        ]
    )
    best = ranked_models(frame, count=2, best=True)
    assert list(best["model"]) == ["a", "b"]
    assert list(best["utilization"]) == [0.35, 0.20]
    assert list(best["batch"]) == [256, 128]
    worst = ranked_models(frame, count=2, best=False)
    assert list(worst["model"]) == ["c", "b"]


def test_nvml_summary_compares_busy_percent_with_flop_utilization():
    frame = pd.DataFrame(
        [
            row("a", 8, "graph", 0.10, nvml_util=90.0),  # 90% / 10% = 9x
            row("b", 8, "graph", 0.20, nvml_util=80.0),  # 80% / 20% = 4x
            row("c", 8, "graph", 0.50, nvml_util=np.nan),  # no sample: left out
        ]
    )
    found = nvml_summary(frame)
    assert found["rows"] == 2
    assert found["median_nvml"] == pytest.approx(0.85)
    assert found["median_flop"] == pytest.approx(0.15)
    assert found["median_ratio"] == pytest.approx(6.5)  # (9 + 4) / 2
    assert found["nvml_above"] == 1.0


def test_iso_utilization_lines_arithmetic():
    # 1000 TFLOP/s peak, 4 GFLOPs per sample: at 10% utilization 0.1 x 1e15 / 4e9 = 25,000 samples/s
    lines = plots.iso_utilization_lines(1000.0, np.array([4.0]))
    assert sorted(lines) == [0.01, 0.03, 0.10, 0.30, 1.00]
    assert lines[0.10][0] == pytest.approx(25_000)
    assert lines[1.00][0] == pytest.approx(250_000)


def test_a_measurement_lies_on_the_iso_line_of_its_own_utilization(store):
    measurements, _ = store
    ok = plots.ok_rows(measurements).iloc[0]
    (samples,) = plots.iso_utilization_lines(ok["peak_tflops"], np.array([ok["flops_per_sample"] / 1e9]))[1.0]
    assert ok["samples_per_s"] == pytest.approx(ok["utilization"] * samples)


def test_excluded_caption_counts_failures_by_kind(store):
    measurements, _ = store
    assert plots.excluded_caption(measurements) == "110 of 120 rows shown; 10 excluded (2 error, 8 oom)"


def test_representative_series_spread_from_lowest_to_highest_utilization(store):
    measurements, op_classes = store
    chosen = plots.representative_series(plots.attributed_rows(op_classes, measurements), limit=5)
    assert len(chosen) == 5
    assert chosen["utilization"].is_monotonic_increasing
    at_largest = plots.largest_batch(plots.ok_rows(measurements))
    assert chosen["utilization"].iloc[0] == at_largest["utilization"].min()
    assert chosen["utilization"].iloc[-1] == at_largest["utilization"].max()


# ---------------------------------------------------------------------------------------------- the page


def test_build_report_writes_the_page_every_png_and_the_csv(store, report):
    measurements, _ = store
    assert report.name == "index.html"
    for name in PNG_NAMES:
        image = imread(report.parent / name)
        assert image.shape[0] > 200 and image.shape[1] > 400
    written = pd.read_csv(report.parent / "measurements.csv")
    assert len(written) == len(measurements)
    assert set(measurements.columns) <= set(written.columns)
    assert written["environment"].iloc[0].startswith("{")  # dict cells become JSON


def test_the_page_shows_the_headline_numbers(store, report):
    measurements, _ = store
    page = report.read_text()
    ok = measurements[measurements["status"] == "ok"]
    assert f"<b>{measurements['model'].nunique()}</b>models" in page
    assert f"<b>{len(measurements)}</b>rows" in page
    assert "<b>110 / 8 / 2</b>ok / oom / error" in page
    for batch, group in ok.groupby("batch"):
        median, best = group["utilization"].median(), group["utilization"].max()
        cells = re.search(rf'<tr><td class="n">{batch}</td>.*?</tr>', page).group(0)
        assert f"{100 * median:.1f}%" in cells and f"{100 * best:.1f}%" in cells
    both = ok.dropna(subset=["nvml_util"])
    assert f"median nvml_util is <b>{both['nvml_util'].median():.1f}%</b>" in page
    assert f"median FLOP utilization is <b>{100 * both['utilization'].median():.1f}%</b>" in page


def test_each_headline_utilization_names_its_condition():
    def row(model, backend, batch, utilization, precision="fp16"):
        return {
            "model": model,
            "resolution": 224,
            "precision": precision,
            "backend": backend,
            "device": "GPU",
            "software": "s",
            "memory_format": "channels_last",
            "batch": batch,
            "utilization": utilization,
        }

    ok = pd.DataFrame([
        row("a", "graph", 1, 0.01), row("a", "graph", 256, 0.10), row("b", "graph", 256, 0.20),
        row("a", "inference", 256, 0.30), row("b", "inference", 256, 0.50), row("b", "inference", 1, 0.60),
    ])  # fmt: skip
    cards = dict(utilization_cards(ok))
    assert cards == {  # the largest batch of each model, per condition; never the two pooled (20% here)
        "median utilization, largest batch (fp16 · graph)": "15.0%",
        "best utilization (fp16 · graph)": "20.0%",
        "median utilization, largest batch (fp16 · inference)": "40.0%",
        "best utilization (fp16 · inference)": "60.0%",
    }
    many = pd.concat([ok.assign(precision=p) for p in ("fp16", "amp", "bf16")], ignore_index=True)
    assert dict(utilization_cards(many))["more conditions, in the tables below"] == "2"  # 6 conditions, 4 shown
    from utilscope.report.html import pooled_conditions

    assert pooled_conditions(ok) == "graph and inference" and pooled_conditions(ok[ok["backend"] == "graph"]) == ""
    assert pooled_conditions(many) == "amp, bf16 and fp16; graph and inference"


def test_the_page_has_top_bottom_and_failure_tables(store, report):
    measurements, _ = store
    page = report.read_text()
    assert "Top 10 models by utilization" in page and "Bottom 10 models by utilization" in page
    at_largest = plots.largest_batch(plots.ok_rows(measurements))
    best, worst = at_largest.loc[at_largest["utilization"].idxmax()], at_largest.loc[at_largest["utilization"].idxmin()]
    top = page.split("Top 10 models")[1].split("Bottom 10 models")[0]
    bottom = page.split("Bottom 10 models")[1].split("<h2>Failures")[0]
    assert top.index(best["model"]) < top.index("</tr>", top.index("<tbody>"))  # the best model is the first row
    assert bottom.index(worst["model"]) < bottom.index("</tr>", bottom.index("<tbody>"))
    failures = page.split("<h2>Failures</h2>")[1]
    assert failures.count("<tr>") == 1 + 10  # header + every failed row
    assert "error: RuntimeError: CUDA error: an illegal memory access was encountered" in failures


def test_the_page_is_self_contained(report):
    page = report.read_text()
    # the static figures are the PNGs beside the page: the folder is the report
    images = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert sorted(images) == sorted(PNG_NAMES)
    for source in images:
        assert (report.parent / source).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # plotly.js, inlined once, names XML namespaces by URL; the page around it names none (the browser tests check
    # that nothing is requested)
    assert page.count(interactive.plotly_script()) == 1
    around = page.replace(interactive.plotly_script(), "")
    assert "http://" not in around and "https://" not in around
    # inline scripts (plotly.js, the explorer's, the model table's) and JSON data (each interactive figure's, beside
    # its element, and the model view's), no script or style sheet from a file
    tags = re.findall(r"<script[^>]*>", page)
    figures = [f'<script type="application/json" data-figure="{element}">' for element in INTERACTIVE_IDS]
    assert set(tags) == {"<script>", '<script type="application/json" id="model-data">', *figures}
    for element, tag in zip(INTERACTIVE_IDS, figures, strict=True):  # each figure once: its element and its JSON
        assert page.count(f'<div class="plot" id="{element}"></div>') == 1 and page.count(tag) == 1
    assert "<link" not in page.lower()


def test_build_report_names_missing_columns(store, tmp_path):
    measurements, op_classes = store
    with pytest.raises(UsageError, match="utilization"):
        build_report(measurements.drop(columns=["utilization"]), op_classes, tmp_path)


def test_build_report_when_every_row_failed_and_nothing_was_attributed(store, tmp_path):
    measurements, _ = store
    page = build_report(failed_store(measurements), pd.DataFrame(), tmp_path).read_text()
    assert "<b>0 / 120 / 0</b>ok / oom / error" in page
    assert "No successful row has an nvml_util sample." in page
    # a figure with nothing to show is one line saying why, not an empty frame, and writes no PNG
    assert "<img " not in page and not any((tmp_path / name).exists() for name in PNG_NAMES)
    assert 'class="plot"' not in page and "data-figure=" not in page
    assert page.count("not drawn, no successful measurements.") == len(SURVEY_FIGURES)
    assert "<b>Op-class shares of time and FLOPs:</b> not drawn, no op-class attribution." in page


def test_build_report_takes_the_stores_dtypes(store, tmp_path):
    # Store.frame() gives nullable Int64 counts, "" for an unknown family and str columns
    measurements, op_classes = store
    typed = measurements.astype({"flops_per_sample": "Int64", "params": "Int64", "model": "str", "status": "str"})
    typed.loc[typed["model"] == typed["model"].iloc[0], "family"] = ""
    page = build_report(typed, op_classes, tmp_path).read_text()
    assert page.count('<img alt="') == len(PNG_NAMES)


# ---------------------------------------------------------------------------------------------- figures


@pytest.mark.parametrize("figure", SURVEY_FIGURES, ids=lambda figure: figure.id)
@pytest.mark.parametrize("rows", ["all_failed", "no_rows"])
def test_every_survey_figure_says_when_no_row_succeeded(store, figure, rows):
    measurements, _ = store
    frame = failed_store(measurements) if rows == "all_failed" else measurements.iloc[:0]
    assert figure.build(frame) == "no successful measurements"


def test_op_class_plot_without_attribution(store):
    measurements, _ = store
    assert plots.plot_op_class_shares(plots.attributed_rows(pd.DataFrame(), measurements)) == "no op-class attribution"


def test_flop_vs_nvml_without_any_nvml_sample(store):
    measurements, _ = store
    assert (
        interactive.flop_vs_nvml(measurements.assign(nvml_util=np.nan)) == "no successful row has an nvml_util sample"
    )


def test_the_survey_figures_count_the_rows_they_leave_out_under_their_title(store):
    measurements, _ = store
    # 120 rows, 8 oom and 2 errors (the synthetic store); flop_vs_nvml also counts the ok rows without a sample
    for figure in SURVEY_FIGURES:
        drawn = figure.build(measurements)
        title = drawn.layout.title.text if figure.kind is Kind.INTERACTIVE else drawn.texts[0].get_text()
        assert "110 of 120 rows shown; 10 excluded (2 error, 8 oom)" in title, figure.id


def test_the_batch_figure_draws_each_backend_in_a_panel_of_its_own(store):
    measurements, _ = store
    figure = interactive.utilization_vs_batch(measurements)
    assert [title.text for title in figure.layout.annotations] == ["backend: graph", "backend: inference"]
    axes = {"x": "graph", "x2": "inference"}
    for trace in figure.data:  # a family's lines in one panel: every point of the trace of that panel's backend
        assert {row[interactive.HOVER.index("backend")] for row in trace.customdata} == {axes[trace.xaxis]}
    assert {trace.name for trace in figure.data if trace.showlegend} == {trace.name for trace in figure.data}
    assert sum(trace.showlegend is not False for trace in figure.data) == measurements["family"].nunique()


# ---------------------------------------------------------------------------------------------- figure tables


def test_every_figure_has_one_id_on_the_page_a_title_a_caption_and_its_kind():
    every = [figure for table in TABLES.values() for figure in table]
    ids = [figure.id for figure in every]
    assert len(set(ids)) == len(ids)  # one page and one folder: an id names one element and one PNG
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", element) for element in ids)  # a file name and an element id as is
    assert all(figure.title and figure.caption and isinstance(figure.kind, Kind) for figure in every)
    # the point clouds are interactive, the boxes, bars, histograms, few lines and the matrix static
    interactive_ids = {figure.id for figure in every if figure.kind is Kind.INTERACTIVE}
    assert interactive_ids == {
        "utilization_vs_batch",
        "utilization_vs_gflops",
        "throughput_vs_gflops",
        "flop_vs_nvml",
        "nas_throughput_vs_gflops",
        "atlas_gpus",
        "atlas_intensity",
    }


def _counting(monkeypatch, module, name: str, calls: dict[str, int]) -> None:
    """Replace the table ``module.name`` by one whose builders count their calls in ``calls`` (by figure id)."""

    def counted(figure: Figure) -> Figure:
        def build(rows):
            calls[figure.id] += 1
            return figure.build(rows)

        return replace(figure, build=build)

    table = getattr(module, name)
    calls.update({figure.id: 0 for figure in table})
    monkeypatch.setattr(module, name, tuple(counted(figure) for figure in table))


def test_a_report_builds_each_figure_of_its_sections_once(store, tmp_path, monkeypatch):
    measurements, op_classes = store
    calls: dict[str, int] = {}
    for module, name in [(html, "SURVEY_FIGURES"), (html, "OP_CLASS_FIGURES"), (nas_plots, "FIGURES")]:
        _counting(monkeypatch, module, name, calls)
    for module in (gpu_plots, atlas_html):
        _counting(monkeypatch, module, "FIGURES", calls)
    build_report(measurements, op_classes, tmp_path)
    # one GPU, no NAS architecture, no published row: the survey's and the op-class figures only, each once
    assert calls == {figure.id: int(figure in PAGE_FIGURES) for table in TABLES.values() for figure in table}


def test_render_writes_a_static_figure_as_its_png_and_embeds_an_interactive_one_with_its_json(tmp_path):
    import plotly.graph_objects as go

    def static(rows):
        figure, (axes,) = plots._figure(4, 3)
        axes.plot(rows, rows)
        return figure

    table = (
        Figure("a_static", "A <static>", "Its caption.", static, Kind.STATIC),
        Figure(
            "an_interactive",
            "Interactive",
            "Hover.",
            lambda rows: go.Figure(go.Scatter(x=rows, y=rows)),
            Kind.INTERACTIVE,
        ),
        Figure("an_empty", "Empty", "Never shown.", lambda rows: "nothing to draw", Kind.STATIC),
    )
    page = render(table, [1, 2], tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_static.png"]  # the empty figure writes nothing
    assert imread(tmp_path / "a_static.png").ndim == 3
    assert '<figure id="a_static"><img alt="A &lt;static&gt;" src="a_static.png">' in page
    assert "<figcaption><b>A &lt;static&gt;.</b> Its caption.</figcaption>" in page
    element = '<div class="plot" id="an_interactive"></div>'
    data = re.search(r'<script type="application/json" data-figure="an_interactive">(.*?)</script>', page).group(1)
    assert page.index(element) < page.index(data) and json.loads(data)["data"][0]["y"] == [1, 2]
    assert '<p class="empty" id="an_empty"><b>Empty:</b> not drawn, nothing to draw.</p>' in page
    assert page.index("a_static") < page.index("an_interactive") < page.index("an_empty")  # the table's order


def test_a_pooled_median_says_what_it_pools():
    import pandas as pd

    from utilscope.report.html import pooled_condition

    rows = pd.DataFrame({"precision": ["fp16", "fp16"], "backend": ["graph", "inference"], "batch": [1, 256]})
    assert pooled_condition(rows) == "fp16; graph and inference; batch 1–256"
    assert pooled_condition(rows.iloc[:1]) == "fp16; graph; batch 1"


def test_an_interactive_figure_names_each_point_with_its_row_and_has_a_trace_per_family(store):
    measurements, _ = store
    figure = interactive.utilization_vs_gflops(measurements)
    shown = plots.largest_batch(plots.ok_rows(measurements)).set_index(["model", "backend"])
    assert figure.layout.xaxis.type == "log" and len(figure.data) == shown["family"].nunique()
    points = 0
    for trace in figure.data:
        for row, x, y in zip(trace.customdata, trace.x, trace.y, strict=True):
            fields = dict(zip(interactive.HOVER, row, strict=True))
            expected = shown.loc[(fields["model"], fields["backend"])]
            assert trace.name.startswith(f"{expected['family']} (") and fields["family"] == expected["family"]
            assert x == pytest.approx(expected["flops_per_sample"] / 1e9)
            assert y == pytest.approx(expected["utilization"])
            # the hover's numbers, to interactive.HOVER_DIGITS significant digits
            assert fields["gflops"] == pytest.approx(x, rel=1e-3) and fields["utilization"] == pytest.approx(
                y, rel=1e-3
            )
            assert fields["samples_per_s"] == pytest.approx(expected["samples_per_s"], rel=1e-3)
            assert fields["batch"] == str(expected["batch"])
            points += 1
    assert points == len(shown)
    assert interactive.utilization_vs_gflops(failed_store(measurements)) == "no successful measurements"


def test_predictions_take_the_condition_of_the_most_rows():
    frame = pd.DataFrame(
        {
            "precision": ["amp", "amp", "fp16"],
            "memory_format": ["contiguous", "contiguous", "channels_last"],
            "backend": ["eager", "eager", "graph"],
            "batch": [1024, 1024, 256],
        }
    )
    assert model_view.predicted_condition(frame) == ("amp", "contiguous", "eager", 1024)
    assert model_view.predicted_condition(frame.iloc[:0]) is None


def test_a_store_of_error_rows_alone_reports_them_without_a_prediction_or_a_traceback(tmp_path, capsys):
    """No row stands in the atlas, so nothing is predicted beside it; the page shows the failed cells."""
    from test_store import make_row

    from utilscope.cli import main
    from utilscope.survey.store import Store

    failed = {name: None for name in ("latency_ms", "samples_per_s", "achieved_tflops", "utilization")}
    with Store(tmp_path / "errors.sqlite") as store:
        store.add(make_row(status="error: RuntimeError: boom", utilization_vs_ceiling=None, **failed))
    assert main(["report", str(tmp_path / "errors.sqlite"), "-o", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "predicting" not in err
    assert (tmp_path / "report" / "index.html").is_file()


def test_a_searched_point_of_an_uncoloured_family_is_drawn_dark_not_grey():
    rows = pd.DataFrame(
        {
            "model": ["timm:a", "timm:b"], "family": ["Coloured", "Other"], "device": "GPU", "resolution": 224,
            "batch": 8, "precision": "fp16", "backend": "graph", "flops_per_sample": 1e9,
            "samples_per_s": 10.0, "gflops": [1.0, 2.0], "utilization": [0.1, 0.2],
        }
    )  # fmt: skip
    coloured, grey = interactive._family_traces(rows, "gflops", "utilization", {"Coloured": "#1f77b4"})
    assert coloured["marker"]["color"] == "#1f77b4" and "color" not in coloured["selected"]["marker"]  # its own
    assert grey["marker"]["color"] == families.OTHER_COLOUR
    assert grey["selected"]["marker"]["color"] == interactive.SEARCHED_GREY


def test_a_gpu_has_one_name_in_the_report_whatever_its_row_calls_it():
    from utilscope.hardware import gpu_display_name
    from utilscope.report.atlas_plots import gpu_label

    assert {gpu_display_name(n) for n in ("h200_sxm", "NVIDIA H200", "NVIDIA H200 SXM", "H200")} == {"NVIDIA H200 SXM"}
    assert gpu_display_name("AMD EPYC 9654") == "AMD EPYC 9654"  # no row: the text itself
    assert gpu_label("rtx_pro_6000_maxq", 18).split("\n") == [
        "NVIDIA RTX PRO",
        "6000 Blackwell",
        "Max-Q Workstation",
        "Edition",
    ]
    rows = pd.DataFrame(
        {
            "model": ["timm:a"] * 2, "family": "A", "device": ["NVIDIA H200", "h200_sxm"], "resolution": 224,
            "batch": 8, "precision": "fp16", "backend": "graph", "flops_per_sample": 1e9, "samples_per_s": 10.0,
            "utilization": 0.1,
        }
    )  # fmt: skip
    gpus = interactive.hover_rows(rows)[:, interactive.HOVER.index("gpu")]
    assert list(gpus) == ["NVIDIA H200 SXM", "NVIDIA H200 SXM"]
