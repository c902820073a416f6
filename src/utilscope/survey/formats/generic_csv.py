"""A CSV anyone can write of published or their own inference measurements, one row per measurement: format
``generic-csv``.

Required columns: ``gpu`` (a spec-table key or a name `utilscope devices` resolves, e.g. ``a10``), ``model`` (a
utilscope model spec), ``resolution`` (pixels), ``batch``, ``precision`` (fp32, fp32_strict, tf32, fp16, bf16, amp,
amp_bf16 or int8), ``memory_format`` (channels_last or contiguous), ``backend`` (what ran it, in a word: eager,
graph, compile, inference, tensorrt, onnxruntime, ...) and ``samples_per_s``. Optional: ``latency_ms`` (one batch's
time), ``torch``, ``cuda``, ``gpu_label`` (the name the source gives the GPU), and the provenance: ``repository``,
``source_path`` (the file or page and its table), ``source_commit`` (a commit or a version). Every row is checked
before the store is touched; one bad cell, or the same condition twice (GPU, model, resolution, batch, precision,
layout, backend), refuses the file in one line naming the row.
"""

from __future__ import annotations

from pathlib import Path

from utilscope.errors import UsageError
from utilscope.hardware import get_spec
from utilscope.precision import Precision
from utilscope.survey.formats.table import TableFormat, csv_records, positive_number, register_format

FORMAT = "generic-csv"
COLUMNS = ("gpu", "model", "resolution", "batch", "precision", "memory_format", "backend", "samples_per_s")
LAYOUTS = ("channels_last", "contiguous")
PRECISIONS = tuple(p.value for p in Precision)
OPTIONAL = ("torch", "cuda", "repository", "source_path", "source_commit")  # text cells, empty when absent
CONDITION = ("gpu", "model", "resolution", "batch", "precision", "memory_format", "backend")


def _text(record: dict, column: str, path: Path, number: int, allowed: tuple[str, ...] = ()) -> str:
    """A required cell's text, stripped; a one-line UsageError when it is empty or (``allowed``) not one of them."""
    value = (record.get(column) or "").strip()
    if not value or (allowed and value not in allowed):
        expected = f"one of {', '.join(allowed)}" if allowed else "not empty"
        raise UsageError(f"{path} row {number}: {column} must be {expected}, got {value!r}")
    return value


def _row(record: dict, path: Path, number: int) -> dict:
    """One row with its condition and provenance, checked."""
    try:
        spec = get_spec(_text(record, "gpu", path, number))
    except UsageError as exc:
        raise UsageError(f"{path} row {number}: {exc}") from None
    optional = {name: (record.get(name) or "").strip() for name in OPTIONAL}
    return {
        "source_row": number,
        "gpu": spec.key,
        "gpu_label": (record.get("gpu_label") or "").strip() or record["gpu"].strip(),
        "model": _text(record, "model", path, number),
        "resolution": positive_number(record["resolution"], path, number, "resolution", integer=True),
        "batch": positive_number(record["batch"], path, number, "batch", integer=True),
        "precision": _text(record, "precision", path, number, PRECISIONS),
        "memory_format": _text(record, "memory_format", path, number, LAYOUTS),
        "backend": _text(record, "backend", path, number),
        "samples_per_s": positive_number(record["samples_per_s"], path, number, "samples_per_s"),
        "step_time_ms": positive_number(record.get("latency_ms"), path, number, "latency_ms", optional=True),
        **optional,
    }


def read(path: Path, text: str, sha256: str) -> list[dict]:
    """The file's rows (``_row``); a one-line UsageError for a missing column, a bad cell or a repeated condition."""
    rows, seen = [], {}
    for number, record in enumerate(csv_records(path, text, f"{FORMAT} table", COLUMNS), start=1):
        row = _row(record, path, number)
        key = tuple(row[name] for name in CONDITION)
        if key in seen:
            raise UsageError(f"{path} row {number}: the same condition as row {seen[key]} ({', '.join(map(str, key))})")
        seen[key] = number
        rows.append(row)
    return rows


register_format(
    TableFormat(FORMAT, 'a CSV you write, one measurement a row (README: "Published tables" lists its columns)', read)
)
