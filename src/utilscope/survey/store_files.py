"""The file rules of a results store, checked before it is opened: a store to read is a readable SQLite file, not
empty; a store to write is a file (or nothing yet, in a folder that can be written) that SQLite can write with its
journal beside it. Nothing heavy is imported: the command line checks a ``--db`` with ``check_store`` while it
parses. What the file holds (another application's database, a newer schema) is the store's to check when it is
opened (``survey.store``)."""

from __future__ import annotations

import os
import stat
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


def check_store(path, writable: bool) -> Path:
    """``path`` checked as a store to read (a SQLite file that can be read, not empty) or to write (created when
    missing: see ``Store``), before any work; UsageError (a StoreError for the file's content) otherwise."""
    path = given_path(path, RESULTS_STORE)
    (check_writable if writable else check_readable)(path)
    return path


__all__ = ["StoreError", "check_readable", "check_store", "check_writable"]
