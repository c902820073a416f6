"""The one rule for every path utilscope reads or writes: checked before the work it is for starts (it exists, or
its folder can be created; it is a file, or a folder, as expected; it can be read, or written), and every file
parsed behind one error that names the file and what was expected. '' is never a path. The errors are
``UsageError``s of one line that say what is wrong plainly ("no such file: X (the latency table)", "cannot read X:
permission denied (...)", "X is a folder, expected a file (...)"), never an errno's text.

Also: JSON data files (latency tables, predictor profiles, objective tables) read, plain or gzip-compressed, and
written whole."""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from utilscope.errors import UsageError

SQLITE_HEADER = b"SQLite format 3\x00"
TEXT_START_BYTES = 1 << 16  # what ``check_text_start`` reads of a file
# What each kind of input file is, as its errors name it: the CLI checks them while parsing (``cli.values``), the
# library again when it reads them.
ARCH_FILE = "architecture file"
RESULTS_STORE = "results store"
LATENCY_TABLE = "latency table"
ANCHOR_FILE = "anchors CSV (columns model,batch,samples_per_s[,precision,backend,res,gpu])"
DEVICE_PROFILE_FILE = "device profile from `utilscope calibrate`"
HOST_FILE = "host profile from `utilscope calibrate --host`"
NAS_PROFILE_FILE = "predictor profile from `utilscope nas fit`"
MODEL_LIST = "list of models, one per line"  # survey --models-file
# What each output is, as its errors name it (checked while parsing too):
REPORT_FOLDER = "report folder"
EXPORT_FILE = "export"
EXPORT_SUFFIXES = (".csv", ".parquet")
ROOFLINE_PLOT = "roofline plot"
EXPORTED_MODEL = "rewritten model"  # advise --export
POOL_FOLDER = "pool folder (--work-dir)"  # nas search --work-dir
POOL_FILE = f"{ARCH_FILE} of --pool"  # nas search --pool (an input)
_REASONS = {
    errno.ENOENT: "no such file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EISDIR: "it is a folder",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EEXIST: "a part of the path is not a folder",  # creating a folder where a file is
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "a read-only file system",
    errno.ENAMETOOLONG: "the name is too long",
}


def os_error(exc: OSError, path: str | Path, action: str, what: str) -> UsageError:
    """The UsageError of an OSError met reading or writing ``path``: "cannot ACTION PATH: REASON (the WHAT)", the
    reason in plain words, not the errno's text."""
    reason = _REASONS.get(exc.errno) or (exc.strerror or type(exc).__name__).lower()
    return UsageError(f"cannot {action} {path}: {reason} (the {what})")


def given_path(path: str | Path | None, what: str) -> Path:
    """``path`` as a Path; '' (which would name the current folder) is a UsageError."""
    if path is None or not str(path).strip():
        raise UsageError(f"empty path given for the {what}")
    return Path(path)


def path_stat(path: Path, what: str) -> os.stat_result | None:
    """The path's stat (following links), None when nothing is there (its folder missing too); UsageError when a
    folder on the way cannot be searched."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise os_error(exc, path, "reach", what) from None


def check_input_file(path: str | Path, what: str) -> Path:
    """``path`` as a file to read ``what`` from: it exists, is not a folder and can be read."""
    path = given_path(path, what)
    info = path_stat(path, what)
    if info is None:
        raise UsageError(f"no such file: {path} (the {what})")
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is a folder, expected a file (the {what})")
    if not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {path}: permission denied (the {what})")
    return path


def read_bytes(path: str | Path, what: str) -> bytes:
    path = check_input_file(path, what)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise os_error(exc, path, "read", what) from None


def read_text(path: str | Path, what: str) -> str:
    """The text of a UTF-8 file (gzip-compressed when its name ends in .gz); UsageError naming the file and ``what``
    it should be when it is empty, a SQLite database or not text."""
    return decode_text(read_bytes(path, what), path, what)


def check_text_start(path: str | Path, what: str) -> None:
    """What ``read_text`` refuses that a file's first 64 KiB already show (empty, a SQLite database, binary), without
    reading the rest: for checking an input file while parsing. A gzip file is left to ``read_text``."""
    if Path(path).suffix == ".gz":
        return
    try:
        with open(path, "rb") as file:
            head = file.read(TEXT_START_BYTES + 1)
    except OSError as exc:
        raise os_error(exc, path, "read", what) from None
    if len(head) > TEXT_START_BYTES:  # cut at a line's end (or before a last character cut in two)
        head = head[: head.rfind(b"\n", 0, TEXT_START_BYTES) + 1] or head[: TEXT_START_BYTES - 3]
    decode_text(head, path, what)


def decode_text(data: bytes, path: str | Path, what: str) -> str:
    """``read_text``'s checks and decoding of a file's bytes already read."""
    if Path(path).suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            raise UsageError(f"{path} is not a gzip file, expected the {what}") from None
    if not data.strip():
        raise UsageError(f"{path} is empty, expected the {what}")
    if data.startswith(SQLITE_HEADER):
        raise UsageError(f"{path} is a SQLite database, expected the {what}")
    try:
        text = data.decode("utf-8-sig")  # without the byte-order mark a spreadsheet's "UTF-8 CSV" starts with
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a text file (binary at byte {exc.start}), expected the {what}") from None
    if "\x00" in text:
        raise UsageError(f"{path} is not a text file (binary at byte {data.index(0)}), expected the {what}")
    return text


def read_json(path: str | Path, what: str):
    """The parsed content of a JSON file (``read_text``); UsageError naming the file and ``what`` it should be."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON ({exc.msg}, line {exc.lineno}), expected the {what}") from None


def make_folder(path: str | Path, what: str) -> Path:
    """The folder ``path`` to write ``what`` into, created with its parents when missing; the UsageError of
    ``os_error`` when the file system refuses (a folder on a read-only or pseudo file system, a file in the way)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, path, "create", what) from None
    return path


def write_json(path: str | Path, data) -> Path:
    """Write ``data`` as JSON, atomically (``write_atomically``)."""
    return write_atomically(path, json.dumps(data, indent=1) + "\n")


def write_atomically(path: str | Path, content: str | bytes, what: str = "file") -> Path:
    """Write a whole file so that a reader, or a write interrupted or racing it, never leaves it half written: into
    a file of this process's own beside it, then renamed over it. Missing folders are created."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            partial.write_bytes(content)
        else:
            partial.write_text(content)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise os_error(exc, path, "write", what) from None
    return path


def check_output_file(path: str | Path, what: str, suffixes: Sequence[str] = ()) -> Path:
    """``path`` as a file to write ``what`` to, checked and nothing created: one of ``suffixes`` (when given), not a
    folder, writable when it exists, and in a folder that exists or can be created (missing folders are created
    when writing, as every output of utilscope does). UsageError naming ``what`` otherwise."""
    path = given_path(path, what)
    if suffixes and path.suffix.lower() not in suffixes:
        raise UsageError(f"the {what} must be a {' or '.join(suffixes)} file, got {str(path)!r}")
    info = path_stat(path, what)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is a folder; give a file path (the {what})")
    if info is not None and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied (the {what})")
    _check_folder(path.parent, path, what)
    return path


def check_output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder to write ``what`` into, checked and nothing created: a writable folder, or nothing yet
    under a writable folder. UsageError naming ``what`` otherwise."""
    path = given_path(path, what)
    info = path_stat(path, what)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"the {what} {path} exists and is not a folder")
    _check_folder(path, path, what)
    return path


def _check_folder(folder: Path, target: Path, what: str) -> None:
    """``folder`` (where ``target`` goes) exists and can be written into, or can be created: its nearest existing
    folder is writable."""
    existing = folder
    while path_stat(existing, what) is None and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"cannot write {target}: {existing} is not a folder (the {what})")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == target else f" on the folder {existing}"
        raise UsageError(f"cannot write {target}: permission denied{where} (the {what})")


def is_folder(text: str) -> bool:
    """Whether ``text`` names a folder (one that cannot be reached, or a name the file system cannot take, is not)."""
    try:
        return Path(text).is_dir()
    except OSError:
        return False
