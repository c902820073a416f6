"""Published table formats: one module per source format, each registered by name in ``FORMATS`` (as the model
sources are), each reading one file into a ``PublishedTable``: its rows with their condition (GPU, precision,
layout, backend, resolution, batch, torch) and provenance (repository, path, commit), checked whole before
anything is written. ``utilscope ingest FORMAT FILE...`` reaches them (``survey.published.ingest``); a new format is
one module here and one ``register_format`` call.

- ``timm-benchmark`` (``timm_benchmark``): timm's ``benchmark-infer-*.csv`` (``data/public/timm-benchmark``);
- ``deeplearningexamples`` (``deeplearningexamples``): NVIDIA DeepLearningExamples' inference tables, one row per
  published table row, as shipped in ``data/public/deeplearningexamples`` (``dle_readme`` reads the READMEs those
  CSVs are copied from: ``scripts/build_dle_tables.py``);
- ``generic-csv`` (``generic_csv``): a CSV anyone writes, one measurement a row with its condition and provenance.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import decode_text, read_bytes
from utilscope.registry import Registry
from utilscope.survey.formats import deeplearningexamples, generic_csv, timm_benchmark  # noqa: F401  (they register)
from utilscope.survey.formats.table import FORMATS, PublishedTable, Rows, TableFormat, register_format

__all__ = ["FORMATS", "PublishedTable", "Rows", "TableFormat", "formats", "read_table", "register_format"]


def read_table(format_name: str, path) -> PublishedTable:
    """A file of the format read and checked; writes nothing. UsageError for an unknown format or a bad file."""
    table_format = FORMATS.get(format_name)
    path = Path(path)
    what = f"{format_name} table"
    content = read_bytes(path, what)
    table_format.check_name(path)
    sha256 = hashlib.sha256(content).hexdigest()
    rows = table_format.read(path, decode_text(content, path, what), sha256)
    if not rows:
        raise UsageError(f"{path} is a {format_name} table without rows")
    return PublishedTable(path, sha256, list(rows), tuple(getattr(rows, "skipped", ())))


def formats() -> Registry[TableFormat]:
    """Every registered format: the shipped modules', registered when this package is imported, and any other."""
    return FORMATS
