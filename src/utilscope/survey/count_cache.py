"""A published row's count cached: what ``published.count_row`` says of a model at a resolution and value size is a
pure function of them and of the code and model zoos that count it, so it is kept in utilscope's cache (kind
``counts``, a ``cache.ValueCache``), one file per utilscope, torch, torchvision and timm version and counting code,
and an ``ingest`` into a new store counts only what no earlier one counted. The reparameterized models
``infer_reparam`` counts are cached the same way (their FLOPs only).
"""

from __future__ import annotations

import contextlib
import functools
import importlib

from utilscope.cache import ValueCache, source_digest

COUNTING_CODE = ("counting", "models", "survey/published.py")  # what a count depends on, beside the versions


@functools.cache
def versions() -> str:
    """What a count depends on: utilscope's, torch's, torchvision's and timm's versions and the counting code
    (once per process)."""
    import torch

    from utilscope._version import __version__
    from utilscope.measure.environment import installed_version

    for name in ("torchvision", "timm"):  # imported, as counting imports them: their own __version__ is read
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    zoo = [installed_version(name) or "-" for name in ("torchvision", "timm")]
    return "|".join([__version__, torch.__version__, *zoo, source_digest(*COUNTING_CODE)])


def counts_cache() -> ValueCache:
    return ValueCache("counts", versions())


key_of = ValueCache.key


def cached(keys: list[str]) -> dict[str, dict]:
    """The cached values of those keys that have one."""
    return counts_cache().get(keys)


def keep(values: dict[str, dict]) -> None:
    """Cache each key's value."""
    counts_cache().put(values)
