"""NVIDIA DeepLearningExamples' README inference tables read as printed (``survey.formats.dle_readme``), on small
synthetic READMEs shaped like theirs, and the shipped CSVs of every framework through the ``deeplearningexamples``
format (rows of a GPU without a spec-table row skipped, counted and named)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from utilscope.cli import main
from utilscope.errors import UsageError
from utilscope.survey.formats import read_table
from utilscope.survey.formats.dle_readme import read_readme
from utilscope.survey.published import ingest
from utilscope.survey.store import Store

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "public" / "deeplearningexamples"
TF_SHAPED = """\
#### Training performance results
##### Training performance: NVIDIA DGX-1 (8x V100 16G)
|**GPUs**|**Batch Size**|**Avg throughput**|
|---|---|---|
| 8 | 256 | 9999 img/s |

#### Inference performance results

##### Inference performance: NVIDIA T4 (1x T4 16G)

Our results were obtained by running the `inference_benchmark.sh` script.

**FP32 Inference Latency**

|**Batch Size**|**Avg throughput**|**Avg latency**|**90% Latency**|**95% Latency**|**99% Latency**|
|--------------|------------------|---------------|---------------|---------------|---------------|
|1	|173.35 img/s	|5.79 ms	|5.90 ms	|5.95 ms	|6.04 ms  |
| 2 | 303.65 img/s | 6.61 ms | 6.80 ms | 17,89 ms | 7.01 ms |
| 4 | 562.3 | 7.125 ms | 7.32 ms | 7.42 ms | 7.69 ms | #| 1.0 | 2.0 |
|

**Mixed Precision Inference Latency + XLA**

|**Batch Size**|**Avg throughput**|**Avg latency**|**90% Latency**|**95% Latency**|**99% Latency**|
|--------------|------------------|---------------|---------------|---------------|---------------|
| 8 | 1454.93 img/s | 5.57 ms | 5.73 ms | 5.91 ms | 6.51 ms |
| 16 | 2003.75 it/s | 8.13 ms | 8.19 ms | 8.29 ms | 8.50 ms |

## Release notes
| 1 | 2 |
"""


def test_a_tf_shaped_readme_gives_its_inference_rows_as_printed():
    """Only the inference section's tables; each cell's number as printed (5.374 stays "5.374", 562.3 keeps no
    unit), the heading and title with it; the "#" cells after the last column dropped; the lone "|" line passed."""
    tables = read_readme(TF_SHAPED, "README.md")
    kept = [(r["batch"], r["throughput"], r["latency_avg"], r["latency_p99"]) for r in tables.rows]
    # rows 1 and 4 of the FP32 table, row 8 of the XLA table: 2 (a comma decimal) and 16 (it/s) are skipped
    assert kept == [("1", "173.35", "5.79", "6.04"), ("4", "562.3", "7.125", "7.69"), ("8", "1454.93", "5.57", "6.51")]
    assert {r["gpu_heading"] for r in tables.rows} == {"Inference performance: NVIDIA T4 (1x T4 16G)"}
    assert [r["table_heading"] for r in tables.rows] == ["FP32 Inference Latency"] * 2 + [
        "Mixed Precision Inference Latency + XLA"
    ]
    assert tables.skipped_rows == [
        "README.md line 18: latency_p95 '17,89 ms' is not a number in no unit or ms",
        "README.md line 27: throughput '2003.75 it/s' is not a number in no unit or img/s",
    ]
    assert tables.skipped_tables == []


def test_speedup_columns_are_left_out_and_mixed_precision_columns_read():
    """MXNet's shape: no title, "- mixed precision" columns beside "- speedup" ratios (derived: never read)."""
    header = (
        "| **Batch size** | **Throughput (img/sec) - mixed precision** | **Throughput - speedup** "
        "| **Avg latency (ms) - mixed precision** | **Avg latency - speedup** "
        "| **50% latency (ms) - mixed precision** |"
    )
    text = f"##### Inference performance: NVIDIA T4\n\n{header}\n|:---:|:---:|:---:|:---:|:---:|:---:|\n"
    text += " | 1   | 131 | 1.11 | 7.61 | 1.17 | 7.10 | \n"
    (row,) = read_readme(text, "mx.md").rows
    assert (row["batch"], row["throughput"], row["latency_avg"], row["latency_p50"]) == ("1", "131", "7.61", "7.10")
    assert "1.11" not in row.values() and row["table_heading"] == ""


def test_tables_by_concurrent_requests_or_of_figures_are_skipped_and_counted():
    text = """\
#### Offline: NVIDIA T4, TF-TRT with FP16

|![](plots/a.svg)|![](plots/b.svg)|
|-----|-----|

| Precision   | Backend Accelerator   |   Client Batch Size |   Inferences/second |   P90 Latency |   Avg Latency |
|:------------|:---------------------|--------------------:|--------------------:|--------------:|--------------:|
| FP16        | TensorRT             |                   1 |               329.5 |         3.23  |         3.031 |

#### Online: NVIDIA T4, TF-TRT with FP16

|   Concurrent client requests |   Inferences/second |   Avg Latency |
|-----------------------------:|--------------------:|--------------:|
|                           16 |              1421.3 |        11.246 |
"""
    tables = read_readme(text, "triton.md")
    assert [(r["precision"], r["accelerator"], r["batch"], r["throughput"]) for r in tables.rows] == [
        ("FP16", "TensorRT", "1", "329.5")
    ]
    assert tables.skipped_tables == [
        "triton.md line 3: a table of figures",
        "triton.md line 12: by concurrent requests, no batch",
    ]


@pytest.mark.parametrize(
    ("header", "row", "message"),
    [
        (
            "|Batch Size|Avg throughput|Energy|",
            "|1|2 img/s|3|",
            "x.md line 3: unknown column 'Energy': the README's columns moved",
        ),
        (
            "|Avg throughput|Avg latency|",
            "|2 img/s|3 ms|",
            "x.md line 3: a table without batch: the README's columns moved",
        ),
        ("|Batch Size|Avg throughput|", "|1|2 img/s|3|", "x.md line 5: 3 cells under a header of 2"),
        ("|Batch Size|Avg throughput|", "|1|", "x.md line 5: 1 cells under a header of 2"),
    ],
)
def test_a_readme_table_whose_columns_moved_is_one_line_naming_the_file(header, row, message):
    text = f"##### Inference performance: NVIDIA T4\n\n{header}\n|---|---|\n{row}\n"
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        read_readme(text, "x.md")
    assert "\n" not in str(error.value)


CSV_HEADER = (
    "model,gpu_heading,gpu,precision,published_precision,batch,resolution,throughput_img_s,latency_avg_ms,"
    "latency_p90_ms,latency_p95_ms,latency_p99_ms,framework,backend,memory_format,data,repo,path,commit,table_heading"
)


def test_a_frameworks_csv_keeps_its_backend_and_skips_gpus_without_a_spec_row(tmp_path, capsys):
    """Three rows: TF-XLA AMP on a T4, Paddle-TRT INT8 on an A30, and one of the DGX-2's V100 32GB (no spec row):
    two enter the store with their backend and layout, the third is left out and named with its row."""
    table = tmp_path / "frameworks.csv"
    table.write_text(
        CSV_HEADER
        + "\n"
        + "torchvision:resnet50,Inference performance: NVIDIA T4,t4,amp,Mixed Precision,8,224,1454.93,5.57,,,,"
        + "TensorFlow 1,tensorflow+xla,unstated,real,NVIDIA/DeepLearningExamples,p.md,c,Mixed Precision + XLA\n"
        + "torchvision:resnet50,Paddle-TRT performance: NVIDIA A30,a30,int8,INT8,1,224,1346.83,0.74,,,,"
        + "PaddlePaddle,paddle-tensorrt,unstated,synthetic,NVIDIA/DeepLearningExamples,q.md,c,INT8 Inference Latency\n"
        + "torchvision:resnet50,Inference performance: NVIDIA DGX-2 (1x V100 32G),,fp32,FP32,1,224,187.41,5.374,,,,"
        + "TensorFlow 1,tensorflow,unstated,real,NVIDIA/DeepLearningExamples,p.md,c,FP32 Inference Latency\n"
    )
    read = read_table("deeplearningexamples", table)
    assert [(r["gpu"], r["precision"], r["backend"], r["memory_format"]) for r in read.rows] == [
        ("t4", "amp", "tensorflow+xla", "unstated"),
        ("a30", "int8", "paddle-tensorrt", "unstated"),
    ]
    assert read.left_out == (
        "row 3 (Inference performance: NVIDIA DGX-2 (1x V100 32G)): no spec-table row for its GPU",
    )
    db = tmp_path / "dle.sqlite"
    assert main(["ingest", "deeplearningexamples", str(table), "--db", str(db), "--no-count"]) == 0
    out = capsys.readouterr().out
    assert "frameworks.csv: 2 rows, 2 rows added" in out
    assert "frameworks.csv: 1 row left out: row 3 (Inference performance: NVIDIA DGX-2 (1x V100 32G))" in out


def test_the_shipped_frameworks_tables_enter_a_store_whole_but_the_dgx2_rows():
    """The four shipped files: 386 TensorFlow rows (75 on the DGX-2's V100 32GB, no spec row), 31 MXNet, 99
    PaddlePaddle, 64 Triton; 505 enter the store, each backend naming its framework or runtime."""
    files = [
        SHIPPED / f"{name}_inference.csv"
        for name in ("tensorflow_convnets", "mxnet_rn50", "paddlepaddle_rn50", "triton_convnets")
    ]
    tables = [read_table("deeplearningexamples", path) for path in files]
    assert [len(t.rows) for t in tables] == [311, 31, 99, 64]
    assert [t.left_out for t in tables][1:] == [(), (), ()]
    assert len(tables[0].left_out) == 75
    assert {why.split(" (", 1)[1] for why in tables[0].left_out} == {
        "Inference performance: NVIDIA DGX-2 (1x V100 32G)): no spec-table row for its GPU"
    }
    backends = {row["backend"] for t in tables for row in t.rows}
    assert backends == {"tensorflow", "tensorflow+xla", "tensorflow2", "mxnet", "paddle", "paddle-tensorrt",
                        "triton-onnxruntime-tensorrt", "triton-tf-trt"}  # fmt: skip


def test_ingesting_the_shipped_frameworks_tables_says_what_it_skipped(tmp_path):
    db = tmp_path / "dle.sqlite"
    result = ingest([SHIPPED / "tensorflow_convnets_inference.csv"], db, "deeplearningexamples")
    assert result.added == 311 and len(result.left_out) == 75
    assert result.to_dict()["left_out"][0]["file"] == "tensorflow_convnets_inference.csv"
    with Store(db, create=False) as store:
        frame = store.published_frame()
    assert "v100_sxm2" in set(frame["gpu"]) and "" not in set(frame["gpu"])
