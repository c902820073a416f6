"""Architecture files (JSON lines written by ``utilscope nas sample``) as text: each line a JSON object naming its
search space, read without importing the spaces (which import torch), so that the command line checks a file while
parsing by the rule ``sampler.load_jsonl`` reads it with; the spaces validate the records after."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import ARCH_FILE, check_input_file, read_text


def read_lines(path: str | Path, space_name: str | None = None) -> list[tuple[int, dict]]:
    """Each record of the file with its line number (blank lines passed over); a file that cannot be read as text,
    a line that is not a JSON object with a ``space`` field, or one of another space than ``space_name`` (when
    given), is a UsageError naming the file and line."""
    records = []
    for number, line in enumerate(read_text(path, what=ARCH_FILE).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or "space" not in record:
            raise UsageError(f"{path}:{number}: an architecture must be a JSON object with a 'space' field")
        if space_name is not None and record["space"] != space_name:
            raise UsageError(f"{path}:{number}: architecture of space {record['space']!r}, expected {space_name!r}")
        records.append((number, record))
    return records


def record_of(records: Mapping[str, dict], path: str | Path, arch: str) -> dict:
    """The record ``arch`` of a file's ``records`` (id -> record); UsageError when the file has no such id."""
    if arch not in records:
        raise UsageError(f"no architecture with id {arch!r} in {path} ({len(records)} architectures)")
    return records[arch]


def check_architecture(path: str | Path, arch: str) -> None:
    """``archs.jsonl:ID`` as ``nas.source`` reads it, checked without the spaces: the file exists and is a file
    of architectures (``read_lines``), and has the id ``arch``."""
    check_input_file(path, ARCH_FILE)
    record_of({record["id"]: record for _, record in read_lines(path) if "id" in record}, path, arch)
