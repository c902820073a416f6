"""The report for a survey of hundreds of models in ~60 families (a timm survey): synthetic family sizes, which families
get a colour, crowded marker styles, the interactive figures' traces of many families, and the page's filterable,
sortable table of every model (its rows, its cells, its script; run in headless Chromium when it is installed).
Expectations are worked out in the comments.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import row as report_row

from utilscope.report import build_report, families, html, interactive, plots
from utilscope.report.model_table import NOT_MEASURED, SCRIPT, failed_text, model_table, table_batches
from utilscope.report.synthetic import FAMILIES, family_parameters, family_sizes, synthetic_models, synthetic_store

# 120 models over 30 families, sizes family_sizes(120, 30, 1.0) = [24, 12, 9, 7, 5, 5, 4, 4, 3, 3, 3 x 6, 2 x 14]
MANY = dict(models=120, families=30, skew=1.0, batches=(1, 256), backends=("graph",), errors=0)


@pytest.fixture(scope="module")
def many() -> tuple[pd.DataFrame, pd.DataFrame]:
    # 120 models x 2 batches x 1 backend = 240 rows; the largest model of each of the 30 families (all have two or
    # more) runs out of memory at batch 256: 30 rows; no error rows, so every model has a successful row
    return synthetic_store(np.random.default_rng(7), **MANY)


@pytest.fixture(scope="module")
def page(many, tmp_path_factory) -> Path:
    return build_report(*many, tmp_path_factory.mktemp("many"))


def models_table_html(page_text: str) -> str:
    return re.search(r'<table id="models" class="sortable">.*?</table>', page_text, re.S).group(0)


# ---------------------------------------------------------------------------------------------- synthetic


def test_family_sizes_share_the_models_out():
    assert family_sizes(12, 8) == [2, 2, 2, 2, 1, 1, 1, 1]  # equal shares, the first families one more
    assert family_sizes(5, 8) == [1, 1, 1, 1, 1, 0, 0, 0]
    # one each, then 7 by weights 1, 1/2, 1/3 (sum 11/6): 1 + 42/11 = 4.82, 1 + 21/11 = 2.91, 1 + 14/11 = 2.27;
    # floors 4, 2, 2 leave 2 for the largest remainders (0.91, then 0.82): 5, 3, 2
    assert family_sizes(10, 3, skew=1.0) == [5, 3, 2]
    assert sum(family_sizes(700, 60, skew=1.0)) == 700


def test_synthetic_models_beyond_the_named_families():
    parameters = family_parameters(30)
    assert list(parameters)[:8] == list(FAMILIES) and list(parameters)[8:10] == ["Family 09", "Family 10"]
    assert len(parameters) == 30 and list(parameters)[-1] == "Family 30"
    catalog = synthetic_models(120, 30, skew=1.0)
    assert len(catalog) == 120 and catalog["model"].is_unique
    assert catalog.groupby("family", sort=False).size().loc[list(parameters)].tolist() == family_sizes(120, 30, 1.0)
    # the default store is the one it was: round the families, the k-th model 1.6 ** k times the FLOPs of the first
    small = synthetic_models(12, 4)
    assert list(small["model"][:5]) == [
        "timm:resnet_0",
        "timm:efficientnet_0",
        "timm:mobilenetv3_0",
        "timm:convnext_0",
        "timm:resnet_1",
    ]
    assert small["flops_per_sample"].iloc[8] == int(1.8 * 1.6**2 * 1e9)  # resnet_2


# ---------------------------------------------------------------------------------------------- families


def test_a_report_names_families_by_todays_table_and_keeps_the_rest():
    stored = pd.DataFrame(
        {
            "model": ["timm:mambaout_tiny", "timm:tf_mnasnet_100", "file:/x/net.py:mine"],
            "family": ["mambaout", "MnasNet/FBNet/NAS", "mine"],
        }
    )
    assert list(families.with_current_families(stored)["family"]) == ["MambaOut", "MnasNet", "mine"]


def test_coloured_families_all_of_a_small_store_else_the_largest():
    counts = pd.Series({"D": 1, "C": 3, "A": 5, "B": 3})
    assert families.coloured_families(counts, limit=2, all_up_to=4) == ["A", "B", "C", "D"]  # few: all, by name
    assert families.coloured_families(counts, limit=2, all_up_to=3) == ["A", "B"]  # most models; B before C by name


def test_family_colors_of_many_families_are_ten_distinct_colours_and_grey():
    counts = families.family_counts(synthetic_models(700, 60, skew=1.0))
    colours = families.family_colors(counts)
    assert set(colours) == set(counts.index)
    coloured = [f for f, c in colours.items() if c != families.OTHER_COLOUR]
    assert coloured == list(counts.index[:10])  # the ten largest families, the largest first
    assert coloured[:3] == ["ResNet", "EfficientNet", "MobileNetV3"]  # 138, 69, 47 models
    assert len({colours[f] for f in coloured}) == 10


def test_a_store_of_twenty_families_keeps_a_colour_for_each():
    counts = families.family_counts(synthetic_models(40, 20))
    colours = families.family_colors(counts)
    assert len(set(colours.values())) == 20 and families.OTHER_COLOUR not in colours.values()
    assert list(colours) == sorted(counts.index)  # by name, as before


def test_crowded_markers_shrink_with_the_square_root_of_the_count():
    assert families.marker_style(500, 28, 0.8) == dict(s=28, alpha=0.8)
    # 2000 points: sqrt(500 / 2000) = 0.5 of the area, 0.6 of the opacity
    assert families.marker_style(2000, 28, 0.8) == pytest.approx(dict(s=14, alpha=0.48))
    assert families.marker_style(10**6, 28, 0.8)["s"] == pytest.approx(28 * families.SMALLEST_MARKER)


# ---------------------------------------------------------------------------------------------- figures


def test_the_figures_of_many_families_colour_the_ten_largest_and_draw_the_rest_grey(many):
    measurements, _ = many
    for figure in (interactive.utilization_vs_gflops(measurements), interactive.utilization_vs_batch(measurements)):
        colours = [trace.marker.color for trace in figure.data]
        # a trace per family, the ten largest first (24, 12, 9, 7, 5, 5, 4, 4, 3, 3 models), each its own colour
        assert len(figure.data) == 30 and figure.data[0].name == "ResNet (24)"
        assert len(set(colours[:10])) == 10 and families.OTHER_COLOUR not in colours[:10]
        assert set(colours[10:]) == {families.OTHER_COLOUR}


# ---------------------------------------------------------------------------------------------- model table


def row(model: str, batch: int, backend: str, utilization: float, status: str = "ok") -> dict:
    """``test_report``'s row with the work and throughput columns the model table shows."""
    extra = {"flops_per_sample": 2e9, "params": 5e6, "samples_per_s": 1000 * utilization}
    return report_row(model, batch, backend, utilization, status, **extra)


def test_model_table_one_row_per_series_at_the_smallest_and_largest_batch():
    frame = pd.DataFrame(
        [
            row("m10", 1, "graph", 0.01),
            row("m10", 8, "graph", 0.1, status="error: CUDA error"),
            row("m10", 256, "graph", np.nan, status="oom"),
            row("m2", 1, "graph", 0.02),
            row("m2", 256, "graph", 0.4),
            row("m2", 1, "inference", 0.03),  # no row at 256
        ]
    )
    assert table_batches(frame) == [1, 256]
    table = model_table(frame)
    assert list(zip(table["model"], table["backend"], strict=True)) == [
        ("m2", "graph"),
        ("m2", "inference"),
        ("m10", "graph"),
    ]  # fmt: skip  (m2 before m10: numbers in names by value)
    assert table["gflops_per_sample"].tolist() == [2.0] * 3 and table["params_millions"].tolist() == [5.0] * 3
    assert table["utilization_at_256"].iloc[0] == 0.4 and table["utilization_at_256"].iloc[1:].isna().all()
    assert table["samples_per_s_at_1"].tolist() == pytest.approx([20, 30, 10])
    assert table["status_at_256"].tolist() == ["ok", NOT_MEASURED, "oom"]
    assert table["status"].tolist() == ["ok", "ok", "error at 8; oom at 256"]


def test_failed_text_groups_the_failed_batches_by_kind():
    rows = pd.DataFrame({"kind": ["oom", "ok", "error", "oom"], "batch": [256, 1, 8, 128]})
    assert failed_text(rows) == "error at 8; oom at 128, 256"
    assert failed_text(rows[rows["kind"] == "ok"]) == "ok"


def test_the_page_has_one_table_row_per_model_and_the_filter_script(many, page):
    measurements, _ = many
    text = page.read_text()
    table = models_table_html(text)
    body = table.split("<tbody>")[1]
    assert body.count("<tr>") == 120  # one backend: one row per model
    cells = re.findall(r"<tr>(.*?)</tr>", body)
    names = [re.match(r'<td class="t">([^<]*)</td>', cell).group(1) for cell in cells]
    assert sorted(names) == sorted(measurements["model"].unique())
    # the 30 models out of memory at 256 read "oom" in that column and their status
    assert sum('<td class="n">oom</td>' in cell for cell in cells) == 30
    assert text.count(SCRIPT) == 1
    assert '<input type="search"' in text and 'data-filter="models"' in text
    assert '<span id="models-count">120 of 120 rows</span>' in text
    header = re.search(r"<thead>(.*?)</thead>", table).group(1)
    assert '<th colspan="2">batch 1</th><th colspan="2">batch 256</th>' in header
    assert "backend" not in header  # a single backend: no column for it
    assert "<p>30 families: the figures colour the 10 with the most models (ResNet, EfficientNet," in text
    assert "draw the other 20 in light grey" in text


def test_a_small_store_has_no_note_on_grey_families_and_a_row_per_model_and_backend():
    measurements, _ = synthetic_store(np.random.default_rng(0), models=8, batches=(1, 8))
    assert html._family_note(measurements) == ""
    section = html._model_section(measurements)
    assert section.split("<tbody>")[1].count("<tr>") == 16  # 8 models x 2 backends
    assert '<th class="t">backend</th>' in section


PROBE = """<script>
(function () {
  var out = [], table = document.getElementById("models"), box = document.querySelector("input[data-filter]");
  function shown() { return Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return !r.hidden; }); }
  box.value = "family09 oom"; box.dispatchEvent(new Event("input"));
  out.push(shown().length + "|" + document.getElementById("models-count").textContent);
  box.value = ""; box.dispatchEvent(new Event("input"));
  var headers = table.tHead.rows[1].cells, column = headers.length - 3;  // utilization at the largest batch
  headers[column].click();
  var rows = table.tBodies[0].rows, first = rows[0].cells[column].textContent;
  out.push(first + "|" + rows[rows.length - 1].cells[column].textContent + "|" + headers[column].dataset.sort);
  headers[0].click();
  out.push(rows[0].cells[0].textContent + "|" + rows[1].cells[0].textContent);
  document.title = "probe:" + out.join(";");
})();
</script></body>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not on PATH")
def test_the_model_table_filters_and_sorts_in_headless_chromium(many, page, tmp_path):
    measurements, _ = many
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE))
    command = [
        "chromium",
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        probe.as_uri(),
    ]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    filtered, by_utilization, by_model = re.search(r"<title>probe:(.*?)</title>", dom).group(1).split(";")
    # family09 has family_sizes(120, 30, 1)[8] = 3 models; its largest is out of memory at 256
    assert filtered == "1|1 of 120 rows"
    best = plots.ok_rows(measurements)
    best = best[best["batch"] == 256]["utilization"].max()
    assert by_utilization == f"{100 * best:.1f}%|oom|desc"  # highest first, the failed cells last
    assert by_model == "timm:convnext_0|timm:convnext_1"
