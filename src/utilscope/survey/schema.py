"""What a results store holds, as data: the key of a cell, its value columns, how each kind of column is encoded.

A cell is one model at one resolution, batch size, precision and backend, measured in one *configuration*: the
device, memory layout, torch/cuDNN/driver versions, cuDNN settings and (on a CPU) torch's thread count, each a column
of its own. Two rows are of the same cell when every column of the key is equal: CPU rows measured with different
thread counts are different conditions; a GPU row's ``threads`` is always ``GPU_THREADS``, as host threads do not do
its math. ``CellKey`` is the one definition the planner, the worker, failure rows and the store use; the table
columns are derived from it and from ``ProfileRow`` (what a measurement produces), never listed twice.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import operator
from dataclasses import dataclass, field

import pandas as pd

from utilscope.hardware import with_threads
from utilscope.measure.environment import software_label
from utilscope.measure.settings import CudnnSettings
from utilscope.measure.sweep import ProfileRow
from utilscope.units import now_iso

SCHEMA_VERSION = 6
GPU_THREADS = 0  # a GPU cell's ``threads``: the host's thread count is not part of its conditions
NO_LIMIT = -1  # how the store keeps cudnn_benchmark_limit None (torch's default): key columns are never NULL
STATUSES = ("ok", "oom", "error: ...")


# Column kinds: str, int, float, bool (stored 0/1), list and dict (stored as JSON text); "limit": an optional int
# key (None kept as NO_LIMIT).
_ANNOTATION_KINDS = {
    "str": "str",
    "int": "int",
    "int | None": "int",
    "float | None": "float",
    "bool": "bool",
    "list[str]": "list",
    "dict": "dict",
}


@dataclass(frozen=True)
class Configuration:
    """Everything about how cells were measured that is not the cell itself."""

    device: str  # the device's name, e.g. "NVIDIA H200"
    memory_format: str  # channels_last | contiguous
    torch: str  # torch.__version__
    cudnn: str  # cuDNN's version number ("" without cuDNN)
    driver: str  # the GPU driver ("" on a CPU)
    cudnn_benchmark: bool
    cudnn_benchmark_limit: int | None = field(metadata={"kind": "limit"})
    cudnn_depthwise_heuristic: bool
    threads: int  # torch's intra-op thread count a CPU cell ran with; GPU_THREADS on a GPU

    @classmethod
    def from_environment(cls, env: dict) -> Configuration:
        """The configuration a row's recorded environment (``measure.environment``) describes."""
        cudnn = CudnnSettings.from_dict(env)
        versions = env["torch"], _text(env.get("cudnn")), _text(env.get("driver"))
        settings = cudnn.benchmark, cudnn.benchmark_limit, cudnn.depthwise_heuristic
        threads = env["threads"] if env["device_type"] == "cpu" else GPU_THREADS
        return cls(env["device_name"], env["memory_format"], *versions, *settings, threads)

    @property
    def device_label(self) -> str:
        """The device as plans and reports name it: a CPU's with its thread count ("AMD EPYC 9654 (16 threads)")."""
        return self.device if self.threads == GPU_THREADS else with_threads(self.device, self.threads)

    @property
    def cudnn_settings(self) -> CudnnSettings:
        return CudnnSettings(self.cudnn_benchmark, self.cudnn_benchmark_limit, self.cudnn_depthwise_heuristic)

    @property
    def software(self) -> str:
        """The label tables and reports show ("torch 2.11.0+cu130 · cuDNN 91900 · driver 580.159.04 · ..."); a CPU's
        without cuDNN (the library a CUDA build of torch carries, which a CPU cell never calls: "torch 2.14.1")."""
        on_gpu = self.threads == GPU_THREADS
        cudnn = self.cudnn if on_gpu else None
        return software_label(self.torch, cudnn or None, self.driver or None, self.cudnn_settings)


def _text(value) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class CellKey:
    """One cell of a survey grid in one configuration: a store holds at most one row per key."""

    model: str
    resolution: int
    batch: int
    precision: str
    backend: str
    config: Configuration

    def columns(self) -> dict:
        """The key as column name -> value (cell fields, then the configuration's)."""
        cell = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "config"}
        return {**cell, **dataclasses.asdict(self.config)}

    @classmethod
    def from_columns(cls, columns: dict) -> CellKey:
        config = Configuration(**{name: columns[name] for name in CONFIG_COLUMNS})
        return cls(*(columns[name] for name in CELL_COLUMNS), config)


def _kinds(cls, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Column kinds from a dataclass's field annotations."""
    kinds = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if "kind" in f.metadata:
            kinds[f.name] = f.metadata["kind"]
        elif f.type not in _ANNOTATION_KINDS:
            raise TypeError(f"{cls.__name__}.{f.name}: no column kind for annotation {f.type!r}")
        else:
            kinds[f.name] = _ANNOTATION_KINDS[f.type]
    return kinds


def _joined(*parts: dict[str, str]) -> dict[str, str]:
    """Column kinds of several parts of a table; a name in two parts is an error, not an overwrite."""
    joined: dict[str, str] = {}
    for part in parts:
        twice = sorted(set(joined) & set(part))
        if twice:
            raise TypeError(f"columns {twice} defined twice")
        joined.update(part)
    return joined


CELL_COLUMNS = tuple(_kinds(CellKey, skip=("config",)))
CONFIG_COLUMNS = tuple(_kinds(Configuration))
KEY_KINDS = _joined(_kinds(CellKey, skip=("config",)), _kinds(Configuration))
KEY_COLUMNS = tuple(KEY_KINDS)
VALUE_KINDS = _joined(
    {"family": "str", "flops_per_sample": "int", "params": "int"},
    _kinds(ProfileRow, skip=("batch",)),
    {"environment": "dict", "measured_at": "str", "wall_s": "float"},
)
VALUE_COLUMNS = tuple(VALUE_KINDS)
COLUMN_KINDS = _joined(KEY_KINDS, VALUE_KINDS)
OP_CLASS_VALUE_KINDS = {"op_class": "str", "flop_share": "float", "time_share": "float", "time_ms": "float"}
OP_CLASS_KINDS = _joined(KEY_KINDS, OP_CLASS_VALUE_KINDS)
TABLES = {"measurements": COLUMN_KINDS, "op_classes": OP_CLASS_KINDS}  # the tables a store exports
# The store's own bookkeeping: cells a running survey has claimed (until ``expires_at``, unix seconds, unless
# renewed), and the records that rebuild a model without the file it came from (a NAS architecture).
CLAIM_KINDS = _joined(KEY_KINDS, {"owner": "str", "owner_device": "str", "expires_at": "float"})
MODEL_KINDS = {"model": "str", "record": "dict"}
# Others' published measurements (``survey.published``: timm's benchmark tables), never mixed with ours: one row per
# row of a source file, with its provenance, the condition its file name and row say, the published figures, and
# what utilscope's counting engine says of the model at the row's resolution (NULL until counted).
PUBLISHED_KINDS = {
    "source_file": "str",
    "source_row": "int",  # the file's name and the row's number in it (1: the first data row)
    "source_sha256": "str",
    "repository": "str",
    "source_path": "str",
    "source_commit": "str",
    "gpu": "str",
    "gpu_label": "str",  # the spec table's key; the name the file gives the GPU
    "model": "str",
    "resolution": "int",
    "batch": "int",
    "precision": "str",
    "memory_format": "str",
    "backend": "str",
    "torch": "str",
    "cuda": "str",
    "reparam": "str",
    "samples_per_s": "float",
    "step_time_ms": "float",
    "params_m": "float",
    "gmacs": "float",
    "macts_m": "float",
    "flops_per_sample": "int",
    "other_flops_per_sample": "int",
    "bytes_per_sample": "int",
    "count_status": "str",
    "ingested_at": "str",
    "conv_class": "str",  # conv_class: counting.architecture.CONV_CLASSES, "" until counted
}
ALL_TABLES = {**TABLES, "claims": CLAIM_KINDS, "models": MODEL_KINDS, "published": PUBLISHED_KINDS}
PRIMARY_KEYS = {
    "measurements": KEY_COLUMNS,
    "op_classes": KEY_COLUMNS + ("op_class",),
    "claims": KEY_COLUMNS,
    "models": ("model",),
    "published": ("source_file", "source_row"),
}
TABLE_SINCE = {"measurements": 1, "op_classes": 1, "claims": 2, "models": 2, "published": 4}  # schema versions
DERIVED_COLUMNS = ("software",)  # computed from the key when a table is read; stored nowhere

SQL_TYPES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "REAL",
    "bool": "INTEGER",
    "list": "TEXT",
    "dict": "TEXT",
    "limit": "INTEGER",
}
NULLABLE_KINDS = ("int", "float")  # missing numbers are NULL; strings, bools and JSON have defaults instead
DEFAULTS = {"family": "", "peak_source": "", "bytes_model": "", "unstable": False, "cuda_graph": False}


def check_status(status) -> str:
    if not isinstance(status, str) or not (status in ("ok", "oom") or status.startswith("error:")):
        raise ValueError(f"status must be one of {list(STATUSES)}, got {status!r}")
    return status


def schema_sql() -> list[str]:
    """CREATE TABLE statements of the current schema."""
    statements = []
    for table, kinds in ALL_TABLES.items():
        columns = [f"{name} {SQL_TYPES[kind]}{'' if nullable(name) else ' NOT NULL'}" for name, kind in kinds.items()]
        columns.append(f"PRIMARY KEY ({', '.join(PRIMARY_KEYS[table])})")
        statements.append(f"CREATE TABLE IF NOT EXISTS {table} (\n  " + ",\n  ".join(columns) + "\n)")
    return statements


def nullable(name: str) -> bool:
    """Missing numbers of a row are NULL (a published row's too), but never in a key or the bookkeeping tables."""
    kind = COLUMN_KINDS.get(name, OP_CLASS_KINDS.get(name, PUBLISHED_KINDS.get(name)))
    return kind in NULLABLE_KINDS and name not in KEY_KINDS and name not in PRIMARY_KEYS["published"]


# --- encoding and decoding values -------------------------------------------------------------------------------


def _encode_value(kind: str, value):
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__} {value!r}")
        return str.__str__(value)  # a (str, Enum) member stores its value
    if kind in ("int", "limit"):
        return operator.index(value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"expected a number, got {type(value).__name__} {value!r}")
        return float(value)
    if kind == "bool":
        if isinstance(value, str) or value not in (0, 1):
            raise TypeError(f"expected a bool, got {type(value).__name__} {value!r}")
        return int(bool(value))
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return json.dumps(list(value), default=str)
    if not isinstance(value, dict):
        raise TypeError(f"expected a dict, got {type(value).__name__}")
    return json.dumps(value, default=str)


def encode(name: str, kind: str, value):
    """One value as SQLite stores it; ValueError naming the column when it does not fit."""
    if value is None:
        if kind == "limit":
            return NO_LIMIT
        if nullable(name):
            return None
        raise ValueError(f"column {name!r} may not be None")
    if kind == "limit" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"column {name!r}: expected None or an integer >= 0, got {value!r}")
    try:
        return _encode_value(kind, value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"column {name!r}: {exc}") from None


def check_names(row: dict, kinds: dict, required: tuple, what: str) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"a {what} must be a dict, got {type(row).__name__}")
    missing = [name for name in required if name not in row]
    unknown = sorted(name for name in row if name not in kinds)
    if missing or unknown:
        parts = [f"missing columns {missing}"] if missing else []
        parts += [f"unknown columns {unknown} (known: {list(kinds)})"] if unknown else []
        raise ValueError(f"bad {what}: " + "; ".join(parts))


def row_columns(row: dict) -> dict:
    """A measurement row (its key as ``key: CellKey`` or as key columns) as a dict of every column."""
    if "key" in row:
        key = row["key"]
        if not isinstance(key, CellKey):
            raise ValueError(f"a row's key must be a CellKey, got {type(key).__name__}")
        row = {**key.columns(), **{k: v for k, v in row.items() if k != "key"}}
    return row


def encode_row(row: dict) -> tuple:
    """A measurement row as SQL parameters in ``COLUMN_KINDS`` order; missing value columns take defaults."""
    row = row_columns(row)
    check_names(row, COLUMN_KINDS, KEY_COLUMNS + ("status",), "measurement row")
    check_status(row["status"])
    full = {**DEFAULTS, "notes": [], "environment": {}, "measured_at": now_iso(), **row}
    return tuple(encode(name, kind, full.get(name)) for name, kind in COLUMN_KINDS.items())


def encode_key(key: CellKey) -> tuple:
    return tuple(encode(name, KEY_KINDS[name], value) for name, value in key.columns().items())


def decode_key(values: tuple) -> CellKey:
    columns = dict(zip(KEY_COLUMNS, values, strict=True))
    for name, kind in KEY_KINDS.items():
        if kind == "bool":
            columns[name] = bool(columns[name])
        elif kind == "limit":
            columns[name] = None if columns[name] == NO_LIMIT else columns[name]
    return CellKey.from_columns(columns)


def decode_column(name: str, kind: str, values: list) -> pd.Series:
    if kind == "str":
        return pd.Series(values, dtype="str", name=name)
    if kind == "int":
        return pd.Series(values, dtype="int64" if name in KEY_KINDS else "Int64", name=name)
    if kind == "limit":
        return pd.Series([None if v == NO_LIMIT else v for v in values], dtype="Int64", name=name)
    if kind == "float":
        return pd.Series([float("nan") if v is None else v for v in values], dtype="float64", name=name)
    if kind == "bool":
        return pd.Series([bool(v) for v in values], dtype="bool", name=name)
    return pd.Series([json.loads(v) for v in values], dtype="object", name=name)


def build_frame(records: list[tuple], kinds: dict) -> pd.DataFrame:
    """A frame of SQL-encoded records: JSON decoded, bools as bools, nullable ints as ``Int64``, plus the derived
    ``software`` label after the key columns."""
    columns = list(zip(*records, strict=True)) if records else [()] * len(kinds)
    series = [decode_column(name, kind, list(col)) for (name, kind), col in zip(kinds.items(), columns, strict=True)]
    frame = pd.concat(series, axis=1)
    labels = [_label(values) for values in zip(*(columns[i] for i in range(len(KEY_COLUMNS))), strict=True)]
    frame.insert(len(KEY_COLUMNS), "software", pd.Series(labels, dtype="str", index=frame.index))
    return frame


def _label(key_values: tuple) -> str:
    return decode_key(key_values).config.software
