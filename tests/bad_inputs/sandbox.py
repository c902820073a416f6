"""The files the bad-input cases name: built once, in one folder (the cases' working folder), each a placeholder
(``{empty}``, ``{store}``, ...) the cases' command lines use. Add a file here when a case needs one; never change
what an existing placeholder holds (other cases rely on it)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import textwrap
from pathlib import Path

FACTORY = """
import torch.nn as nn
RESOLUTION = 16


def make():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


def not_a_model():
    return 42


def raises():
    raise RuntimeError("the factory failed")
"""

TEXT_FILES = {  # placeholder -> (file name, content)
    "empty": ("empty.sqlite", b""),
    "empty_json": ("empty.json", b""),
    "empty_jsonl": ("empty.jsonl", b""),
    "empty_csv": ("empty.csv", b""),
    "empty_py": ("empty.py", b""),
    "text": ("text.txt", b"hello\n"),
    "bad_json": ("bad.json", b"{not json"),
    "list_json": ("list.json", b"[1, 2, 3]\n"),
    "bad_jsonl": ("bad.jsonl", b'{"id": "a"}\n{not json\n'),
    "binary": ("binary.bin", bytes(range(256)) * 16),
    "binary_json": ("binary.json", b"\xff\xfe\x00\x81" * 256),
    "binary_jsonl": ("binary.jsonl", b"\xff\xfe\x00\x81" * 256),
    "factory": ("models.py", FACTORY.encode()),
    "factory_exit": ("exits.py", b"import sys\nsys.exit(7)\n"),
    "factory_syntax": ("syntax.py", b"def make(:\n"),
    "factory_import": ("imports.py", b"import no_such_module_here\n"),
}


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('not a utilscope store')")
    conn.commit()
    conn.close()


def _store(path: Path) -> None:
    from test_store import make_row

    from utilscope.survey.store import Store

    with Store(path) as store:
        store.add(make_row())
        store.add(make_row(batch=32, latency_ms=2.0))


def build(root: Path) -> dict[str, str]:
    """Create the sandbox's files under ``root``; returns placeholder -> path (absolute)."""
    paths = {}
    for name, (file_name, content) in TEXT_FILES.items():
        (root / file_name).write_bytes(content)
        paths[name] = root / file_name
    paths["foreign"] = root / "foreign.sqlite"
    _foreign_sqlite(paths["foreign"])
    paths["store"] = root / "store.sqlite"
    _store(paths["store"])
    paths["folder"] = root / "folder"
    paths["folder"].mkdir()
    paths["missing"] = root / "missing.sqlite"  # never created
    paths["missing_dir"] = root / "no_such_folder"  # never created
    paths["unreadable"] = root / "unreadable.sqlite"
    _store(paths["unreadable"])
    paths["unreadable_json"] = root / "unreadable.json"
    paths["unreadable_json"].write_text(textwrap.dedent('{"a": 1}\n'))
    paths["rodir"] = root / "readonly"
    paths["rodir"].mkdir()
    for name in ("unreadable", "unreadable_json"):
        paths[name].chmod(0)
    paths["rodir"].chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    paths["sandbox"] = root
    return {name: str(path) for name, path in paths.items()}


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: its mode and, for a file, its size and content hash (or its mtime where it cannot
    be read)."""
    state = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISDIR(info.st_mode):
                state[relative] = (info.st_mode,)
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:
                digest = info.st_mtime_ns
            state[relative] = (info.st_mode, info.st_size, digest)
    return state
