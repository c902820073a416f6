"""The inference tables of an NVIDIA DeepLearningExamples README (markdown), read as printed: the source that
``scripts/build_dle_tables.py`` copies into the CSVs of ``data/public/deeplearningexamples`` (read by the
``deeplearningexamples`` format). Nothing is converted: every number keeps the text it was printed with, its unit
(``img/s``, ``ms``) taken off.

A table is read when it sits under an inference heading (``INFERENCE_HEADING``: "Inference performance: <GPU>",
"Paddle-TRT performance: <GPU>", Triton's "Offline: <GPU>, <runtime> with <precision>", and the Triton
tables by concurrent requests, "Online: <GPU>, ..." and "TensorRT backend inference performance (<GPU>)"); its
title is the last line before it that is bold (``**FP32 Inference Latency**``) or names an inference latency or
performance. Each header cell must be one ``COLUMNS`` names (the throughput-speedup columns, ratios to another
table, are left out); a table with another column, or without a batch or throughput column, is a one-line
UsageError naming the file and line ("the columns moved"), except tables by concurrent requests (Triton's online
scenario: no batch) and tables of figures (a row of ``![](...)`` images), which are skipped and counted. A row
whose throughput or latency carries another unit is skipped, counted and named. Cells after the header's last
column that begin with ``#`` (earlier numbers the authors left in the row) are
dropped; any other extra or missing cell is a UsageError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from utilscope.errors import UsageError

INFERENCE_HEADING = re.compile(
    r"^(?:(?:Inference performance|Paddle-TRT performance|Offline|Online):\s*.+"
    r"|TensorRT backend inference performance .+)$"
)
TITLE = re.compile(r"^\*\*(?P<bold>.+)\*\*$|^(?P<plain>.*Inference (?:Latency|Performance).*)$")
SPEEDUP = re.compile(r"speedup", re.IGNORECASE)
CONCURRENCY = re.compile(r"^concurrent", re.IGNORECASE)
# canonical column: the header texts (lower case, without ``*``) that name it
COLUMNS = {
    "batch": r"(?:client )?batch size",
    "throughput": r"avg throughput|throughput avg|inferences/second|throughput \((?:img/sec|img/s)\)(?: - .+)?",
    "latency_avg": r"(?:avg\.? latency|latency avg)(?: \(ms\))?(?: - .+)?",
    "latency_p50": r"(?:p50 latency|50% latency|latency 50%)(?: \(ms\))?(?: - .+)?",
    "latency_p90": r"(?:p90 latency|90% latency|latency 90%)(?: \(ms\))?(?: - .+)?",
    "latency_p95": r"(?:p95 latency|95% latency|latency 95%)(?: \(ms\))?(?: - .+)?",
    "latency_p99": r"(?:p99 latency|99% latency|latency 99%)(?: \(ms\))?(?: - .+)?",
    "resolution": r"resolution",
    "precision": r"precision",
    "accelerator": r"backend accelerator",
    "model": r"model",
}
UNITS = {"throughput": ("", "img/s"), "latency": ("", "ms")}  # the units a cell may carry, per kind of column
NUMBER = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>\S*)$")


@dataclass(frozen=True)
class ReadmeTables:
    """The rows of a README's inference tables (each a dict of canonical column → cell text without its unit,
    plus ``heading``, ``gpu_heading``, ``table_heading`` and ``line``), and what was skipped, each said in one
    line naming the file and line."""

    rows: list[dict] = field(default_factory=list)
    skipped_rows: list[str] = field(default_factory=list)
    skipped_tables: list[str] = field(default_factory=list)


def _column(text: str, path, line: int) -> str | None:
    """The canonical name of a header cell; None for a speedup column; a UsageError for any other."""
    name = text.replace("*", "").strip().lower()
    if SPEEDUP.search(name):
        return None
    for column, pattern in COLUMNS.items():
        if re.fullmatch(pattern, name):
            return column
    raise UsageError(f"{path} line {line}: unknown column {text.strip()!r}: the README's columns moved")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _value(cell: str, kind: str) -> tuple[str, str | None]:
    """(the number as printed, None) or ("", why the cell is not one of the kind's units)."""
    if cell == "":
        return "", None
    match = NUMBER.match(cell)
    if match is None or match["unit"] not in UNITS[kind]:
        return "", f"{cell!r} is not a number in {' or '.join(u or 'no unit' for u in UNITS[kind])}"
    return match["number"], None


def _row(cells: list[str], header: list, path, line: int) -> tuple[dict | None, str | None]:
    """One table row as canonical column → text; (None, reason) for a row skipped for its unit."""
    extra = cells[len(header) :]
    if len(cells) < len(header) or (extra and not extra[0].startswith("#")):
        raise UsageError(f"{path} line {line}: {len(cells)} cells under a header of {len(header)}")
    row = {}
    for column, cell in zip(header, cells, strict=False):
        if column is None:
            continue
        kind = "throughput" if column == "throughput" else "latency" if column.startswith("latency") else None
        if kind is None:
            row[column] = cell
            continue
        row[column], why = _value(cell, kind)
        if why is not None:
            return None, f"{path} line {line}: {column} {why}"
    return row, None


def read_readme(text: str, path) -> ReadmeTables:
    """Every row of the README's inference tables (module docstring), with its GPU heading and table title."""
    result = ReadmeTables()
    gpu = title = header = None
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            match = INFERENCE_HEADING.match(heading)
            gpu, title, header = (heading if match else None), None, None
            continue
        if gpu is None:
            continue
        if not line.startswith("|"):
            header = None
            match = TITLE.match(line)
            if match:
                title = (match["bold"] or match["plain"]).strip()
            continue
        cells = _cells(line)
        if header is None:
            header = _header(cells, path, number, result)
            continue
        if header == "skip" or all(set(cell) <= set(":- ") for cell in cells):  # a rule line, or a lone "|"
            continue
        row, why = _row(cells, header, path, number)
        if why is not None:
            result.skipped_rows.append(why)
        elif row.get("batch") or row.get("throughput"):
            result.rows.append({**row, "gpu_heading": gpu, "table_heading": title or "", "line": number})
    return result


def _header(cells: list[str], path, line: int, result: ReadmeTables):
    """The canonical columns of a header row, or "skip" for a table by concurrent requests or of figures (counted)."""
    if CONCURRENCY.match(cells[0].replace("*", "").strip()):
        result.skipped_tables.append(f"{path} line {line}: by concurrent requests, no batch")
        return "skip"
    if all(cell.startswith("![") for cell in cells):
        result.skipped_tables.append(f"{path} line {line}: a table of figures")
        return "skip"
    header = [_column(cell, path, line) for cell in cells]
    missing = [name for name in ("batch", "throughput") if name not in header]
    if missing:
        raise UsageError(f"{path} line {line}: a table without {' or '.join(missing)}: the README's columns moved")
    return header
