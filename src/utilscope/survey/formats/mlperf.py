"""MLCommons' MLPerf Inference ResNet-50 results, one CSV row per (round, submitter, system, scenario), as shipped in
``data/public/mlperf`` (its README: the repositories, files and conditions; ``scripts/mlperf_resnet50.py`` writes
it): format ``mlperf``.

Columns read: ``round``, ``repo``, ``commit``, ``submitter``, ``system``, ``scenario`` (Offline | Server),
``validity``, ``result_metric``, ``samples_per_s`` (the system's published result, as printed), ``accelerators``,
``accelerator_model_name``, ``gpu`` (a spec-table key, empty when none matched), ``samples_per_s_per_gpu_derived``,
``unit``, ``precision``, ``runtime`` and ``result_path``. Each row is stored as one GPU's row of
``torchvision:resnet50`` (MLPerf's ResNet-50 v1.5, the model DeepLearningExamples' ``resnet50v1.5`` rows are) at
224 px, with ``samples_per_s`` the derived per-GPU throughput (system ÷ accelerators, checked against the published
number here), precision ``int8``, backend ``tensorrt (MLPerf Offline)`` or ``tensorrt (MLPerf Server)`` (the
runtime and LoadGen's scenario), memory format ``tensorrt-chosen`` (the engine's own layouts) and the batch unknown
(``UNPUBLISHED_BATCH``: the submitter's harness batches). A row the atlas cannot use, of a GPU the spec table lacks,
another unit, precision or runtime, or not VALID, is kept out of the store and said (``LEFT_OUT``).
"""

from __future__ import annotations

from pathlib import Path

from utilscope.errors import UsageError
from utilscope.hardware import get_spec
from utilscope.survey.formats.table import (
    LEFT_OUT,
    UNPUBLISHED_BATCH,
    TableFormat,
    csv_records,
    positive_number,
    register_format,
)

FORMAT = "mlperf"
COLUMNS = (
    "round",
    "repo",
    "commit",
    "submitter",
    "system",
    "scenario",
    "validity",
    "result_metric",
    "samples_per_s",
    "accelerators",
    "accelerator_model_name",
    "gpu",
    "samples_per_s_per_gpu_derived",
    "unit",
    "precision",
    "runtime",
    "result_path",
)
MODEL = "torchvision:resnet50"  # MLPerf's ResNet-50 v1.5: the stride-2 3x3 convolution, as torchvision's
RESOLUTION = 224
SCENARIOS = ("Offline", "Server")
READ = {"unit": "samples/s", "precision": "int8", "runtime": "tensorrt", "validity": "VALID"}  # what a stored row is
LAYOUT = "tensorrt-chosen"  # TensorRT's engine chooses its layouts; the input is int8 NCHW
BACKEND = "tensorrt (MLPerf {scenario})"  # the runtime and LoadGen's scenario: Offline and Server are not alike


def _kept_out(record: dict, number: int) -> str:
    """Why the row stays out of the store ("row N: ..."), "" when it goes in."""
    where = f"row {number} ({record['round']} {record['submitter']}/{record['system']} {record['scenario']})"
    for column, wanted in READ.items():
        if record[column].strip() != wanted:
            return f"{where}: {column} {record[column].strip()!r}, not {wanted}"
    gpu = record["gpu"].strip()
    if not gpu:
        return f"{where}: GPU {record['accelerator_model_name']!r} has no spec-table key"
    try:
        get_spec(gpu)
    except UsageError:
        return f"{where}: GPU key {gpu!r} is not in the spec table (`utilscope devices`)"
    return ""


def _row(record: dict, path: Path, number: int) -> dict:
    """One published row with its condition and provenance, checked; ``{LEFT_OUT: why}`` for a row kept out."""
    if record["scenario"] not in SCENARIOS:
        raise UsageError(f"{path} row {number}: scenario {record['scenario']!r} is none of {', '.join(SCENARIOS)}")
    system = positive_number(record["samples_per_s"], path, number, "samples_per_s")
    gpus = positive_number(record["accelerators"], path, number, "accelerators", integer=True)
    per_gpu = positive_number(record["samples_per_s_per_gpu_derived"], path, number, "samples_per_s_per_gpu_derived")
    if abs(per_gpu - system / gpus) > 0.005 + 1e-9 * system:  # the column is system / accelerators, 2 decimals
        raise UsageError(
            f"{path} row {number}: samples_per_s_per_gpu_derived {per_gpu:g} is not samples_per_s / accelerators "
            f"({record['samples_per_s']} / {gpus} = {system / gpus:.2f})"
        )
    why = _kept_out(record, number)
    if why:
        return {LEFT_OUT: why}
    return {
        "source_row": number,
        "repository": record["repo"],
        "source_path": (
            f"{record['result_path']} ({record['result_metric']}: {record['samples_per_s']} for the system, "
            f"per GPU derived: / {gpus})"
        ),
        "source_commit": f"{record['round']} {record['commit']}",
        "gpu": get_spec(record["gpu"].strip()).key,
        "gpu_label": f"{gpus}x {record['accelerator_model_name']} ({record['submitter']} {record['system']})",
        "model": MODEL,
        "resolution": RESOLUTION,
        "batch": UNPUBLISHED_BATCH,
        "precision": READ["precision"],
        "memory_format": LAYOUT,
        "backend": BACKEND.format(scenario=record["scenario"]),
        "samples_per_s": per_gpu,
        "step_time_ms": None,
    }


def read(path: Path, text: str, sha256: str) -> list[dict]:
    """The file's rows (``_row``); a one-line UsageError for a missing column or a bad cell."""
    records = csv_records(path, text, f"{FORMAT} table", COLUMNS)
    return [_row(record, path, number) for number, record in enumerate(records, start=1)]


register_format(
    TableFormat(
        FORMAT,
        "MLPerf Inference ResNet-50 results, TensorRT int8, per GPU derived from the system's (data/public/mlperf)",
        read,
    )
)
