"""Where utilscope caches what it can compute again, and the ``utilscope cache`` verb's library: what each kind of
cache holds, its size, and clearing it.

The root is ``$UTILSCOPE_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/utilscope``, else ``~/.cache/utilscope``; each
kind lives in a folder of its own under it (``cache_dir(kind)``, the one place that says where):

``ceilings``  measured GEMM and copy ceilings, one JSON file per device (a CPU's with its thread count) and torch
              version (``utilscope ceilings --refresh`` re-measures one)
``predict``   the fitted predictor of each device profile, one pickle per profile content, scikit-learn and
              utilscope version (fitted again when missing)
``counts``    what ``ingest`` counted of a published row's model at a resolution and value size, one SQLite file
              per utilscope, torch, torchvision and timm version (counted again when missing)

Nothing else is written there, and clearing removes only these files: a root shared with other programs (an
``UTILSCOPE_CACHE_DIR`` pointing at a busy folder) keeps everything else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from utilscope.errors import UsageError

CACHE_ENV = "UTILSCOPE_CACHE_DIR"
KINDS = {  # kind -> (what it holds, the file pattern of its entries in its folder)
    "ceilings": ("measured GEMM and copy ceilings, one file per device and torch version", "*.json"),
    "predict": ("fitted predictors of device profiles, one file per profile and code version", "*.pkl"),
    "counts": (
        "published rows' model counts (ingest), one SQLite file per utilscope, torch and zoo version",
        "*.sqlite",
    ),
}
EARLIER = {"predict": ("ceilings/predict",)}  # where a kind lived before (cleared and counted with it)


def cache_root() -> Path:
    """``$UTILSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/utilscope``, else ``~/.cache/utilscope``."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "utilscope"


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


__all__ = ["CACHE_ENV", "KINDS", "CacheUsage", "cache_dir", "cache_root", "cache_usage", "check_kind", "clear_cache"]
