"""The report's GPU comparison: the numbers on hand-made frames (arithmetic in comments), the figure's panels,
legend and points, the page's section and table on a two-GPU synthetic store, and no comparison with one GPU."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from utilscope.errors import UsageError
from utilscope.report import build_report, gpu_plots, gpus, plots
from utilscope.report.synthetic import synthetic_store
from utilscope.units import significant

H200, L4 = ("NVIDIA H200", 989.5), ("NVIDIA L4", 121.0)
DROPPED = "timm:resnet_0"  # the smallest ResNet: ok at every batch on the H200, never measured on the L4


def cell(
    device: str,
    model: str,
    batch: int,
    samples_per_s: float,
    utilization: float,
    status: str = "ok",
    software: str = "sw",
) -> dict:
    return dict(
        model=model,
        resolution=224,
        precision="fp16",
        backend="graph",
        batch=batch,
        device=device,
        software=software,
        status=status,
        samples_per_s=samples_per_s if status == "ok" else np.nan,
        utilization=utilization if status == "ok" else np.nan,
        peak_tflops=100.0,
        peak_source="datasheet",
    )


@pytest.fixture(scope="module")
def two_gpus() -> tuple[pd.DataFrame, pd.DataFrame]:
    # 6 models in 3 families x batches 1, 32, 256 x graph x 2 GPUs = 36 rows; the larger model of each family runs
    # out of memory at batch 256 on both GPUs; DROPPED's 3 rows on the L4 are removed: 33 rows
    measurements, op_classes = synthetic_store(
        np.random.default_rng(7),
        models=6,
        families=3,
        batches=(1, 32, 256),
        backends=("graph",),
        errors=0,
        devices=(H200, L4),
    )
    dropped = (measurements["device"] == L4[0]) & (measurements["model"] == DROPPED)
    return measurements[~dropped].reset_index(drop=True), op_classes


@pytest.fixture(scope="module")
def page(two_gpus, tmp_path_factory) -> str:
    measurements, op_classes = two_gpus
    return build_report(measurements, op_classes, tmp_path_factory.mktemp("gpus")).read_text()


# ---------------------------------------------------------------------------------------------- numbers


def test_gpu_comparison_side_by_side_with_the_ratio_to_the_reference():
    frame = pd.DataFrame(
        [
            cell("G", "a", 1, 250.0, 0.20),
            cell("G", "b", 1, np.nan, np.nan, status="oom"),
            cell("G", "d", 1, 90.0, 0.02),  # d: on G only
            cell("R", "a", 1, 1000.0, 0.10),
            cell("R", "b", 1, 400.0, 0.05),
            cell("R", "c", 8, 300.0, 0.07),
            cell("R", "e", 1, 800.0, 0.09),
        ]
    )
    # R has 4 ok rows, G 2: R is the reference, listed first though its rows come last and its name sorts last
    assert gpus.compared_devices(frame) == ["R", "G"]
    table = gpus.gpu_comparison(frame)
    # batch 8 has rows of R only: only batch 1 is compared; rows by R's utilization, d (not on R) last
    assert list(table.index.get_level_values("model")) == ["a", "e", "b", "d"]
    a, b, d = table.xs("a", level="model").iloc[0], table.xs("b", level="model").iloc[0], table.xs("d", level="model")
    assert a[("G", gpus.RATIO)] == pytest.approx(0.25)  # 250 / 1000 samples/s
    assert a[("R", "utilization")] == 0.10 and a[("G", "utilization")] == 0.20  # each against its own peak
    assert b[("G", "status")] == "oom" and np.isnan(b[("G", gpus.RATIO)])
    assert d[("R", "status")].iloc[0] == gpus.NOT_MEASURED and np.isnan(d[("R", "samples_per_s")].iloc[0])
    assert table.xs("e", level="model")[("G", "status")].iloc[0] == gpus.NOT_MEASURED
    (ratio,) = gpus.median_ratios(table).to_dict("records")
    assert ratio == dict(batch=1, device="G", cells=1, median=pytest.approx(0.25))


def test_compared_batches_are_the_smallest_and_largest_shared_by_two_gpus():
    frame = pd.DataFrame(
        [cell("A", "a", batch, 10.0, 0.1) for batch in (1, 8, 32, 256)]
        + [cell("B", "a", batch, 10.0, 0.1) for batch in (8, 16, 32)]
        + [cell("B", "a", 256, 10.0, 0.1, status="oom")]  # 256 has no successful row on B: not shared
    )
    rows, _ = gpus.comparison_rows(frame)
    assert gpus.compared_batches(rows) == [8, 32]
    assert gpus.compared_batches(rows[rows["batch"] == 8]) == [8]


def test_each_gpu_contributes_its_main_configuration_and_the_rest_is_counted():
    frame = pd.DataFrame(
        [cell("A", m, 1, 10.0, 0.1, software="new") for m in "abc"]
        + [cell("A", "a", 1, 99.0, 0.9, software="old")]  # A's second configuration: 1 ok row against 3
        + [cell("B", m, 1, 5.0, 0.2, software="other") for m in "ab"]
    )
    rows, left_out = gpus.comparison_rows(frame)
    assert left_out == {"A": 1}
    table = gpus.gpu_comparison(frame)
    assert table.xs("a", level="model")[("A", "samples_per_s")].iloc[0] == 10.0  # the "new" row, not "old"


def test_gpu_comparison_needs_two_gpus_with_successful_rows():
    frame = pd.DataFrame([cell("A", "a", 1, 10.0, 0.1), cell("B", "a", 1, np.nan, np.nan, status="oom")])
    with pytest.raises(UsageError, match="two devices"):
        gpus.gpu_comparison(frame)


def test_synthetic_store_measures_the_grid_on_each_gpu_against_its_peak():
    measurements, _ = synthetic_store(
        np.random.default_rng(0), models=4, families=4, batches=(8,), backends=("graph",), errors=0, devices=(H200, L4)
    )
    assert len(measurements) == 4 * 2  # 4 models x 1 batch x 1 backend x 2 GPUs; one model per family: no oom
    per_gpu = measurements.groupby("device")
    assert per_gpu["peak_tflops"].unique().to_dict() == {H200[0]: [H200[1]], L4[0]: [L4[1]]}
    assert per_gpu["software"].nunique().to_dict() == {H200[0]: 1, L4[0]: 1}
    assert measurements["software"].nunique() == 2  # the L4 has another driver
    # achieved = utilization x own peak; the L4 (8.2x less peak) fills more of its peak: 8.2 ** 0.3 = 1.9x on average
    assert np.allclose(measurements["achieved_tflops"], measurements["utilization"] * measurements["peak_tflops"])
    assert per_gpu["utilization"].median()[L4[0]] > 1.5 * per_gpu["utilization"].median()[H200[0]]
    with pytest.raises(UsageError, match="distinct names"):
        synthetic_store(np.random.default_rng(0), devices=(H200, H200))
    with pytest.raises(UsageError, match="peak"):
        synthetic_store(np.random.default_rng(0), devices=(H200, ("NVIDIA L4", float("nan"))))


# ---------------------------------------------------------------------------------------------- the figure


def test_the_comparison_figure_has_a_panel_per_compared_batch_and_every_gpu_on_the_same_axes(two_gpus):
    measurements, _ = two_gpus
    figure = gpu_plots.plot_gpu_comparison(measurements)
    panels = [axes for axes in figure.axes if axes.get_title()]
    # batch 1: 6 series; batch 256: 3 (the larger model of each of the 3 families is oom on both GPUs)
    assert [axes.get_title() for axes in panels] == ["batch 1: 6 series", "batch 256: 3 series"]
    assert panels[0].get_xlim() == panels[1].get_xlim() and panels[0].get_xscale() == "log"
    legend = [text.get_text() for text in panels[-1].get_legend().get_texts()]
    # the H200 shows 6 + 3 = 9 series, the L4 9 less DROPPED's 2
    assert legend[:2] == [
        "NVIDIA H200 (reference, peak 990 TFLOP/s; 9 of 9 series)",
        "NVIDIA L4 (peak 121 TFLOP/s; 7 of 9 series)",
    ]
    ok = plots.ok_rows(measurements)
    for axes, batch in zip(panels, (1, 256), strict=True):
        labels = [tick.get_text() for tick in axes.get_yticklabels()]
        points = {c.get_label(): c.get_offsets() for c in axes.collections if c.get_label().startswith("NVIDIA")}
        here = ok[(ok["batch"] == batch) & (ok["device"] == H200[0])].sort_values("utilization")
        assert labels == [plots._short(m) for m in here["model"]]  # sorted by utilization on the reference
        assert np.allclose(points[H200[0]][:, 0], here["utilization"])
        (missing,) = points[f"{L4[0]}: missing"]  # one cross: DROPPED's row, at the left edge
        assert labels[int(missing[1])] == plots._short(DROPPED)


def test_the_comparison_figure_with_one_gpu_or_no_successful_row(two_gpus):
    measurements, _ = two_gpus
    one = measurements[measurements["device"] == H200[0]]
    assert gpu_plots.plot_gpu_comparison(one) == "one GPU only (NVIDIA H200): nothing to compare"
    assert gpu_plots.plot_gpu_comparison(measurements.assign(status="oom")) == "no successful measurements"


def test_peak_label_says_when_a_gpus_peak_is_unknown():
    assert gpu_plots.peak_label([("fp16", 121.0, "datasheet")]) == "peak 121 TFLOP/s"
    unknown = gpu_plots.peak_label([("fp16", 250.0, "measured ceiling (unknown GPU)")])
    assert unknown == "peak unknown: measured ceiling 250 TFLOP/s"


# ---------------------------------------------------------------------------------------------- the page


def _table_row(page: str, model: str, batch: int) -> str:
    section = page.split("<h2>GPU comparison</h2>")[1].split("<h2>")[0]
    return re.search(
        rf'<tr><td class="t">{re.escape(model)}</td>(?:<td[^>]*>[^<]*</td>){{2}}<td class="n">{batch}'
        r"</td>.*?</tr>",
        section,
    ).group(0)


def test_the_page_compares_the_gpus_in_a_table_with_a_column_group_per_gpu(two_gpus, page):
    measurements, _ = two_gpus
    assert page.count("<h2>GPU comparison</h2>") == 1
    # the static figures of every report (utilization by family, op-class shares) + the comparison, beside the page
    assert page.count('<img alt="') == 2 + 1 and '<img alt="GPU comparison" src="gpu_comparison.png">' in page
    assert '<th colspan="4"></th><th colspan="2">NVIDIA H200</th><th colspan="3">NVIDIA L4</th>' in page
    assert "NVIDIA H200 (15 rows; the reference" in page and "NVIDIA L4 (12)" in page  # ok rows: 18 - 3 oom, 15 - 3
    model = "timm:efficientnet_0"  # ok at batch 256 on both GPUs
    both = measurements[(measurements["model"] == model) & (measurements["batch"] == 256)].set_index("device")
    ratio = both.loc[L4[0], "samples_per_s"] / both.loc[H200[0], "samples_per_s"]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", _table_row(page, model, 256))
    h200, l4 = both.loc[H200[0]], both.loc[L4[0]]
    expected = [f"{100 * h200['utilization']:.1f}%", significant(h200["samples_per_s"])]
    expected += [f"{100 * l4['utilization']:.1f}%", significant(l4["samples_per_s"]), f"{ratio:.3g}×"]
    assert cells[4:] == expected


def test_the_page_lists_a_model_missing_on_one_gpu_and_failed_rows(page):
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", _table_row(page, DROPPED, 1))
    assert cells[6:] == ["not measured", "–", "–"]
    # the larger ResNet is oom on both GPUs at batch 256
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", _table_row(page, "timm:resnet_1", 256))
    assert cells[4:] == ["oom", "–", "oom", "–", "–"]


def test_the_page_says_each_utilization_is_against_its_own_peak_and_when_a_peak_is_unknown(two_gpus, tmp_path):
    """Two whole reports (every figure of each is drawn), one with a GPU whose peak is unknown."""
    measurements, op_classes = two_gpus
    assert "against each GPU" in build_report(measurements, op_classes, tmp_path / "a").read_text()
    unknown = measurements.assign(
        peak_source=measurements["peak_source"].where(measurements["device"] != L4[0], "measured ceiling (unknown GPU)")
    )
    text = build_report(unknown, op_classes, tmp_path / "b").read_text()
    assert "The peak of NVIDIA L4 is unknown" in text and "The peak of NVIDIA H200" not in text


def test_a_one_gpu_store_has_no_comparison(tmp_path):
    measurements, op_classes = synthetic_store(np.random.default_rng(1), models=4, families=2, batches=(1, 8))
    page = build_report(measurements, op_classes, tmp_path).read_text()
    assert "GPU comparison" not in page and not (tmp_path / "gpu_comparison.png").exists()
    assert page.count('<img alt="') == 2
