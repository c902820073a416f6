"""A published row's count cached: what ``published.count_row`` says of a model at a resolution and value size is a
pure function of them and of the code and model zoos that count it, so it is kept in utilscope's cache
(``cache_dir("counts")``), one SQLite file per utilscope, torch, torchvision and timm version, and an ``ingest``
into a new store counts only what no earlier one counted. The reparameterized models ``infer_reparam`` counts are
cached the same way (their FLOPs only).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import sqlite3
from pathlib import Path

from utilscope.cache import cache_dir
from utilscope.files import write_atomically

SCHEMA = "CREATE TABLE IF NOT EXISTS counts (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def versions() -> str:
    """The code and zoos a count depends on: utilscope's, torch's, torchvision's and timm's versions."""
    import torch

    from utilscope._version import __version__
    from utilscope.measure.environment import installed_version

    for name in ("torchvision", "timm"):  # imported, as counting imports them: their own __version__ is read
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    zoo = [installed_version(name) or "-" for name in ("torchvision", "timm")]
    return "|".join([__version__, torch.__version__, *zoo])


def cache_file() -> Path:
    digest = hashlib.sha256(versions().encode()).hexdigest()[:16]
    return cache_dir("counts") / f"counts-{digest}.sqlite"


def _connect() -> sqlite3.Connection:
    path = cache_file()
    if not path.exists():
        write_atomically(path, b"")  # the folder, and an empty database file
    connection = sqlite3.connect(path, timeout=30)
    connection.execute(SCHEMA)
    return connection


def key_of(*parts) -> str:
    return json.dumps([str(part) for part in parts])


def cached(keys: list[str]) -> dict[str, dict]:
    """The cached values of those keys that have one."""
    if not keys or not cache_file().exists():
        return {}
    with _connect() as connection:
        found = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in connection.execute(f"SELECT key, value FROM counts WHERE key IN ({marks})", chunk):
                found[key] = json.loads(value)
    return found


def keep(values: dict[str, dict]) -> None:
    """Cache each key's value."""
    if not values:
        return
    with _connect() as connection:
        connection.executemany(
            "INSERT OR REPLACE INTO counts (key, value) VALUES (?, ?)",
            [(key, json.dumps(value)) for key, value in values.items()],
        )
