"""Results store: one SQLite file of measurements that several surveys can write at once.

One row per (model, resolution, batch, precision, backend, device, software) measurement, upserted in its own
transaction; a second table holds the op-class attribution summary of a key. WAL journal mode and a 30 s busy
timeout let concurrent writers wait for each other instead of failing. ``PRAGMA application_id`` marks the file as a
utilscope store and ``PRAGMA user_version`` holds the schema version: a file that is not a store, is corrupt or was
written by a newer utilscope is a ``StoreError`` and is never overwritten.
"""

from __future__ import annotations

import json
import numbers
import operator
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from utilscope.errors import UsageError

SCHEMA_VERSION = 1
APPLICATION_ID = int.from_bytes(b"UtSc", "big")  # 0x55745363: marks a SQLite file as a utilscope store
BUSY_TIMEOUT_S = 30.0
SQLITE_HEADER = b"SQLite format 3\x00"

# Column kinds: str, int, float, bool (stored 0/1), list and dict (stored as JSON text).
_KEY_KINDS = {
    "model": "str",
    "resolution": "int",
    "batch": "int",
    "precision": "str",
    "backend": "str",
    "device": "str",
    "software": "str",  # e.g. "torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04"
}
_VALUE_KINDS = {
    "family": "str",
    "flops_per_sample": "int",
    "params": "int",
    "status": "str",  # ok | oom | error: ...
    "latency_ms": "float",
    "samples_per_s": "float",
    "achieved_tflops": "float",
    "utilization": "float",
    "utilization_vs_ceiling": "float",
    "peak_tflops": "float",
    "peak_source": "str",
    "achieved_gbs": "float",
    "bandwidth_utilization": "float",
    "bytes_model": "str",  # which byte count achieved_gbs uses: unfused | fused
    "nvml_util": "float",
    "cv": "float",
    "unstable": "bool",
    "iters_per_sample": "int",
    "cuda_graph": "bool",
    "notes": "list",
    "environment": "dict",
    "measured_at": "str",  # ISO-8601 UTC
    "wall_s": "float",  # seconds this cell cost, including its share of subprocess start
}
_OP_CLASS_VALUE_KINDS = {"op_class": "str", "flop_share": "float", "time_share": "float", "time_ms": "float"}

KEY_COLUMNS = tuple(_KEY_KINDS)
VALUE_COLUMNS = tuple(_VALUE_KINDS)
OP_CLASS_COLUMNS = tuple(_OP_CLASS_VALUE_KINDS)
COLUMN_KINDS = {**_KEY_KINDS, **_VALUE_KINDS}
OP_CLASS_KINDS = {**_KEY_KINDS, **_OP_CLASS_VALUE_KINDS}
STATUSES = ("ok", "oom", "error: ...")
TABLES = {"measurements": COLUMN_KINDS, "op_classes": OP_CLASS_KINDS}
EXPORT_SUFFIXES = (".csv", ".parquet")

_SQL_TYPES = {"str": "TEXT", "int": "INTEGER", "float": "REAL", "bool": "INTEGER", "list": "TEXT", "dict": "TEXT"}
_NULLABLE_KINDS = ("int", "float")  # missing numbers are NULL; strings, bools and JSON have defaults instead
_DEFAULTS = {"family": "", "peak_source": "", "bytes_model": "", "unstable": False, "cuda_graph": False}


class StoreError(UsageError):
    """A results store that cannot be used: not a SQLite file, corrupt, another application's, or newer."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def row_key(row: dict) -> tuple:
    """The key tuple of a measurement row, in ``KEY_COLUMNS`` order (the tuples ``done_keys`` returns)."""
    missing = [name for name in KEY_COLUMNS if name not in row]
    if missing:
        raise ValueError(f"missing key columns {missing}; a key needs {list(KEY_COLUMNS)}")
    return tuple(_encode(name, _KEY_KINDS[name], row[name]) for name in KEY_COLUMNS)


def check_status(status) -> str:
    if not isinstance(status, str) or not (status in ("ok", "oom") or status.startswith("error:")):
        raise ValueError(f"status must be one of {list(STATUSES)}, got {status!r}")
    return status


# --- encoding and decoding values -------------------------------------------------------------------------------


def _encode_value(kind: str, value):
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__} {value!r}")
        return str.__str__(value)  # a (str, Enum) member stores its value
    if kind == "int":
        return operator.index(value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"expected a number, got {type(value).__name__} {value!r}")
        return float(value)
    if kind == "bool":
        if isinstance(value, str) or value not in (0, 1):
            raise TypeError(f"expected a bool, got {type(value).__name__} {value!r}")
        return int(bool(value))
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return json.dumps(list(value), default=str)
    if not isinstance(value, dict):
        raise TypeError(f"expected a dict, got {type(value).__name__}")
    return json.dumps(value, default=str)


def _encode(name: str, kind: str, value):
    if value is None:
        if kind in _NULLABLE_KINDS and name not in _KEY_KINDS:
            return None
        raise ValueError(f"column {name!r} may not be None")
    try:
        return _encode_value(kind, value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"column {name!r}: {exc}") from None


def _check_names(row: dict, kinds: dict, required: tuple, what: str) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"a {what} must be a dict, got {type(row).__name__}")
    missing = [name for name in required if name not in row]
    unknown = sorted(name for name in row if name not in kinds)
    if missing or unknown:
        parts = [f"missing columns {missing}"] if missing else []
        parts += [f"unknown columns {unknown} (known: {list(kinds)})"] if unknown else []
        raise ValueError(f"bad {what}: " + "; ".join(parts))


def encode_row(row: dict) -> tuple:
    """A measurement row as SQL parameters in ``COLUMN_KINDS`` order; missing value columns take defaults."""
    _check_names(row, COLUMN_KINDS, KEY_COLUMNS + ("status",), "measurement row")
    check_status(row["status"])
    full = {**_DEFAULTS, "notes": [], "environment": {}, "measured_at": now_iso(), **row}
    return tuple(_encode(name, kind, full.get(name)) for name, kind in COLUMN_KINDS.items())


def _decode_column(name: str, kind: str, values: list) -> pd.Series:
    if kind == "str":
        return pd.Series(values, dtype="str", name=name)
    if kind == "int":
        return pd.Series(values, dtype="int64" if name in _KEY_KINDS else "Int64", name=name)
    if kind == "float":
        return pd.Series([float("nan") if v is None else v for v in values], dtype="float64", name=name)
    if kind == "bool":
        return pd.Series([bool(v) for v in values], dtype="bool", name=name)
    return pd.Series([json.loads(v) for v in values], dtype="object", name=name)


def _build_frame(records: list[tuple], kinds: dict) -> pd.DataFrame:
    """A frame of SQL-encoded records: JSON decoded, bools as bools, nullable ints as ``Int64``."""
    columns = list(zip(*records, strict=True)) if records else [()] * len(kinds)
    series = [_decode_column(name, kind, list(col)) for (name, kind), col in zip(kinds.items(), columns, strict=True)]
    return pd.concat(series, axis=1) if series else pd.DataFrame()


def _json_to_text(frame: pd.DataFrame, kinds: dict) -> pd.DataFrame:
    flat = frame.copy()
    for name, kind in kinds.items():
        if kind in ("list", "dict"):
            flat[name] = pd.Series([json.dumps(v) for v in frame[name]], dtype="str", index=frame.index)
    return flat


# --- opening ---------------------------------------------------------------------------------------------------


def _schema_sql() -> list[str]:
    statements = []
    for table, kinds in TABLES.items():
        columns = [
            f"{name} {_SQL_TYPES[kind]}{'' if kind in _NULLABLE_KINDS and name not in _KEY_KINDS else ' NOT NULL'}"
            for name, kind in kinds.items()
        ]
        primary = KEY_COLUMNS + (("op_class",) if table == "op_classes" else ())
        columns.append(f"PRIMARY KEY ({', '.join(primary)})")
        statements.append(f"CREATE TABLE IF NOT EXISTS {table} (\n  " + ",\n  ".join(columns) + "\n)")
    return statements


@dataclass(frozen=True)
class _FileState:
    application_id: int
    version: int
    tables: tuple[str, ...]


def _read_state(conn: sqlite3.Connection) -> _FileState:
    """The file's marks and tables, read in one transaction (a concurrent creator's commit cannot fall between)."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    finally:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
    return _FileState(application_id, version, tuple(name for (name,) in names))


def _verify(state: _FileState, path: Path) -> None:
    """Raise unless the file is a current store or a fresh, empty database."""
    left = "it was left unchanged"
    if state.application_id == 0 and not state.tables and state.version == 0:
        return  # empty: becomes a store
    if state.application_id != APPLICATION_ID:
        tables = f"tables {list(state.tables)}" if state.tables else "no tables"
        raise StoreError(
            f"{path} is a SQLite database of another application (application_id {state.application_id:#x}, "
            f"{tables}), not a utilscope results store; {left}"
        )
    if state.version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer utilscope (schema {state.version} > {SCHEMA_VERSION}): upgrade "
            f"utilscope; {left}"
        )
    missing = [table for table in TABLES if table not in state.tables]
    if state.version < 1 or missing:
        raise StoreError(f"{path} is a damaged utilscope store (schema {state.version}, missing {missing}); {left}")


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise StoreError(f"{path} is a directory; give the path of a results store file (e.g. results.sqlite)")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
        if header != SQLITE_HEADER:
            raise StoreError(f"{path} is not a SQLite database (or is corrupt): not a results store; left unchanged")


def _init_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Check the file; create the tables in a fresh one (in one transaction, so concurrent creators agree)."""
    state = _read_state(conn)
    _verify(state, path)
    if state.version == SCHEMA_VERSION:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall() if row[0] != "ok"]
        if problems:
            raise StoreError(f"{path} is a corrupt results store ({'; '.join(problems[:3])}); left unchanged")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        state = _read_state(conn)  # another process may have created it meanwhile
        _verify(state, path)
        if state.version != SCHEMA_VERSION:
            for statement in _schema_sql():
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to WAL journal mode. The switch takes an exclusive lock without waiting in SQLite's busy handler, so
    while another process holds the fresh file (two surveys creating one store at once) it is retried here."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    if mode.lower() != "wal":
        raise StoreError(f"{path}: SQLite refused WAL journal mode (got {mode!r}); use a local file system")


def _connect(path: Path) -> sqlite3.Connection:
    _check_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open results store {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _init_schema(conn, path)
        _enable_wal(conn, path)
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a power cut may lose the last rows, never corrupt
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "locked" in str(exc):
            raise StoreError(f"{path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s ({exc})") from exc
        raise StoreError(f"{path} is corrupt or not a usable results store (SQLite: {exc}); left unchanged") from exc
    except BaseException:
        conn.close()
        raise
    return conn


# --- the store -------------------------------------------------------------------------------------------------


def _upsert_sql(table: str, kinds: dict, conflict: tuple) -> str:
    names = ", ".join(kinds)
    marks = ", ".join("?" * len(kinds))
    updates = ", ".join(f"{name} = excluded.{name}" for name in kinds if name not in conflict)
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"


class Store:
    """A results store file; ``Store(path)`` creates a missing one (and its parent folders) unless
    ``create=False`` (reading commands: a missing store is an error, not an empty one)."""

    def __init__(self, path, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"no results store at {self.path}")
        self._conn: sqlite3.Connection | None = _connect(self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}{'' if self._conn else ', closed'})"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"results store {self.path} is closed")
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now: waits (busy timeout) instead of failing
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path}: {exc}") from exc

    def _query(self, sql: str, params=()) -> list[tuple]:
        try:
            return self._connection().execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path}: {exc}") from exc

    def add(self, row: dict) -> None:
        """Insert or replace one measurement (all its value columns), in its own transaction."""
        values = encode_row(row)
        with self._transaction() as conn:
            conn.execute(_upsert_sql("measurements", COLUMN_KINDS, KEY_COLUMNS), values)

    def add_op_classes(self, key: dict, rows: list[dict]) -> None:
        """Replace the op-class rows of one key (a dict with the key columns; value columns are ignored)."""
        _check_names(key, COLUMN_KINDS, KEY_COLUMNS, "op-class key")
        key_values = row_key(key)
        encoded, seen = [], set()
        for row in rows:
            _check_names(row, _OP_CLASS_VALUE_KINDS, ("op_class",), "op-class row")
            if row["op_class"] in seen:
                raise ValueError(f"op class {row['op_class']!r} given twice for key {key_values}")
            seen.add(row["op_class"])
            encoded.append(key_values + tuple(_encode(n, k, row.get(n)) for n, k in _OP_CLASS_VALUE_KINDS.items()))
        where = " AND ".join(f"{name} = ?" for name in KEY_COLUMNS)
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM op_classes WHERE {where}", key_values)
            conn.executemany(_upsert_sql("op_classes", OP_CLASS_KINDS, KEY_COLUMNS + ("op_class",)), encoded)

    def done_keys(self, retry_errors: bool = True) -> set[tuple]:
        """Key tuples already measured: status ok or oom, and error rows too when ``retry_errors`` is False."""
        where = " WHERE status IN ('ok', 'oom')" if retry_errors else ""
        return set(self._query(f"SELECT {', '.join(KEY_COLUMNS)} FROM measurements{where}"))

    def frame(self) -> pd.DataFrame:
        """All measurements, ordered by key: notes and environment decoded, bools as bools, missing ints <NA>."""
        return self._table_frame("measurements")

    def op_class_frame(self) -> pd.DataFrame:
        return self._table_frame("op_classes")

    def _table_frame(self, table: str) -> pd.DataFrame:
        kinds = TABLES[table]
        order = KEY_COLUMNS + (("op_class",) if table == "op_classes" else ())
        records = self._query(f"SELECT {', '.join(kinds)} FROM {table} ORDER BY {', '.join(order)}")
        return _build_frame(records, kinds)

    def export(self, path, table: str = "measurements") -> Path:
        """Write ``table`` to ``path`` (.csv or .parquet); notes and environment become JSON text."""
        path = Path(path)
        if table not in TABLES:
            raise StoreError(f"unknown table {table!r}; choose from {list(TABLES)}")
        if path.suffix.lower() not in EXPORT_SUFFIXES:
            raise StoreError(f"export to a {' or '.join(EXPORT_SUFFIXES)} file, got {path.name!r}")
        flat = _json_to_text(self._table_frame(table), TABLES[table])
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".csv":
            flat.to_csv(path, index=False)
        else:
            _require_pyarrow()
            flat.to_parquet(path, index=False)
        return path


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise StoreError("Parquet export needs pyarrow: pip install pyarrow (or export to .csv)") from exc


def read_export(path, table: str = "measurements") -> pd.DataFrame:
    """Read an ``export`` back into the frame ``Store.frame()`` (or ``op_class_frame()``) gave."""
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
    missing = [name for name in kinds if name not in raw.columns]
    if missing:
        raise StoreError(f"{path} is not an export of the {table} table: missing columns {missing}")
    if suffix == ".parquet":
        columns = {name: [None if pd.isna(v) else v for v in raw[name]] for name in kinds}
    else:
        columns = {name: [_parse_csv_cell(kind, text) for text in raw[name]] for name, kind in kinds.items()}
    return pd.concat([_decode_column(name, kind, columns[name]) for name, kind in kinds.items()], axis=1)


def _parse_csv_cell(kind: str, text: str):
    if kind == "str" or kind in ("list", "dict"):
        return text
    if kind == "bool":
        return text == "True"
    if text == "":
        return None
    return int(text) if kind == "int" else float(text)
