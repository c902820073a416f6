"""The ``nas`` model source: an architecture of a JSONL file written by ``utilscope nas sample``, as a zoo model.

Its spec is ``archs.jsonl:ID`` (the ``nas:`` prefix is optional); its id names the architecture by content,
``nas:<space>:<ID>`` (``ID`` is the hash of the record), whatever file or folder it was read from, so a results
store keyed by it moves with its records (``Store.model_records``). An id is known to a process once a spec naming
its file was parsed; its family is "NAS <space>". ``register`` adds the source to the model sources; the
``utilscope`` package's init has it called on the first lookup of the model sources (``models.sources.add_plugin``),
so every process that imports utilscope (the CLI, a survey worker, a Ray task, a notebook) resolves these specs,
installed or run with ``PYTHONPATH=src``.
"""

from __future__ import annotations

import functools
import re

from torch import nn

from utilscope.errors import UsageError
from utilscope.files import check_input_file
from utilscope.models.sources import SOURCES, ModelSource, register_source
from utilscope.models.zoo import ModelSpec
from utilscope.nas.arch_files import record_of
from utilscope.nas.sampler import ARCH_FILE, load_jsonl
from utilscope.nas.space import Arch
from utilscope.nas.spaces import get_space

_CANONICAL = re.compile(r"(?P<space>[A-Za-z0-9_]+):(?P<id>[0-9a-f]{16})")
_KNOWN: dict[str, tuple[Arch, str]] = {}  # canonical name -> (record, "path.jsonl:ID" it was read from)


@functools.cache
def _records(path: str, mtime_ns: int) -> dict[str, Arch]:
    return {arch["id"]: arch for arch in load_jsonl(path) if "id" in arch}


def read_record(path: str, arch: str) -> Arch:
    """The record ``arch`` of the JSONL file at ``path``; UsageError when the file or the id is missing."""
    return record_of(_records(path, check_input_file(path, ARCH_FILE).stat().st_mtime_ns), path, arch)


def canonical_name(record: Arch) -> str:
    """``<space>:<ID>``: the name of an architecture by content."""
    return f"{record['space']}:{record['id']}"


def _known(name: str) -> tuple[Arch, str]:
    if name not in _KNOWN:
        raise UsageError(
            f"architecture nas:{name} is not known here: give it as archs.jsonl:ID (the file it was sampled into)"
        )
    return _KNOWN[name]


def nas_record(spec: ModelSpec) -> Arch:
    """The architecture record behind a parsed ``nas`` spec."""
    return _known(spec.name)[0]


def _match(text: str) -> str | None:
    """``path.jsonl:ID`` -> its canonical name (the record read and remembered); a canonical name already known."""
    if ".jsonl:" in text:
        path, _, arch = text.rpartition(":")
        record = read_record(path, arch)
        name = canonical_name(record)
        _KNOWN.setdefault(name, (record, text))
        return name
    if _CANONICAL.fullmatch(text) and text in _KNOWN:
        return text
    return None


NAS = ModelSource(
    "nas",
    build=lambda name, resolution: _build(name),
    native_resolution=lambda name: get_space(_known(name)[0]["space"]).resolution(_known(name)[0]),
    exists=lambda name: name in _KNOWN,
    match=_match,
    family=lambda name: f"NAS {name.partition(':')[0]}",
    record=lambda name: _known(name)[0],
    portable=lambda name: _known(name)[1],
    hint="archs.jsonl:ID (an architecture of a file from `utilscope nas sample`)",
)


def register() -> ModelSource:
    """Add the ``nas`` source to the model sources, after the built-in ones; once per process (again: nothing)."""
    if NAS.name not in SOURCES:
        register_source(NAS)
    return SOURCES[NAS.name]


def _build(name: str) -> nn.Module:
    """The architecture's network (its record fixes the resolution)."""
    record = _known(name)[0]
    return get_space(record["space"]).build(record)
