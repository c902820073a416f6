"""Published table formats: one module per source format, each registered by name in ``FORMATS`` (as the model
sources are), each reading one file into a ``PublishedTable``: its rows with their condition (GPU, precision,
layout, backend, resolution, batch, torch) and provenance (repository, path, commit), checked whole before
anything is written. ``utilscope ingest FORMAT FILE...`` reaches them (``survey.published.ingest``); a new format is
one module here and one ``register_format`` call.

- ``timm-benchmark`` (``timm_benchmark``): timm's ``benchmark-infer-*.csv`` (``data/public/timm-benchmark``);
- ``deeplearningexamples`` (``deeplearningexamples``): NVIDIA DeepLearningExamples' inference tables, one row per
  published table row, as shipped in ``data/public/deeplearningexamples``;
- ``mlperf`` (``mlperf``): MLCommons' MLPerf Inference ResNet-50 results, one row per round, system and scenario,
  as shipped in ``data/public/mlperf`` (TensorRT int8, per-GPU throughput derived from the system's);
- ``generic-csv`` (``generic_csv``): a CSV anyone writes, one measurement a row with its condition and provenance.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import decode_text, read_bytes
from utilscope.registry import Registry
from utilscope.survey.formats import (  # noqa: F401  (they register)
    deeplearningexamples,
    generic_csv,
    mlperf,
    timm_benchmark,
)
from utilscope.survey.formats.table import FORMATS, LEFT_OUT, PublishedTable, TableFormat, register_format

__all__ = ["FORMATS", "PublishedTable", "TableFormat", "formats", "read_table", "read_tables", "register_format"]


def read_table(format_name: str, path) -> PublishedTable:
    """A file of the format read and checked; writes nothing. UsageError for an unknown format or a bad file (or
    one whose every row the format keeps out: ``PublishedTable.left_out`` says why)."""
    table_format = FORMATS.get(format_name)
    path = Path(path)
    what = f"{format_name} table"
    content = read_bytes(path, what)
    table_format.check_name(path)
    sha256 = hashlib.sha256(content).hexdigest()
    read = table_format.read(path, decode_text(content, path, what), sha256)
    rows = [row for row in read if LEFT_OUT not in row]
    left_out = tuple(row[LEFT_OUT] for row in read if LEFT_OUT in row)
    if not rows:
        why = f" ({len(left_out)} left out: {'; '.join(left_out[:3])})" if left_out else ""
        raise UsageError(f"{path} is a {format_name} table without rows{why}")
    return PublishedTable(path, sha256, rows, left_out)


def read_tables(format_name: str, paths) -> list[PublishedTable]:
    """The files of a format read and checked (``read_table``), none named like another (a table given twice, or
    two versions of one); writes nothing. Nothing heavy is imported: the command line calls it before the
    ingester does, so that a bad table is said at once."""
    FORMATS.get(format_name)  # an unknown format is said before any file is read
    tables = [read_table(format_name, path) for path in paths]
    names = [table.path.name for table in tables]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"tables named alike given twice: {', '.join(twice)}")
    return tables


def formats() -> Registry[TableFormat]:
    """Every registered format: the shipped modules', registered when this package is imported, and any other."""
    return FORMATS
