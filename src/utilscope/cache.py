"""Where utilscope caches what it can compute again, and the ``utilscope cache`` verb's library: what each kind of
cache holds, its size, and clearing it.

The root is ``$UTILSCOPE_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/utilscope``, else ``~/.cache/utilscope``; each
kind lives in a folder of its own under it (``cache_dir(kind)``, the one place that says where):

``ceilings``  measured GEMM and copy ceilings, one JSON file per device (a CPU's with its thread count) and torch
              version (``utilscope ceilings --refresh`` re-measures one)
``predict``   the fitted predictor of each device profile, one pickle per profile content, scikit-learn and
              utilscope version (fitted again when missing)
``counts``    what ``ingest`` counted of a published row's model at a resolution and value size, one SQLite file
              per utilscope, torch, torchvision and timm version and counting code (counted again when missing)
``reports``   the predicted rows of a report's model view, per model, resolution and condition, one SQLite file per
              those versions, the predictor's code and its shipped profiles (predicted again when missing)

``networks`` the counted networks a prediction of many models reads (``predict.batched``), per model, batch,
              resolution and condition, one SQLite file per those versions and the counting and predictor code
              (counted again when missing)

The last three are ``ValueCache`` files: JSON values by key, one file per ``version`` text (the versions and a
digest of the code and data the values depend on, ``source_digest``), so that a new version starts a new file. A
kind may have a *seed*, shipped with utilscope (``write_seed``; ``scripts/seed_caches.py`` writes them): the values
of its shipped data (every published table's counts, the atlas's networks) and the version they were computed
under, read where the cache lacks a key and only while that version is the cache's (else computed, as without it).

Nothing else is written there, and clearing removes only these files: a root shared with other programs (an
``UTILSCOPE_CACHE_DIR`` pointing at a busy folder) keeps everything else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import lzma
import os
import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path

from utilscope.errors import UsageError, UtilscopeError
from utilscope.files import write_atomically

CACHE_ENV = "UTILSCOPE_CACHE_DIR"
KINDS = {  # kind -> (what it holds, the file pattern of its entries in its folder)
    "ceilings": ("measured GEMM and copy ceilings, one file per device and torch version", "*.json"),
    "predict": ("fitted predictors of device profiles, one file per profile and code version", "*.pkl"),
    "counts": (
        "published rows' model counts (ingest), one SQLite file per utilscope, torch and zoo version",
        "*.sqlite",
    ),
    "reports": ("predicted rows of reports' model views, one SQLite file per code and profile version", "*.sqlite"),
    "networks": ("counted networks of batched predictions, one SQLite file per versions and code", "*.sqlite"),
}
EARLIER = {"predict": ("ceilings/predict",)}  # where a kind lived before (cleared and counted with it)


def cache_root() -> Path:
    """``$UTILSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/utilscope``, else ``~/.cache/utilscope``."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "utilscope"


def keep(path: Path, content: str | bytes) -> bool:
    """Write a cache entry; a cache that cannot be written (a read-only folder, a file where the folder should be,
    a full disk) is said once per folder as a warning and the answer goes on uncached: False."""
    try:
        write_atomically(path, content, "cache entry")
        return True
    except (UtilscopeError, OSError) as exc:
        _not_kept(path.parent, str(exc))
        return False


_UNWRITABLE: set[Path] = set()  # the folders a warning has named


def _not_kept(folder: Path, why: str) -> None:
    """The one warning, once per folder, that a cache cannot be written there (the answers go on uncached)."""
    if folder not in _UNWRITABLE:
        _UNWRITABLE.add(folder)
        warnings.warn(f"the cache is not kept: {' '.join(why.split())}", stacklevel=3)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise UsageError(f"unknown cache kind {kind!r}; use one of: {', '.join(KINDS)}")
    return kind


def cache_dir(kind: str) -> Path:
    """The folder of one kind of cache (not created here: the writer creates it)."""
    return cache_root() / check_kind(kind)


def _files(kind: str) -> list[Path]:
    pattern = KINDS[kind][1]
    folders = [cache_dir(kind), *(cache_root() / earlier for earlier in EARLIER.get(kind, ()))]
    return sorted(path for folder in folders if folder.is_dir() for path in folder.glob(pattern) if path.is_file())


@dataclass(frozen=True)
class CacheUsage:
    """One kind of cache: its folder, what it holds, and its files and bytes now."""

    kind: str
    folder: Path
    description: str
    files: int
    bytes: int

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "folder": str(self.folder),
            "description": self.description,
            "files": self.files,
            "bytes": self.bytes,
        }


def cache_usage(kinds: tuple[str, ...] = ()) -> list[CacheUsage]:
    """What each kind of cache (all when ``kinds`` is empty) holds now; reads only."""
    usage = []
    for kind in kinds or tuple(KINDS):
        files = _files(check_kind(kind))
        usage.append(
            CacheUsage(kind, cache_dir(kind), KINDS[kind][0], len(files), sum(path.stat().st_size for path in files))
        )
    return usage


def clear_cache(kinds: tuple[str, ...] = ()) -> list[CacheUsage]:
    """Remove the files of each kind (all when ``kinds`` is empty), and their folders when that empties them;
    returns what was removed. Other files under the root are left alone."""
    removed = cache_usage(kinds)
    folders = set()
    for entry in removed:
        for path in _files(entry.kind):
            path.unlink(missing_ok=True)
        folders |= {entry.folder, *(cache_root() / earlier for earlier in EARLIER.get(entry.kind, ()))}
    for folder in sorted(folders, key=lambda path: -len(path.parts)):  # an earlier layout's subfolder first
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return removed


def source_digest(*parts: str) -> str:
    """A digest of utilscope's own files under ``parts`` (folders or files, relative to the package): code and
    shipped data a cached value depends on, so that an edit of any of them (a development install keeps its version
    number) starts a new cache file."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for part in parts:
        root = package / part
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in (f for f in files if f.is_file() and "__pycache__" not in f.parts):
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class ValueCache:
    """JSON values by key in a SQLite file of one kind's folder, one file per ``version`` text (whatever the values
    depend on). Reading a missing file finds nothing; writing creates it. ``seed``: a shipped seed file of the kind
    (``write_seed``), read for the keys the file lacks while its version is this one."""

    SCHEMA = "CREATE TABLE IF NOT EXISTS cached (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

    def __init__(self, kind: str, version: str, seed: Path | None = None):
        name = hashlib.sha256(version.encode()).hexdigest()[:16]
        self.path = cache_dir(kind) / f"{kind}-{name}.sqlite"
        self.version, self.seed = version, seed

    @staticmethod
    def key(*parts) -> str:
        return json.dumps([str(part) for part in parts])

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30)
        connection.execute(self.SCHEMA)
        return connection

    def get(self, keys: list[str]) -> dict:
        """The cached values of those keys that have one, in the cache's file or else in its seed."""
        found = {}
        if keys and self.path.exists():
            with contextlib.closing(self._connect()) as connection:
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = connection.execute(f"SELECT key, value FROM cached WHERE key IN ({marks})", chunk)
                    found.update((key, json.loads(value)) for key, value in rows)
        missing = [key for key in keys if key not in found]
        if missing and self.seed is not None:
            seeded = seed_values(self.seed, self.version)
            found.update((key, seeded[key]) for key in missing if key in seeded)
        return found

    def items(self) -> dict:
        """Every value of the cache's file (not its seed's), by key."""
        if not self.path.exists():
            return {}
        with contextlib.closing(self._connect()) as connection:
            return {key: json.loads(value) for key, value in connection.execute("SELECT key, value FROM cached")}

    def put(self, values: dict) -> None:
        """Cache each key's value (JSON-encodable); a cache that cannot be written warns once (``keep``'s rule)."""
        if not values:
            return
        try:
            with contextlib.closing(self._connect()) as connection, connection:
                connection.executemany(
                    "INSERT OR REPLACE INTO cached (key, value) VALUES (?, ?)",
                    [(key, json.dumps(value)) for key, value in values.items()],
                )
        except (OSError, sqlite3.Error) as exc:
            _not_kept(self.path.parent, f"cannot write {self.path}: {exc}")


SEED_FORMAT = "utilscope-cache-seed/1"


def write_seed(path: str | os.PathLike, version: str, values: dict) -> Path:
    """A seed file of a cache kind (``ValueCache``'s ``seed``): ``values`` by key and the ``version`` they were
    computed under, as xz-compressed JSON (repeated values, such as the same layer in many networks, compress to
    little)."""
    document = {"format": SEED_FORMAT, "version": version, "values": dict(sorted(values.items()))}
    content = lzma.compress(json.dumps(document, separators=(",", ":")).encode(), preset=9 | lzma.PRESET_EXTREME)
    return write_atomically(path, content, "cache seed")


def seed_values(path: Path, version: str) -> dict:
    """A seed file's values when it was computed under ``version``, else (or without the file) none."""
    path = Path(path)
    if not path.is_file():
        return {}
    seeded_version, values = _read_seed(path, path.stat().st_mtime_ns)
    return values if seeded_version == version else {}


@functools.lru_cache(maxsize=2)
def _read_seed(path: Path, mtime_ns: int) -> tuple[str, dict]:
    """A seed file's version and values (read once per content); a file of another format is a project error."""
    try:
        document = json.loads(lzma.decompress(path.read_bytes()))
    except (lzma.LZMAError, ValueError) as exc:
        raise UtilscopeError(f"{path} is not a cache seed: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != SEED_FORMAT:
        raise UtilscopeError(f"{path} is not a cache seed ({SEED_FORMAT})")
    return str(document["version"]), dict(document["values"])


__all__ = [
    "CACHE_ENV",
    "KINDS",
    "ValueCache",
    "seed_values",
    "source_digest",
    "write_seed",
    "CacheUsage",
    "cache_dir",
    "cache_root",
    "cache_usage",
    "check_kind",
    "clear_cache",
]
