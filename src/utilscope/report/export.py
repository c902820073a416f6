"""``utilscope export``: a store's measurements to a CSV or Parquet file, refused (nothing written) when there is
nothing to export or the file cannot be written."""

from __future__ import annotations

from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import check_output_file
from utilscope.survey.store import EXPORT_SUFFIXES, Store

EXPORT = "export"


def export_measurements(store: Store, path: str | Path) -> Path:
    """Write the store's measurements to ``path`` (.csv or .parquet, missing folders created); UsageError when
    the store holds no measurement or ``path`` cannot be written (a folder, under a file, another suffix)."""
    if not store.done_keys(retry_errors=False):  # every key, error rows included: reads the keys only
        raise UsageError(f"{store.path} holds no measurements: nothing to export")
    return store.export(check_output_file(path, EXPORT, EXPORT_SUFFIXES))
