"""The report in a real browser: headless Chromium driven through WebDriver (selenium), on a report of a small
synthetic store, on one of the H200 survey (data/h200/survey.sqlite) and on one of the timm survey's 649 CNNs
(data/h200/timm.sqlite, 60 families). Images load, nothing is logged as an
error, nothing overflows at 1280 px, the model table sorts and filters in the page, the page asks for nothing but
its own file, and its screenshot is not blank.

CI (``CI=true``) installs Chromium and chromedriver (``.ci/run``) and fails here without them; elsewhere these tests
are skipped with the command that installs them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread
from test_atlas import atlas_store

from utilscope.report import build_report, interactive, model_view
from utilscope.report.figures import Kind
from utilscope.report.html import SURVEY_FIGURES
from utilscope.report.synthetic import synthetic_store
from utilscope.survey.store import Store

REPO = Path(__file__).resolve().parents[1]
WIDTH = 1280
INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium"


def _browser_missing() -> str | None:
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    return ", ".join(missing) or None


@pytest.fixture(scope="module")
def driver():
    missing = _browser_missing()
    if missing and os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the browser tests, but {missing} is missing ({INSTALL})")
    if missing:
        pytest.skip(f"{missing} not installed: {INSTALL}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The report pages: a synthetic store of 12 models, the H200 survey and the timm survey (each read from a
    snapshot, never written)."""
    measurements, op_classes = synthetic_store(np.random.default_rng(7), models=12, families=4)
    pages = {"synthetic": build_report(measurements, op_classes, tmp_path_factory.mktemp("synthetic"))}
    for name in ("survey", "timm"):
        with Store(REPO / "data" / "h200" / f"{name}.sqlite", create=False, snapshot=True) as store:
            frame, classes, records = store.frame(), store.op_class_frame(), store.model_records()
        pages[name] = build_report(frame, classes, tmp_path_factory.mktemp(name), records)
    with Store(atlas_store(tmp_path_factory.mktemp("atlas-store")), create=False) as store:
        frame, published = store.frame(), store.published_frame()
    predicted = pd.DataFrame([PREDICTED_L4], columns=model_view.PREDICTED_COLUMNS)
    folder = tmp_path_factory.mktemp("atlas")
    pages["atlas"] = build_report(frame, pd.DataFrame(), folder, None, published, predicted)
    return pages


# a predicted row, as model_view.predicted_rows makes them (the prediction itself is tested in test_atlas)
PREDICTED_L4 = dict(
    model="timm:resnet50",
    gpu="l4",
    gpu_name="NVIDIA L4",
    source="predicted",
    table="utilscope predict (from NVIDIA H200)",
    torch="",
    precision="amp",
    memory_format="contiguous",
    backend="eager",
    condition="amp · contiguous · eager",
    resolution=224,
    batch=1024,
    samples_per_s=1234.0,
    utilization=0.081,
    bound="memory",
    validation="not validated on this GPU",
)


def _open(driver, page: Path):
    driver.get_log("browser"), driver.get_log("performance")  # drop what earlier pages logged
    driver.get(page.as_uri())
    from selenium.webdriver.support.ui import WebDriverWait

    # the explorer sets data-plotted once every interactive figure is drawn
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.plotted"))
    return driver


@pytest.mark.parametrize("name", ["synthetic", "survey", "timm", "atlas"])
def test_the_page_loads_its_images_logs_no_error_and_fits_1280_px(driver, pages, name):
    _open(driver, pages[name])
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt || i.src.slice(0, 40)])"
    )
    # every static figure's PNG: utilization by family, the op-class shares where a model was attributed, the atlas's
    static = pages[name].read_text().count("<img ")
    assert len(images) == static >= 1 and all(done and width > 0 for done, width, _ in images), images
    errors = [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    overflow = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1], f"the page is {overflow[0]} px wide in a {overflow[1]} px window"


@pytest.mark.parametrize("name", ["synthetic", "survey", "timm", "atlas"])
def test_the_page_requests_nothing_but_its_own_file(driver, pages, name):
    _open(driver, pages[name])
    messages = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in messages if m["method"] == "Network.requestWillBeSent"]
    assert pages[name].as_uri() in urls
    assert [url for url in urls if not url.startswith(("file://", "data:"))] == []


def _column(driver, index: int) -> list[str]:
    script = (
        "return Array.from(document.querySelectorAll('#models tbody tr')).filter(r => !r.hidden)"
        ".map(r => r.cells[arguments[0]].textContent.trim())"
    )
    return driver.execute_script(script, index)


def _header(driver, text: str):
    from selenium.webdriver.common.by import By

    headers = driver.find_elements(By.CSS_SELECTOR, "#models thead tr:last-child th")
    # textContent, not .text: .text is what is rendered visible, which can still be empty on a machine under load
    return next((i, h) for i, h in enumerate(headers) if h.get_attribute("textContent").strip().startswith(text))


def test_the_model_table_sorts_numbers_by_value_and_filters_by_words(driver, pages):
    from selenium.webdriver.common.by import By

    _open(driver, pages["survey"])
    index, header = _header(driver, "GFLOPs")
    header.click()  # a numeric column: highest first
    values = [float(text.replace(",", "")) for text in _column(driver, index)]
    assert len(values) > 60 and values == sorted(values, reverse=True)
    header.click()
    assert [float(text.replace(",", "")) for text in _column(driver, index)] == sorted(values)
    box = driver.find_element(By.CSS_SELECTOR, "input[data-filter='models']")
    box.send_keys("EfficientNet")
    families = _column(driver, _header(driver, "family")[0])
    assert families and all("EfficientNet" in family for family in families)
    counted = driver.find_element(By.ID, "models-count").text
    assert counted.startswith(f"{len(families)} of ")
    box.clear(), box.send_keys("resnet50 ")
    assert set(_column(driver, 0)) >= {"torchvision:resnet50"} and all("resnet50" in m for m in _column(driver, 0))


def test_a_screenshot_at_1280_px_is_not_blank(driver, pages):
    _open(driver, pages["survey"])
    shot = imread(io.BytesIO(driver.get_screenshot_as_png()), format="png")
    assert shot.shape[1] == WIDTH
    colours = np.unique((shot[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50


def test_the_atlas_shows_the_gpus_a_reader_picks_and_the_models_they_filter(driver, pages):
    from selenium.webdriver.common.by import By

    _open(driver, pages["atlas"])
    visible = (
        "return Array.from(document.querySelectorAll('#atlas-table .' + arguments[0])).filter(c => !c.hidden).length"
    )
    shown = driver.execute_script(visible, "g-rtx_3090")
    assert shown > 0 and driver.execute_script(visible, "g-h200_sxm") > 0
    driver.find_element(By.CSS_SELECTOR, "input[data-gpu='g-rtx_3090']").click()
    assert driver.execute_script(visible, "g-rtx_3090") == 0 and driver.execute_script(visible, "g-h200_sxm") > 0
    driver.find_element(By.CSS_SELECTOR, "input[data-gpu='g-rtx_3090']").click()
    assert driver.execute_script(visible, "g-rtx_3090") == shown
    driver.find_element(By.CSS_SELECTOR, "input[data-filter='atlas-table']").send_keys("resnet50")
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#atlas-table tbody tr'))"
        ".filter(r => !r.hidden).map(r => r.cells[0].textContent)"
    )
    assert rows and all("resnet50" in row for row in rows)
    _search(driver, "mobileone*")  # the search at the top filters the atlas table too (a glob's words)
    table_filter = driver.find_element(By.CSS_SELECTOR, "input[data-filter='atlas-table']")
    assert table_filter.get_attribute("value") == "mobileone"
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#atlas-table tbody tr'))"
        ".filter(r => !r.hidden).map(r => r.cells[0].textContent)"
    )
    assert rows and all("mobileone" in row for row in rows)


LISTED = "return Array.from(document.querySelectorAll('#search-matches button'), button => button.textContent)"


def _search(driver, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    box = driver.find_element(By.ID, "model-search")
    box.clear()
    box.send_keys(text)
    # the search runs once typing pauses
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.searched") == text)


def test_a_hover_names_the_point_with_its_row(driver, pages):
    _open(driver, pages["synthetic"])
    script = """
        var div = document.getElementById("utilization_vs_gflops"), trace = div.data[1];
        Plotly.Fx.hover(div, [{curveNumber: 1, pointNumber: 2}]);
        return [trace.customdata[2], div.querySelector(".hoverlayer").textContent];
    """
    row, shown = _open(driver, pages["synthetic"]).execute_script(script)
    fields = dict(zip(interactive.HOVER, row, strict=True))
    assert shown.startswith(fields["model"]) and f"family: {fields['family']}" in shown
    assert f"batch {fields['batch']}, fp16, {fields['backend']}" in shown
    assert f"{fields['samples_per_s']:,.0f} samples/s" in shown and f"{fields['utilization']:.2%}" in shown


def test_a_click_on_a_point_opens_its_models_rows(driver, pages):
    script = """
        var div = document.getElementById("utilization_vs_gflops"), row = div.data[1].customdata[2];
        div.emit("plotly_click", {points: [{curveNumber: 1, pointNumber: 2, customdata: row}]});
        return [row[0], document.querySelector("#model-view h3").textContent];
    """
    model, heading = _open(driver, pages["synthetic"]).execute_script(script)
    assert heading == model


def test_a_model_opened_from_a_long_list_of_matches_shows_its_heading_below_the_search_bar(driver, pages):
    _open(driver, pages["synthetic"])
    _search(driver, "*")  # every model: the list of matches is as tall as it gets
    script = """
        document.querySelector("#search-matches button").click();
        var bar = document.querySelector(".search").getBoundingClientRect();
        var heading = document.querySelector("#model-view h3").getBoundingClientRect();
        return [bar.bottom, heading.top, window.scrollY];
    """
    bar_bottom, heading_top, scrolled = driver.execute_script(script)
    assert scrolled > 0 and heading_top >= bar_bottom  # scrolled to it, not hidden under the sticky bar


def test_the_search_highlights_the_matching_points_in_every_figure_and_lists_the_models(driver, pages):
    _open(driver, pages["synthetic"])
    _search(driver, "resnet_1")
    picked = driver.execute_script(
        """return Array.from(document.querySelectorAll("div.plot")).map(div => div.data.map(trace =>
            trace.customdata ? [trace.selectedpoints, trace.customdata.map(row => row[0])] : null))"""
    )
    assert len(picked) == sum(figure.kind is Kind.INTERACTIVE for figure in SURVEY_FIGURES)
    for figure in picked:
        traces = [trace for trace in figure if trace is not None]
        chosen = [names[i] for indices, names in traces for i in indices]
        every = [name for _, names in traces for name in names]
        assert chosen and set(chosen) == {"timm:resnet_1"} and len(chosen) == every.count("timm:resnet_1")
    listed = driver.execute_script(
        "return Array.from(document.querySelectorAll('#search-matches button'), b => b.textContent)"
    )
    assert listed == ["timm:resnet_1"]
    _search(driver, "resnet 1")  # a space (or a hyphen) finds the underscore
    listed = driver.execute_script(
        "return Array.from(document.querySelectorAll('#search-matches button'), b => b.textContent)"
    )
    assert listed == ["timm:resnet_1"]
    view = "return document.getElementById('model-view').textContent"
    assert driver.execute_script(view).startswith("timm:resnet_1")  # one match: its rows
    _search(driver, "resnet")  # several: the last model's rows go, the view says how many match
    assert driver.execute_script(view).endswith("models match: click one above for its rows.")
    _search(driver, "no such model")
    assert driver.execute_script(view) == "No model matches \u201cno such model\u201d."
    notes = "return Array.from(document.querySelectorAll('p.nomatch'), p => p.textContent)"
    assert driver.execute_script(notes) == ["No point of this figure matches \u201cno such model\u201d."] * len(picked)
    _search(driver, "resnet_1")
    assert set(driver.execute_script(notes)) == {""}  # a match: the notes are empty (and hidden)
    _search(driver, "*_0")  # a glob: the first model of each of the 4 families
    listed = driver.execute_script(
        "return Array.from(document.querySelectorAll('#search-matches button'), b => b.textContent)"
    )
    assert len(listed) == 4 and all(name.endswith("_0") for name in listed)


def test_a_click_on_a_family_in_the_legend_hides_it(driver, pages):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(driver, pages["synthetic"])
    figure = driver.find_element(By.ID, "utilization_vs_gflops")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", figure)  # clear of the sticky search
    figure.find_elements(By.CSS_SELECTOR, ".legend .traces .legendtoggle")[0].click()
    visible = "return arguments[0].data.map(trace => trace.visible === undefined ? true : trace.visible)"
    WebDriverWait(driver, 5).until(lambda d: d.execute_script(visible, figure)[0] != True)  # noqa: E712
    assert driver.execute_script(visible, figure) == ["legendonly"] + [True] * (len(figure_traces(driver)) - 1)


def figure_traces(driver) -> list:
    return driver.execute_script("return document.getElementById('utilization_vs_gflops').data")


def test_the_model_view_lists_a_models_gpus_with_the_kind_and_condition_of_each_row(driver, pages):
    _open(driver, pages["atlas"])
    _search(driver, "resnet50")  # one model's name without its source: its view opens
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#model-rows tbody tr'), r => r.dataset.kind ? "
        "[r.dataset.kind, r.cells[1].textContent + ' @' + r.cells[2].textContent] : ['group', r.textContent])"
    )
    groups = [(kind, text.split(" (")[0]) if kind == "group" else (kind, text) for kind, text in rows]
    published = [("published", f"NVIDIA GeForce RTX 3090 @{resolution}") for resolution in (160, 176, 224)]
    assert groups == [  # the condition with our measured row first
        ("group", "condition: amp · contiguous · eager"),
        ("measured", "NVIDIA H200 SXM @224"),
        *published,
        ("predicted", "NVIDIA L4 @224"),
        ("group", "condition: amp · contiguous · compile"),
        *published,
    ]
    predicted = driver.execute_script(
        "return document.querySelector('#model-rows tr[data-kind=predicted]').textContent"
    )
    assert "1,234" in predicted and "8.1%" in predicted and "bound: memory; not validated on this GPU" in predicted
    assert [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")] == []


def test_the_gpu_picker_is_one_row_of_boxes_each_beside_its_name(driver, pages):
    _open(driver, pages["atlas"])
    boxes = driver.execute_script(
        """return Array.from(document.querySelectorAll(".gpu-picker label"), label => {
            var box = label.querySelector("input").getBoundingClientRect(), whole = label.getBoundingClientRect();
            return [box.top, box.right, whole.right, box.width]; })"""
    )
    assert len(boxes) == 2 and len({round(top) for top, *_ in boxes}) == 1  # one row
    assert all(width < 30 and whole - right < 120 for _, right, whole, width in boxes)  # a box, then its short name
