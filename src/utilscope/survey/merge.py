"""Merging results stores: the rows of several stores (the shards of one grid, say) in one.

Each input is opened read-only (``Store(path, create=False)``: an older schema is migrated in memory, the file is
never written), and must be given once. The output, new or existing, gets one entry per key of the measurements,
the op classes (all op-class rows of a cell, as one entry) and the model records; never the claims, which belong to
a running survey. A key two stores hold with equal measured values is an identical duplicate; with different ones, a
``Conflict``: reported, and the output keeps the value it met first (``KEPT_RULE``). The measured values are every
column but a row's provenance (``PROVENANCE``): when it was measured, how long its cell took and the environment it
recorded (which GPU of the host, the Python and utilscope versions), so two runs that both found a cell out of
memory agree.

Identical duplicates whose environments recorded other software versions (``VERSION_KEYS`` that both recorded: the
timm, torchvision, Python, utilscope or CUDA version; torch's, cuDNN's and the driver's are part of the key) are
counted and the versions named (``TableCounts.versions``), but are not conflicts: the output's values are the same
whichever copy it keeps, and a zoo version that builds a model differently shows in its measured values
(``flops_per_sample``, ``params``, the timings), which makes a conflict. Only the kept copy's environment is in the
output, so the report says what the other copy recorded. Everything is written in one transaction: a merge that
fails leaves the output as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from utilscope.measure.environment import VERSION_KEYS
from utilscope.survey.migrations import Migration
from utilscope.survey.schema import ALL_TABLES, KEY_COLUMNS, PRIMARY_KEYS, decode_key
from utilscope.survey.store import Store
from utilscope.survey.store_files import merge_paths

MERGED_TABLES = ("measurements", "op_classes", "models", "published")
KEY_WIDTH = {
    "measurements": len(KEY_COLUMNS),
    "op_classes": len(KEY_COLUMNS),
    "models": 1,
    "published": len(PRIMARY_KEYS["published"]),
}  # leading key columns
# not compared: two copies of a measurement (or of a published row) may differ there
PROVENANCE = ("measured_at", "wall_s", "environment", "ingested_at")
KEPT_RULE = "the output keeps the row it held before the merge, else the first input's in the order given"


@dataclass
class TableCounts:
    """What one input brought to one table: entries added, identical to the output's, conflicting with it; and of
    the identical ones, how many recorded other software versions than the copy the output keeps, and which."""

    added: int = 0
    identical: int = 0
    conflicting: int = 0
    other_versions: int = 0  # identical entries recorded with other software versions
    versions: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # package -> {(this input's, kept's)}

    def count_identical(self, versions: dict[str, tuple[str, str]]) -> None:
        """One more identical entry, recorded with ``versions`` (``differing_versions``) other than the kept copy's."""
        self.identical += 1
        self.other_versions += bool(versions)
        for package, pair in versions.items():
            self.versions.setdefault(package, set()).add(pair)


@dataclass
class InputCounts:
    path: Path
    tables: dict[str, TableCounts] = field(default_factory=dict)  # per table of ``MERGED_TABLES``
    migration: Migration | None = None  # an older schema's input: migrated in memory only


@dataclass(frozen=True)
class Conflict:
    """A key two stores hold with different measured values."""

    table: str
    key: str  # the key, described ("resnet50 224px batch 8 fp16 graph on NVIDIA H200 (torch ...)")
    kept: Path  # the store whose value the output keeps (the output itself for a row it held before)
    left_out: Path  # the input whose different value was not taken
    columns: tuple[str, ...]  # the columns whose values differ


@dataclass
class MergeResult:
    output: Path
    held_before: dict[str, int]  # entries per table the output held before the merge
    inputs: list[InputCounts]
    conflicts: list[Conflict]
    migration: Migration | None = None  # an older schema's output: migrated in place, with a backup

    def held_after(self, table: str) -> int:
        return self.held_before[table] + sum(counts.tables[table].added for counts in self.inputs)


def merge_stores(inputs: Sequence, output) -> MergeResult:
    """Merge the stores ``inputs`` into ``output`` (created if missing). Usage errors (an output that is one of the
    inputs, an input given twice, a missing input, a file that is not a store, a path that cannot be read or
    written) are raised before the output is created or touched; the inputs are never written."""
    paths, out = merge_paths(inputs, output)
    with ExitStack() as stack:
        stores = [stack.enter_context(Store(path, create=False)) for path in paths]
        target = stack.enter_context(Store(out))
        counts = [InputCounts(path, migration=store.migration) for path, store in zip(paths, stores, strict=True)]
        result = MergeResult(out, {}, counts, [], target.migration)
        added = {table: _merge_table(table, target, stores, result) for table in MERGED_TABLES}
        target.insert_records(added)
    return result


def _merge_table(table: str, target: Store, stores: list[Store], result: MergeResult) -> list[tuple]:
    """The rows of ``table`` the output lacks, counted per input; conflicts appended to ``result``."""
    kept = {key: (target.path, rows) for key, rows in _entries(target, table).items()}
    result.held_before[table] = len(kept)
    new: list[tuple] = []
    for store, counts in zip(stores, result.inputs, strict=True):
        tally = counts.tables[table] = TableCounts()
        for key, rows in _entries(store, table).items():
            if key not in kept:
                kept[key] = (store.path, rows)
                new += rows
                tally.added += 1
                continue
            columns = differing_columns(table, kept[key][1], rows)
            if columns:
                tally.conflicting += 1
                result.conflicts.append(Conflict(table, describe_key(table, key), kept[key][0], store.path, columns))
            else:
                tally.count_identical(differing_versions(table, kept[key][1], rows))
    return new


def _entries(store: Store, table: str) -> dict[tuple, list[tuple]]:
    """The table's rows by key (``records`` order: an op-class entry's rows ordered by op class)."""
    width = KEY_WIDTH[table]
    entries: dict[tuple, list[tuple]] = {}
    for row in store.records(table):
        entries.setdefault(row[:width], []).append(row)
    return entries


def differing_columns(table: str, kept: list[tuple], other: list[tuple]) -> tuple[str, ...]:
    """The value columns (provenance left out) whose values differ between two entries of one key; () when the
    entries are identical. An op-class entry with other op classes differs in ``op_class``."""
    columns = list(ALL_TABLES[table].items())
    compared = [(i, name, kind) for i, (name, kind) in enumerate(columns) if i >= KEY_WIDTH[table]]
    compared = [(i, name, kind) for i, name, kind in compared if name not in PROVENANCE]
    differ = {compared[0][1]} if len(kept) != len(other) else set()
    for a, b in zip(kept, other, strict=False):
        differ |= {name for i, name, kind in compared if _comparable(kind, a[i]) != _comparable(kind, b[i])}
    return tuple(name for _, name, _ in compared if name in differ)


def differing_versions(table: str, kept: list[tuple], other: list[tuple]) -> dict[str, tuple[str, str]]:
    """The software versions (``VERSION_KEYS``) two entries of one key recorded differently: package -> (the other's,
    the kept one's); only those both environments recorded (a failure row records none), only for measurements."""
    if table != "measurements":
        return {}
    at = list(ALL_TABLES[table]).index("environment")
    mine, theirs = json.loads(other[0][at]), json.loads(kept[0][at])
    return {
        package: (_version(mine[package]), _version(theirs[package]))
        for package in VERSION_KEYS
        if package in mine and package in theirs and mine[package] != theirs[package]
    }


def _version(value) -> str:
    return "none" if value is None else str(value)


def _comparable(kind: str, value):
    return json.loads(value) if kind in ("list", "dict") and value is not None else value


def describe_key(table: str, key: tuple) -> str:
    if table == "models":
        return f"the model record of {key[0]}"
    if table == "published":
        return f"published row {key[1]} of {key[0]}"
    cell = decode_key(key)
    config = cell.config
    text = (
        f"{cell.model} {cell.resolution}px batch {cell.batch} {cell.precision} {cell.backend} on "
        f"{config.device_label} ({config.memory_format}; {config.software})"
    )
    return text if table == "measurements" else f"the op classes of {text}"
