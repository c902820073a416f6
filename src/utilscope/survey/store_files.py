"""The file rules of a results store, checked before it is opened: a store to read is a readable SQLite file, not
empty; a store to write is a file (or nothing yet, in a folder that can be written) that SQLite can write with its
journal beside it; either, when it is a SQLite file, is marked as a utilscope store (``APPLICATION_ID``) or is an
empty database (``check_application``, read through ``read_only_uri``: nothing written or created beside it). The
stores of a merge are distinct files, none of them its output (``merge_paths``). Nothing heavy is imported (SQLite
is the standard library's): the command line checks a ``--db`` with ``check_store`` while it parses. What else the
file holds (a newer schema, damage) is the store's to check when it is opened (``survey.store``)."""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import (
    RESULTS_STORE,
    SQLITE_HEADER,
    check_input_file,
    check_output_file,
    given_path,
    os_error,
    path_stat,
)

APPLICATION_ID = int.from_bytes(b"UtSc", "big")  # 0x55745363: marks a SQLite file as a utilscope store


class StoreError(UsageError):
    """A results store that cannot be used: not a SQLite file, corrupt, another application's, or newer."""


def _header(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise os_error(exc, path, "read", RESULTS_STORE) from None


def check_readable(path: Path) -> None:
    """A store to read: a file that can be read, not empty, with SQLite's header."""
    check_input_file(path, RESULTS_STORE)
    header = _header(path)
    if not header:
        raise StoreError(f"{path} is not a utilscope store (an empty file); left unchanged")
    if header != SQLITE_HEADER:
        raise StoreError(f"{path} is not a SQLite database (or is corrupt): not a results store; left unchanged")


def check_writable(path: Path) -> None:
    """A store to write (created when missing): an existing one is a file, readable and writable, with SQLite's
    header unless empty (an empty file becomes a store), in a folder where SQLite can write its journal (the WAL)
    beside it; a new one's folder exists or can be created."""
    info = path_stat(path, RESULTS_STORE)
    if info is None:
        check_output_file(path, RESULTS_STORE)
        return
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{path} is a folder, expected a file (the {RESULTS_STORE}, e.g. results.sqlite)")
    if not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(f"cannot write {path}: permission denied (the {RESULTS_STORE})")
    header = _header(path)
    if header and header != SQLITE_HEADER:
        raise StoreError(f"{path} is not a SQLite database (or is corrupt): not a results store; left unchanged")
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"cannot write {path}: permission denied on the folder {folder}, where SQLite keeps the "
            f"store's journal (the {RESULTS_STORE})"
        )


@dataclass(frozen=True)
class FileState:
    """A SQLite file's marks (``PRAGMA application_id``, ``PRAGMA user_version``) and its tables."""

    application_id: int
    version: int
    tables: tuple[str, ...]

    @property
    def empty(self) -> bool:
        """A fresh database, unmarked and without tables: it becomes a store."""
        return self.application_id == 0 and not self.tables and self.version == 0


def read_state(conn: sqlite3.Connection) -> FileState:
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
    return FileState(application_id, version, tuple(name for (name,) in names))


def check_application(state: FileState, path: Path) -> None:
    """Raise a StoreError unless the file is marked as a utilscope store or is an empty database."""
    if state.empty or state.application_id == APPLICATION_ID:
        return
    tables = f"tables {list(state.tables)}" if state.tables else "no tables"
    raise StoreError(
        f"{path} is a SQLite database of another application (application_id {state.application_id:#x}, "
        f"{tables}), not a utilscope results store; it was left unchanged"
    )


def read_only_uri(path: Path) -> str:
    """SQLite's URI of the file, opened read-only and never written, nor anything created beside it: while its
    write-ahead log exists (a survey writing it), read through the log with SQLite's locks; else the file is the
    whole store and is read as immutable (no lock file, which a read-only folder could not hold)."""
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    return uri if Path(f"{path}-wal").exists() else f"{uri}&immutable=1"


def check_marks(path: Path) -> None:
    """A SQLite file that is another application's database is a StoreError (``check_application``), read
    read-only; a file SQLite cannot read is left to the store, which says so when it opens it."""
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
    except sqlite3.Error:
        return
    try:
        state = read_state(conn)
    except sqlite3.Error:
        return
    finally:
        conn.close()
    check_application(state, path)


def check_store(path, writable: bool) -> Path:
    """``path`` checked as a store to read (a SQLite file that can be read, not empty) or to write (created when
    missing: see ``Store``), and not another application's database (``check_marks``), before any work; UsageError
    (a StoreError for the file's content) otherwise."""
    path = given_path(path, RESULTS_STORE)
    (check_writable if writable else check_readable)(path)
    info = path_stat(path, RESULTS_STORE)
    if info is not None and info.st_size > 0:
        check_marks(path)
    return path


def merge_paths(inputs: Sequence, output) -> tuple[list[Path], Path]:
    """The paths of a merge's input stores and of its output, checked: each input a store to read, given once (two
    names of one file are one store), and the output a store to write that is none of them."""
    paths = [given_path(path, RESULTS_STORE) for path in inputs]
    out = given_path(output, f"merged {RESULTS_STORE}")
    if not paths:
        raise UsageError("give at least one store to merge")
    for number, path in enumerate(paths):
        if _same_file(path, out):
            raise UsageError(f"the output {out} is also an input: merge into another store (-o)")
        for earlier in paths[:number]:
            if _same_file(path, earlier):
                also = "" if str(path) == str(earlier) else f" (as {earlier})"
                raise UsageError(f"the store {path} is given twice{also}: merge each store once")
    for path in paths:
        check_store(path, writable=False)
    check_store(out, writable=True)
    return paths, out


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    a_stat, b_stat = path_stat(a, RESULTS_STORE), path_stat(b, RESULTS_STORE)
    return None not in (a_stat, b_stat) and (a_stat.st_dev, a_stat.st_ino) == (b_stat.st_dev, b_stat.st_ino)


__all__ = [
    "APPLICATION_ID",
    "FileState",
    "StoreError",
    "check_application",
    "check_marks",
    "check_readable",
    "check_store",
    "check_writable",
    "merge_paths",
    "read_only_uri",
    "read_state",
]
