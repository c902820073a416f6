"""JSON data files (latency tables, predictor profiles, objective tables): read with one-line errors, write whole;
and the checks of an output path, made before the work whose result goes there (a bad path never costs a
measurement)."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Sequence
from pathlib import Path

from utilscope.errors import UsageError


def read_json(path: str | Path, what: str):
    """The parsed content of a JSON file (gzip-compressed when its name ends in .gz); UsageError naming ``what`` it
    should be when missing or not JSON."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no {what} at {path}")
    try:
        return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON ({exc.msg}); expected {what}") from None


def write_json(path: str | Path, data) -> Path:
    """Write ``data`` as JSON, atomically (``write_atomically``)."""
    return write_atomically(path, json.dumps(data, indent=1) + "\n")


def write_atomically(path: str | Path, content: str | bytes) -> Path:
    """Write a whole file so that a reader, or a write interrupted or racing it, never leaves it half written: into
    a file of this process's own beside it, then renamed over it. Missing folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    if isinstance(content, bytes):
        partial.write_bytes(content)
    else:
        partial.write_text(content)
    os.replace(partial, path)
    return path


def check_output_file(path: str | Path, what: str, suffixes: Sequence[str] = ()) -> Path:
    """``path`` as a file to write ``what`` to, checked and nothing created: one of ``suffixes`` (when given), not a
    folder, and in a folder that exists or can be created (missing folders are created when writing, as every
    output of utilscope does). UsageError naming ``what`` otherwise."""
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise UsageError(f"the {what} must be a {' or '.join(suffixes)} file, got {str(path)!r}")
    if path.is_dir():
        raise UsageError(f"the {what} {path} is a folder; give a file path")
    _check_folder(path.parent, what)
    return path


def check_output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder to write ``what`` into, checked and nothing created: a folder or nothing yet, under a
    writable folder. UsageError naming ``what`` otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"the {what} {path} exists and is not a folder")
    _check_folder(path, what)
    return path


def _check_folder(folder: Path, what: str) -> None:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"cannot write the {what} in {folder}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write the {what} in {folder}: {existing} is not writable")
