"""MLPerf Inference ResNet-50 results (format ``mlperf``, ``data/public/mlperf``): a row is one GPU's share of a
system's published throughput, derived and said so, stored as TensorRT int8 of torchvision's ResNet-50 with the batch
unpublished; rows of an unmatched GPU or another unit are kept out and named; a table whose columns moved is one line
and writes nothing; ``utilscope gpus`` shows the rows in a condition of their own, never beside PyTorch's."""

from __future__ import annotations

import csv
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.hardware import get_spec
from utilscope.survey.formats.mlperf import COLUMNS
from utilscope.survey.published import ingest, with_utilization
from utilscope.survey.store import Store

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "public" / "mlperf" / "resnet50_inference.csv"
FIELDS = list(COLUMNS)
RN50_FLOPS = 8_178_368_512  # utilscope's count of torchvision:resnet50 at 224 px (2 x 4.089 GMACs)


def record(**changed) -> dict:
    """One valid row: an 8-GPU H100 SXM system's Offline result, 800000 samples/s, so 100000.00 per GPU."""
    row = {
        "round": "v4.1",
        "repo": "mlcommons/inference_results_v4.1",
        "commit": "c0ffee",
        "submitter": "Acme",
        "system": "Box_H100x8_TRT",
        "scenario": "Offline",
        "validity": "VALID",
        "result_metric": "Samples per second",
        "samples_per_s": "800000",
        "accelerators": "8",
        "accelerator_model_name": "NVIDIA H100-SXM-80GB",
        "gpu": "h100_sxm",
        "samples_per_s_per_gpu_derived": "100000.00",
        "unit": "samples/s",
        "precision": "int8",
        "runtime": "tensorrt",
        "result_path": "closed/Acme/results/Box_H100x8_TRT/resnet50/Offline/performance/run_1/mlperf_log_summary.txt",
    }
    return {**row, **changed}


def write(path: Path, rows: list[dict], fields: list[str] = FIELDS) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_row_is_one_gpus_derived_share_in_tensorrt_int8_and_kept_out_rows_are_named(tmp_path):
    server = record(scenario="Server", samples_per_s="90000.5", accelerators="2", gpu="l40s")
    server.update(samples_per_s_per_gpu_derived="45000.25", accelerator_model_name="NVIDIA L40S")  # 90000.5 / 2
    table = write(
        tmp_path / "mlperf.csv",
        [
            record(),
            server,
            record(gpu="", accelerator_model_name="Acme GPU 9"),
            record(unit="queries/s"),
            record(gpu="no_such_gpu"),
        ],
    )
    db = tmp_path / "r.sqlite"
    result = ingest([table], db, "mlperf")
    assert result.added == 2 and [why.split(":")[0] for _, why in result.left_out] == [
        "row 3 (v4.1 Acme/Box_H100x8_TRT Offline)",
        "row 4 (v4.1 Acme/Box_H100x8_TRT Offline)",
        "row 5 (v4.1 Acme/Box_H100x8_TRT Offline)",
    ]
    assert "GPU 'Acme GPU 9' has no spec-table key" in result.left_out[0][1]
    assert "unit 'queries/s', not samples/s" in result.left_out[1][1]
    with Store(db, create=False) as store:
        rows = store.published_frame().set_index("source_row")
    first = rows.loc[1]
    assert (first["model"], first["resolution"], first["batch"], first["precision"]) == (
        "torchvision:resnet50",
        224,
        0,  # unpublished: the submitter's harness batches
        "int8",
    )
    assert (first["backend"], first["memory_format"], first["gpu"]) == (
        "tensorrt (MLPerf Offline)",
        "tensorrt-chosen",
        "h100_sxm",
    )
    assert first["samples_per_s"] == 100000.0  # 800000 / 8, derived
    assert "800000 for the system" in first["source_path"] and "/ 8" in first["source_path"]
    assert first["source_commit"] == "v4.1 c0ffee" and first["gpu_label"].startswith("8x NVIDIA H100-SXM-80GB")
    assert (rows.loc[2, "backend"], rows.loc[2, "samples_per_s"]) == ("tensorrt (MLPerf Server)", 45000.25)


def test_utilization_is_against_the_int8_peak():
    frame = pd.DataFrame(
        {
            "gpu": ["h100_sxm"],
            "precision": ["int8"],
            "flops_per_sample": [RN50_FLOPS],
            "bytes_per_sample": pd.array([None], dtype="Int64"),
            "samples_per_s": [88740.0],
        }
    )
    row = with_utilization(frame).iloc[0]
    assert row["peak_tflops"] == get_spec("h100_sxm").peak_tflops("int8") == 1979  # dense int8 TOPS
    # 8.178368512e9 x 88740 = 7.2575e14 op/s = 725.75 TOPS; / 1979 = 0.36673
    assert row["utilization"] == pytest.approx(RN50_FLOPS * 88740 / 1979e12) == pytest.approx(0.36673, abs=1e-5)


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"samples_per_s_per_gpu_derived": "99000.00"}, "row 1: samples_per_s_per_gpu_derived 99000 is not"),
        ({"accelerators": "0"}, "row 1: accelerators must be a whole number above 0"),
        ({"samples_per_s": "n/a"}, "row 1: samples_per_s must be a number above 0"),
        ({"scenario": "SingleStream"}, "row 1: scenario 'SingleStream' is none of Offline, Server"),
    ],
)
def test_a_bad_row_is_one_line_naming_it_and_nothing_is_written(changed, message, tmp_path):
    table = write(tmp_path / "mlperf.csv", [record(**changed)])
    with pytest.raises(UsageError, match=re.escape(message)):
        ingest([table], tmp_path / "r.sqlite", "mlperf")
    assert not (tmp_path / "r.sqlite").exists()


def test_a_table_whose_columns_moved_is_one_line_exit_2(tmp_path, capsys):
    renamed = [name if name != "samples_per_s" else "throughput" for name in FIELDS]
    table = write(tmp_path / "mlperf.csv", [{**record(), "throughput": "800000"}], renamed)
    assert main(["ingest", "mlperf", str(table), "--db", str(tmp_path / "r.sqlite"), "--no-count"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a mlperf table: it lacks the columns samples_per_s" in err
    assert not (tmp_path / "r.sqlite").exists()


def test_a_table_of_only_kept_out_rows_is_refused(tmp_path):
    table = write(tmp_path / "mlperf.csv", [record(gpu="")])
    with pytest.raises(UsageError, match=re.escape("without rows (1 left out: row 1 (v4.1 Acme/Box_H100x8_TRT")):
        ingest([table], tmp_path / "r.sqlite", "mlperf")


def test_the_shipped_table_reads_whole_and_its_derived_column_is_system_over_gpus():
    with open(SHIPPED) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 62 and {row["scenario"] for row in rows} == {"Offline", "Server"}
    for row in rows:
        derived = (Decimal(row["samples_per_s"]) / int(row["accelerators"])).quantize(Decimal("0.01"))
        assert Decimal(row["samples_per_s_per_gpu_derived"]) == derived
        assert int(row["accelerators"]) == int(row["accelerators_per_node"]) * int(row["number_of_nodes"])
        assert row["validity"] == "VALID" and row["precision"] == "int8" and get_spec(row["gpu"])
        server = row["scenario"] == "Server"
        assert row["samples_per_s"] == (row["completed_samples_per_s"] if server else row["samples_per_s"])


def test_gpus_shows_mlperf_rows_in_their_own_condition_never_beside_pytorch(tmp_path, capsys):
    dle = Path(__file__).resolve().parent.parent / "data" / "public" / "deeplearningexamples"
    db = tmp_path / "r.sqlite"
    twin = record(system="Other_H100x8_TRT", samples_per_s="720000", samples_per_s_per_gpu_derived="90000.00")
    assert main(["ingest", "mlperf", str(write(tmp_path / "m.csv", [record(), twin])), "--db", str(db)]) == 0
    assert main(["ingest", "deeplearningexamples", str(dle / "pytorch_convnets_inference.csv"), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["gpus", "torchvision:resnet50", "--db", str(db)]) == 0
    out = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "int8 · tensorrt-chosen · tensorrt (MLPerf Offline), on 1 GPU" in out
    assert "amp · channels_last · eager" in out
    assert "as published" in out and "Other_H100x8_TRT" in out and " n/a " in out  # two systems of one GPU
    assert "backend: eager, tensorrt (MLPerf Offline)" in out  # the named difference
