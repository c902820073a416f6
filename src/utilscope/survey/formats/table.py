"""A published table as the store takes it, and the registry of the formats that read one (``survey.formats``)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.registry import Registry
from utilscope.units import now_iso

ROW_DEFAULTS = {"reparam": "", "count_status": "", "conv_class": "", "torch": "", "cuda": ""}


class Rows(list):
    """A format's rows, and what it skipped (``skipped``: one line per cause, with how many rows), for a format
    that keeps some published rows out of the store (a GPU without a spec-table row) and says so."""

    skipped: list[str] = []


@dataclass(frozen=True)
class PublishedTable:
    """One file's rows, ready for the store: each row holds its own condition and provenance (``records``), and
    the rows its format skipped, one line per cause (``skipped``)."""

    path: Path
    sha256: str
    rows: list[dict]
    skipped: tuple[str, ...] = ()

    def records(self) -> list[dict]:
        """Every row with its file's name and SHA-256: the store's ``published`` columns."""
        source = {"source_file": self.path.name, "source_sha256": self.sha256, "ingested_at": now_iso()}
        return [{**ROW_DEFAULTS, **source, **row} for row in self.rows]


@dataclass(frozen=True)
class TableFormat:
    """A source format: its name, what its files are, and how one is read (``read(path, text, sha256)``: the
    rows, each with its condition; a one-line UsageError naming the file and row for anything it cannot read;
    ``check_name``, before the file is read, where the format's file names carry its condition)."""

    name: str
    description: str
    read: Callable[[Path, str, str], list[dict]]
    check_name: Callable[[Path], object] = lambda path: None  # a UsageError for a file not named as the format


FORMATS: Registry[TableFormat] = Registry("table format")


def positive_number(text, path: Path, row: int, column: str, integer: bool = False, optional: bool = False):
    """A table cell's number, above 0 and finite (``integer``: a whole one; ``optional``: an empty cell is None);
    a one-line UsageError naming the file, row and column otherwise."""
    if optional and (text or "").strip() == "":
        return None
    try:
        value = int(text) if integer else float(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        kind = "a whole number" if integer else "a number"
        raise UsageError(f"{path} row {row}: {column} must be {kind} above 0, got {text!r}")
    return value


def csv_records(path: Path, text: str, what: str, columns: tuple[str, ...]) -> csv.DictReader:
    """The rows of a CSV table as dicts; a one-line UsageError naming the file when a required column is missing."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in columns if column not in (reader.fieldnames or ())]
    if missing:
        raise UsageError(
            f"{path} is not a {what}: it lacks the columns {', '.join(missing)} (expected {', '.join(columns)})"
        )
    return reader


def register_format(table_format: TableFormat) -> TableFormat:
    return FORMATS.add(table_format.name, table_format)
