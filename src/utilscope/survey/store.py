"""Results store: one SQLite file of measurements that several surveys can write at once.

One row per cell key (``schema.CellKey``: the cell and its configuration, in columns), upserted in its own
transaction; a second table holds the op-class attribution summary of a key. WAL journal mode and a 30 s busy
timeout let concurrent writers wait for each other instead of failing. ``PRAGMA application_id`` marks the file as a
utilscope store and ``PRAGMA user_version`` holds the schema version: a store of an older schema is migrated in
place when opened to be written (``migrations``, with a backup copy), in memory when opened to be read; a file that
is not a store, is corrupt or was written by a newer utilscope is a ``StoreError`` and is never modified. A command
that only reads opens the store read-only (``Store(path, create=False)``): the file stays byte-identical and
nothing is created beside it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from utilscope.errors import StorageError
from utilscope.files import (
    RESULTS_STORE,
    given_path,
    os_error,
)
from utilscope.survey.migrations import MIGRATIONS, Migration
from utilscope.survey.schema import (
    ALL_TABLES,
    CLAIM_KINDS,
    COLUMN_KINDS,
    KEY_COLUMNS,
    OP_CLASS_KINDS,
    OP_CLASS_VALUE_KINDS,
    PRIMARY_KEYS,
    PUBLISHED_KINDS,
    SCHEMA_VERSION,
    TABLE_SINCE,
    TABLES,
    CellKey,
    build_frame,
    check_names,
    decode_column,
    decode_key,
    encode,
    encode_key,
    encode_row,
    schema_sql,
)
from utilscope.survey.store_files import (
    APPLICATION_ID,
    FileState,
    StoreError,
    check_application,
    check_readable,
    check_writable,
    read_only_uri,
    read_state,
)

BUSY_TIMEOUT_S = 30.0


# --- opening ---------------------------------------------------------------------------------------------------


def _verify(state: FileState, path: Path) -> None:
    """Raise unless the file is a current store or a fresh, empty database."""
    left = "it was left unchanged"
    if state.empty:
        return  # becomes a store
    check_application(state, path)
    if state.version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer utilscope (schema {state.version} > {SCHEMA_VERSION}): upgrade "
            f"utilscope; {left}"
        )
    required = [table for table, since in TABLE_SINCE.items() if since <= state.version]
    missing = [table for table in required if table not in state.tables]
    if state.version < 1 or missing or (state.version < SCHEMA_VERSION and state.version not in MIGRATIONS):
        raise StoreError(f"{path} is a damaged utilscope store (schema {state.version}, missing {missing}); {left}")


def _init_schema(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration | None:
    """Check the file; create the tables in a fresh one, or migrate an older schema's (in one transaction, so
    concurrent openers agree; after a backup copy of ``path`` unless ``backup`` is False). Returns what a
    migration did."""
    state = read_state(conn)
    _verify(state, path)
    if state.version == SCHEMA_VERSION:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall() if row[0] != "ok"]
        if problems:
            raise StoreError(f"{path} is a corrupt results store ({'; '.join(problems[:3])}); left unchanged")
        return None
    conn.execute("BEGIN IMMEDIATE")
    migration = None
    try:
        state = read_state(conn)  # another process may have created or migrated it meanwhile
        _verify(state, path)
        if state.version in MIGRATIONS:
            migration = MIGRATIONS[state.version](conn, path, backup)
        elif state.version != SCHEMA_VERSION:
            for statement in schema_sql():
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if migration is not None and migration.backup is not None:
            migration.backup.unlink(missing_ok=True)  # the store is unchanged: the copy is not needed
        raise
    return migration


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


def _compact(conn: sqlite3.Connection) -> None:
    """Give back the pages a migration freed (the old tables); skipped while another process reads the file."""
    try:
        conn.execute("VACUUM")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise


def refused_write(exc: sqlite3.DatabaseError, path: Path) -> StorageError | None:
    """The StorageError of a write the machine refused (SQLite's "database or disk is full" or an I/O error), with
    the free space of the store's folder; None for any other error (a corrupt file, a lock: the caller's)."""
    name, text = getattr(exc, "sqlite_errorname", "") or "", str(exc)
    full = name == "SQLITE_FULL" or "disk is full" in text
    if not (full or name.startswith("SQLITE_IOERR") or "disk I/O error" in text):
        return None
    folder = path.resolve().parent
    try:
        free_bytes = shutil.disk_usage(folder).free
    except OSError:
        free_bytes = None
    if full or (free_bytes is not None and free_bytes < 1 << 20):
        free = "" if free_bytes is None else f", {free_bytes / 1e6:.1f} MB free"
        reason = f"no space left on the device of {folder}{free}"
    else:
        reason = f"an I/O error (SQLite: {text})"
    return StorageError(f"cannot write results store {path}: {reason}; every row stored before is kept")


def _connect(path: Path) -> tuple[sqlite3.Connection, Migration | None]:
    """A connection that writes the store (created when missing, its folders too), checked first."""
    check_writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except OSError as exc:
        raise os_error(exc, path, "open", RESULTS_STORE) from None
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open results store {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        migration = _init_schema(conn, path)
        if migration is not None:
            _compact(conn)
        _enable_wal(conn, path)
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a power cut may lose the last rows, never corrupt
    except sqlite3.DatabaseError as exc:
        conn.close()
        if (refused := refused_write(exc, path)) is not None:
            raise refused from exc
        if "locked" in str(exc):
            raise StoreError(f"{path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s ({exc})") from exc
        raise StoreError(f"{path} is corrupt or not a usable results store (SQLite: {exc}); left unchanged") from exc
    except BaseException:
        conn.close()
        raise
    return conn, migration


def _snapshot(path: Path, checked: bool = False) -> tuple[sqlite3.Connection, Migration | None]:
    """An in-memory copy of the store at ``path`` (an empty store when there is none or it is empty), at the
    current schema. The file is never written: it is read in one consistent copy (SQLite's backup), and an older
    schema is migrated in memory only. ``checked``: the file was checked to be a store to read already (else it is
    checked as one a survey could write: a dry run says what the run would)."""
    if not checked:
        check_writable(path)
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        if path.exists() and path.stat().st_size > 0:
            source = sqlite3.connect(read_only_uri(path), uri=True)
            try:
                source.backup(memory)
            finally:
                source.close()
        return memory, _init_schema(memory, path, backup=False)
    except sqlite3.DatabaseError as exc:
        memory.close()
        raise StoreError(f"{path} is corrupt or not a usable results store (SQLite: {exc}); left unchanged") from exc
    except BaseException:
        memory.close()
        raise


# --- the store -------------------------------------------------------------------------------------------------


def _upsert_sql(table: str, kinds: dict, conflict: tuple) -> str:
    names = ", ".join(kinds)
    marks = ", ".join("?" * len(kinds))
    updates = ", ".join(f"{name} = excluded.{name}" for name in kinds if name not in conflict)
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"


class Store:
    """A results store file; ``Store(path)`` creates a missing one (and its parent folders). ``create=False``
    opens it read-only, for commands that only read: a missing or empty file is an error, not an empty store, and
    the file is never written (read into memory at once, an older schema migrated there). ``snapshot=True`` reads
    an in-memory copy and never writes the file (a dry run; a missing file reads as an empty store). Either way
    the paths are checked first (a folder, no permission: one line, nothing created). ``migration`` says what
    opening an older schema's store did (None when nothing was migrated)."""

    def __init__(self, path, create: bool = True, snapshot: bool = False):
        self.path = given_path(path, RESULTS_STORE)
        self.read_only = snapshot or not create
        if not create:
            check_readable(self.path)
            self._conn, self.migration = _snapshot(self.path, checked=True)
        else:
            self._conn, self.migration = _snapshot(self.path) if snapshot else _connect(self.path)

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
        if self.read_only:
            raise StoreError(f"results store {self.path} was opened read-only")
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
            raise refused_write(exc, self.path) or StoreError(f"results store {self.path}: {exc}") from exc

    def _query(self, sql: str, params=()) -> list[tuple]:
        try:
            return self._connection().execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path}: {exc}") from exc

    def add(self, row: dict) -> None:
        """Insert or replace one measurement (all its value columns), in its own transaction. The row names its key
        as ``key: CellKey`` or as the key columns."""
        values = encode_row(row)
        with self._transaction() as conn:
            conn.execute(_upsert_sql("measurements", COLUMN_KINDS, KEY_COLUMNS), values)

    def add_op_classes(self, key: CellKey, rows: list[dict]) -> None:
        """Replace the op-class rows of one key."""
        if not isinstance(key, CellKey):
            raise ValueError(f"an op-class key must be a CellKey, got {type(key).__name__}")
        key_values = encode_key(key)
        encoded, seen = [], set()
        for row in rows:
            check_names(row, OP_CLASS_VALUE_KINDS, ("op_class",), "op-class row")
            if row["op_class"] in seen:
                raise ValueError(f"op class {row['op_class']!r} given twice for key {key}")
            seen.add(row["op_class"])
            encoded.append(key_values + tuple(encode(n, k, row.get(n)) for n, k in OP_CLASS_VALUE_KINDS.items()))
        where = " AND ".join(f"{name} = ?" for name in KEY_COLUMNS)
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM op_classes WHERE {where}", key_values)
            conn.executemany(_upsert_sql("op_classes", OP_CLASS_KINDS, PRIMARY_KEYS["op_classes"]), encoded)

    def done_keys(self, retry_errors: bool = True) -> set[CellKey]:
        """Keys already measured: status ok or oom, and error rows too when ``retry_errors`` is False."""
        where = " WHERE status IN ('ok', 'oom')" if retry_errors else ""
        return {
            decode_key(values) for values in self._query(f"SELECT {', '.join(KEY_COLUMNS)} FROM measurements{where}")
        }

    # --- claims: cells a running survey measures, so that another run skips them ---

    def claim(
        self,
        keys: list[CellKey],
        owner: str,
        device: str,
        lease_s: float,
        retry_errors: bool = True,
    ) -> set[CellKey]:
        """Claim for ``owner`` (until ``lease_s`` from now) each of ``keys`` that no other owner holds a live claim on
        and that has no row yet (an ok or oom row; any row unless ``retry_errors``), checked in the same transaction:
        a cell another run stored after this one planned is not measured twice. Returns the keys the owner holds
        now. Expired claims (a run that died) are taken over."""
        now = time.time()
        sql = (
            f"INSERT INTO claims ({', '.join(CLAIM_KINDS)}) VALUES ({', '.join('?' * len(CLAIM_KINDS))}) "
            f"ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET owner = excluded.owner, owner_device = "
            "excluded.owner_device, expires_at = excluded.expires_at WHERE claims.owner = excluded.owner OR "
            "claims.expires_at < ?"
        )
        with self._transaction() as conn:
            done = self.done_keys(retry_errors)
            conn.execute("DELETE FROM claims WHERE expires_at < ?", (now,))
            conn.executemany(
                sql, [(*encode_key(key), owner, device, now + lease_s, now) for key in keys if key not in done]
            )
        return {key for key, holder in self.claims().items() if holder[0] == owner}

    def renew(self, owner: str, lease_s: float) -> None:
        """Extend every claim of ``owner`` to ``lease_s`` from now."""
        with self._transaction() as conn:
            conn.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (time.time() + lease_s, owner))

    def release(self, owner: str) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    def claims(self) -> dict[CellKey, tuple[str, str]]:
        """The live claims: cell -> (owner, device)."""
        rows = self._query(
            f"SELECT {', '.join(KEY_COLUMNS)}, owner, owner_device FROM claims WHERE expires_at >= ?", (time.time(),)
        )
        return {decode_key(values[:-2]): (values[-2], values[-1]) for values in rows}

    # --- published rows: others' measurements, with their provenance (``survey.published``) ---

    def add_published(self, records: list[dict]) -> None:
        """Insert published rows (every column of ``PUBLISHED_KINDS`` but the counts, which start NULL) in one
        transaction; a row whose (file, row) the store holds is left as it is."""
        names = list(PUBLISHED_KINDS)
        encoded = [tuple(encode(name, PUBLISHED_KINDS[name], record.get(name)) for name in names) for record in records]
        with self._transaction() as conn:
            conn.executemany(
                f"INSERT OR IGNORE INTO published ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", encoded
            )

    def published_sources(self) -> dict[str, str]:
        """The files whose rows the store holds: name -> SHA-256 of the content ingested."""
        return dict(self._query("SELECT DISTINCT source_file, source_sha256 FROM published"))

    def published_uncounted(self) -> list[tuple[str, int, str]]:
        """(model, resolution, precision) of the published rows not counted yet (or counted before schema 5 gave
        them a ``conv_class``), each once, in row order."""
        rows = self._query(
            "SELECT model, resolution, precision, MIN(source_file || ':' || source_row) FROM published "
            "WHERE count_status = '' OR (count_status = 'ok' AND conv_class = '') "
            "GROUP BY model, resolution, precision ORDER BY 4"
        )
        return [(model, resolution, precision) for model, resolution, precision, _ in rows]

    def set_published_counts(self, cells: list[tuple[str, int, str, dict]]) -> None:
        """Set the counts (``flops_per_sample``, ``other_flops_per_sample``, ``bytes_per_sample``, ``count_status``,
        ``reparam``, ``conv_class``) of every published row of each (model, resolution, precision, counts), in one
        transaction."""
        names = (
            "flops_per_sample",
            "other_flops_per_sample",
            "bytes_per_sample",
            "count_status",
            "reparam",
            "conv_class",
        )
        rows = [
            (*(encode(name, PUBLISHED_KINDS[name], counts.get(name)) for name in names), model, resolution, precision)
            for model, resolution, precision, counts in cells
        ]
        with self._transaction() as conn:
            conn.executemany(
                f"UPDATE published SET {', '.join(f'{name} = ?' for name in names)} WHERE model = ? AND "
                "resolution = ? AND precision = ?",
                rows,
            )

    def set_published_reparam(self, verdicts: list[tuple[str, int, str]]) -> None:
        """Set ``reparam`` of published rows: (source_file, source_row, verdict) each (a numpy row number is made
        an int: sqlite3 would bind it as bytes and match nothing)."""
        with self._transaction() as conn:
            conn.executemany(
                "UPDATE published SET reparam = ? WHERE source_file = ? AND source_row = ?",
                [(verdict, file, int(row)) for file, row, verdict in verdicts],
            )

    def published_frame(self) -> pd.DataFrame:
        """Every published row, ordered by file and row."""
        records = self._query(f"SELECT {', '.join(PUBLISHED_KINDS)} FROM published ORDER BY source_file, source_row")
        columns = list(zip(*records, strict=True)) if records else [()] * len(PUBLISHED_KINDS)
        series = [
            decode_column(name, kind, list(column))
            for (name, kind), column in zip(PUBLISHED_KINDS.items(), columns, strict=True)
        ]
        return pd.concat(series, axis=1)

    # --- model records: what rebuilds a model without its file ---

    def add_model_record(self, model: str, record: dict) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO models (model, record) VALUES (?, ?)",
                (encode("model", "str", model), encode("record", "dict", record)),
            )

    def model_records(self) -> dict[str, dict]:
        """Model id -> the record stored with its rows (NAS architectures)."""
        return {model: json.loads(record) for model, record in self._query("SELECT model, record FROM models")}

    def statuses(self) -> dict[CellKey, str]:
        """The status of every stored cell."""
        rows = self._query(f"SELECT {', '.join(KEY_COLUMNS)}, status FROM measurements")
        return {decode_key(values[:-1]): values[-1] for values in rows}

    def frame(self) -> pd.DataFrame:
        """All measurements, ordered by key: notes and environment decoded, bools as bools, missing ints <NA>, and
        the configuration's ``software`` label after the key columns."""
        return self.table_frame("measurements")

    def op_class_frame(self) -> pd.DataFrame:
        return self.table_frame("op_classes")

    def table_frame(self, table: str) -> pd.DataFrame:
        """Every row of ``table`` (one of ``schema.TABLES``), decoded as ``frame()`` decodes measurements."""
        kinds = TABLES[table]
        order = ", ".join(PRIMARY_KEYS[table])
        return build_frame(self._query(f"SELECT {', '.join(kinds)} FROM {table} ORDER BY {order}"), kinds)

    # --- raw records: what merging stores copies ---

    def records(self, table: str) -> list[tuple]:
        """Every row of ``table`` (one of ``ALL_TABLES``) as SQLite holds it (bools 0/1, JSON as text, a
        ``cudnn_benchmark_limit`` of None as ``NO_LIMIT``), in ``ALL_TABLES[table]`` column order, ordered by key."""
        kinds = _table_kinds(table)
        return self._query(f"SELECT {', '.join(kinds)} FROM {table} ORDER BY {', '.join(PRIMARY_KEYS[table])}")

    def insert_records(self, records: dict[str, list[tuple]]) -> None:
        """Insert rows as ``records`` reads them (table -> rows), every table in one transaction: a row whose key
        the store already holds is a StoreError and nothing is inserted."""
        statements = {}
        for table in records:
            kinds = _table_kinds(table)
            statements[table] = f"INSERT INTO {table} ({', '.join(kinds)}) VALUES ({', '.join('?' * len(kinds))})"
        with self._transaction() as conn:
            for table, rows in records.items():
                conn.executemany(statements[table], rows)


def _table_kinds(table: str) -> dict:
    if table not in ALL_TABLES:
        raise StoreError(f"unknown table {table!r}; choose from {list(ALL_TABLES)}")
    return ALL_TABLES[table]
