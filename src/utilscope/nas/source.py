"""The ``nas`` model source: an architecture of a JSONL file written by ``utilscope nas sample``, as a zoo model.

Its spec is ``archs.jsonl:ID`` (the ``nas:`` prefix is optional), its id ``nas:archs.jsonl:ID``, its family
"NAS <space>". ``utilscope.models.sources`` imports this module as a plug-in; importing it registers the source.
"""

from __future__ import annotations

import functools
from pathlib import Path

from torch import nn

from utilscope.errors import UsageError
from utilscope.models.sources import ModelSource, register_source
from utilscope.models.zoo import ModelSpec
from utilscope.nas.sampler import load_jsonl
from utilscope.nas.space import Arch
from utilscope.nas.spaces import get_space


@functools.cache
def _records(path: str, mtime_ns: int) -> dict[str, Arch]:
    return {arch["id"]: arch for arch in load_jsonl(path) if "id" in arch}


def _record(name: str) -> Arch:
    """The record of ``path.jsonl:ID``; UsageError when the file or the id is missing."""
    path, _, arch = name.rpartition(":")
    if not Path(path).is_file():
        raise UsageError(f"architecture file not found: {path}")
    records = _records(path, Path(path).stat().st_mtime_ns)
    if arch not in records:
        raise UsageError(f"no architecture with id {arch!r} in {path} ({len(records)} architectures)")
    return records[arch]


def nas_record(spec: ModelSpec) -> Arch:
    """The architecture record behind a ``nas`` spec (``path.jsonl:ID``)."""
    return _record(spec.name)


def _match(text: str) -> str | None:
    if ".jsonl:" not in text:
        return None
    _record(text)  # checks the file and the id
    return text


def _exists(name: str) -> bool:
    path, _, arch = name.rpartition(":")
    return Path(path).is_file() and arch in _records(path, Path(path).stat().st_mtime_ns)


def _native_resolution(name: str) -> int:
    record = _record(name)
    return get_space(record["space"]).resolution(record)


def _build(name: str, resolution: int) -> nn.Module:
    """The architecture's network (its record fixes the resolution)."""
    record = _record(name)
    return get_space(record["space"]).build(record)


NAS = register_source(
    ModelSource(
        "nas",
        build=_build,
        native_resolution=_native_resolution,
        exists=_exists,
        match=_match,
        family=lambda name: f"NAS {_record(name)['space']}",
    )
)
