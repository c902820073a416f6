"""``utilscope export``: a store's table to a CSV or Parquet file, and such a file read back into the frame the store
gave. Notes and environment (lists and dicts) become JSON text; in a CSV every cell is text, "" a missing number,
and floats parse back exactly. ``export_measurements`` refuses (nothing written) when there is nothing to export or
the file cannot be written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from utilscope.errors import UsageError
from utilscope.files import EXPORT_FILE as EXPORT
from utilscope.files import EXPORT_SUFFIXES, check_output_file, make_folder
from utilscope.survey.schema import DERIVED_COLUMNS, KEY_COLUMNS, TABLES, decode_column
from utilscope.survey.store import Store
from utilscope.survey.store_files import StoreError


def export_measurements(store: Store, path: str | Path) -> Path:
    """Write the store's measurements to ``path`` (.csv or .parquet, missing folders created); UsageError when
    the store holds no measurement or ``path`` cannot be written (a folder, under a file, another suffix)."""
    if not store.done_keys(retry_errors=False):  # every key, error rows included: reads the keys only
        raise UsageError(f"{store.path} holds no measurements: nothing to export")
    return export_table(store, check_output_file(path, EXPORT, EXPORT_SUFFIXES))


def export_table(store: Store, path, table: str = "measurements") -> Path:
    """Write the store's ``table`` to ``path`` (.csv or .parquet); notes and environment become JSON text."""
    path = Path(path)
    if table not in TABLES:
        raise StoreError(f"unknown table {table!r}; choose from {list(TABLES)}")
    if path.suffix.lower() not in EXPORT_SUFFIXES:
        raise StoreError(f"export to a {' or '.join(EXPORT_SUFFIXES)} file, got {path.name!r}")
    flat = _json_to_text(store.table_frame(table), TABLES[table])
    make_folder(path.parent, EXPORT)
    if path.suffix.lower() == ".csv":
        flat.to_csv(path, index=False)
    else:
        _require_pyarrow()
        flat.to_parquet(path, index=False)
    return path


def _json_to_text(frame: pd.DataFrame, kinds: dict) -> pd.DataFrame:
    flat = frame.copy()
    for name, kind in kinds.items():
        if kind in ("list", "dict"):
            flat[name] = pd.Series([json.dumps(v) for v in frame[name]], dtype="str", index=frame.index)
    return flat


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise StoreError("Parquet export needs pyarrow: pip install pyarrow (or export to .csv)") from exc


def read_export(path, table: str = "measurements") -> pd.DataFrame:
    """Read an ``export_table`` file back into the frame ``Store.frame()`` (or ``op_class_frame()``) gave."""
    path = Path(path)
    kinds = TABLES[table]
    suffix = path.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise StoreError(f"read a {' or '.join(EXPORT_SUFFIXES)} export, got {path.name!r}")
    if suffix == ".parquet":
        _require_pyarrow()
        raw = pd.read_parquet(path)
    else:  # every cell as text: "" is NULL for numbers, and floats parse back exactly
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [name for name in (*kinds, *DERIVED_COLUMNS) if name not in raw.columns]
    if missing:
        raise StoreError(f"{path} is not an export of the {table} table: missing columns {missing}")
    if suffix == ".parquet":
        columns = {name: [None if pd.isna(v) else v for v in raw[name]] for name in kinds}
    else:
        columns = {name: [_parse_csv_cell(kind, text) for text in raw[name]] for name, kind in kinds.items()}
    frame = pd.concat([decode_column(name, kind, columns[name]) for name, kind in kinds.items()], axis=1)
    for name in DERIVED_COLUMNS:
        frame.insert(len(KEY_COLUMNS), name, pd.Series(list(raw[name]), dtype="str", index=frame.index))
    return frame


def _parse_csv_cell(kind: str, text: str):
    if kind == "str" or kind in ("list", "dict"):
        return text
    if kind == "bool":
        return text == "True"
    if text == "":
        return None
    return int(text) if kind in ("int", "limit") else float(text)
