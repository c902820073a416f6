"""NVIDIA DeepLearningExamples' inference tables, one CSV row per published table row, as shipped in
``data/public/deeplearningexamples`` (its README: the READMEs they were copied from and their conditions; the
files other than PyTorch's are written by ``scripts/build_dle_tables.py`` through ``dle_readme``): format
``deeplearningexamples``.

Columns: ``model`` (a utilscope spec), ``gpu_heading``, ``gpu`` (a spec-table key; empty: a GPU the spec table has
no row for), ``precision`` (``PRECISIONS``), ``batch``, ``throughput_img_s``, ``latency_avg_ms`` (and percentiles),
``repo``, ``path``, ``commit``, ``table_heading``, and optionally ``resolution``, ``memory_format`` and ``backend``
(the framework and runtime: ``tensorflow``, ``tensorflow+xla``, ``mxnet``, ``paddle-tensorrt``,
``triton-tf-trt``, ...; the other files' further condition columns, ``framework``, ``data`` and so on, stay in the
CSV). Where those three are absent (the PyTorch file), the condition is the PyTorch ConvNets ``configs.yml``'s at
that commit: AMP on NHWC (channels_last), FP32 and TF32 on NCHW (contiguous); 224 px, EfficientNet-B4 380 px;
eager PyTorch with real images loaded in the loop. A row whose ``gpu`` is empty is skipped, counted and named
(``LEFT_OUT``): its GPU has no datasheet peak, so no utilization.
"""

from __future__ import annotations

from pathlib import Path

from utilscope.errors import UsageError
from utilscope.hardware import get_spec
from utilscope.survey.formats.table import LEFT_OUT, TableFormat, csv_records, positive_number, register_format

FORMAT = "deeplearningexamples"
COLUMNS = ("model", "gpu_heading", "gpu", "precision", "batch", "throughput_img_s", "latency_avg_ms", "repo", "path")
PRECISIONS = ("fp32", "tf32", "amp", "fp16", "int8")
LAYOUT = {"amp": "channels_last", "fp32": "contiguous", "tf32": "contiguous"}  # configs.yml's memory_format
RESOLUTION = {"timm:efficientnet_b4": 380}  # configs.yml's image_size; 224 for the others


def _row(record: dict, path: Path, number: int) -> dict:
    """One published row with its condition and provenance, checked; a one-line UsageError naming the row."""
    if record["precision"] not in PRECISIONS:
        raise UsageError(f"{path} row {number}: precision {record['precision']!r} is none of {', '.join(PRECISIONS)}")
    try:
        spec = get_spec(record["gpu"])
    except UsageError as exc:
        raise UsageError(f"{path} row {number}: {exc}") from None
    model = record["model"].strip()
    return {
        "source_row": number,
        "repository": record.get("repo") or "",
        "source_path": f"{record.get('path') or ''} ({record.get('table_heading') or ''})",
        "source_commit": record.get("commit") or "",
        "gpu": spec.key,
        "gpu_label": record["gpu_heading"],
        "model": model,
        "resolution": int(record.get("resolution") or RESOLUTION.get(model, 224)),
        "batch": positive_number(record["batch"], path, number, "batch", integer=True),
        "precision": record["precision"],
        "memory_format": record.get("memory_format") or LAYOUT.get(record["precision"], "unstated"),
        "backend": record.get("backend") or "eager",
        "samples_per_s": positive_number(record["throughput_img_s"], path, number, "throughput_img_s"),
        "step_time_ms": positive_number(record["latency_avg_ms"], path, number, "latency_avg_ms", optional=True),
    }


def read(path: Path, text: str, sha256: str) -> list[dict]:
    """The file's rows, each with its condition and provenance (``_row``); one without a spec-table GPU kept out of
    the store, said (``LEFT_OUT``)."""
    records = csv_records(path, text, f"{FORMAT} table", COLUMNS)
    return [
        {LEFT_OUT: f"row {number} ({record['gpu_heading']}): no spec-table row for its GPU"}
        if (record["gpu"] or "").strip() == ""
        else _row(record, path, number)
        for number, record in enumerate(records, start=1)
    ]


register_format(
    TableFormat(FORMAT, "NVIDIA DeepLearningExamples' inference tables (data/public/deeplearningexamples)", read)
)
