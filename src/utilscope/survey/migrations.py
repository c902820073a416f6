"""Schema migrations of a results store, keyed on SQLite's ``user_version``: each converts a store in place, in one
transaction, after copying the file to a backup beside it.

v1 -> v2: v1 keyed a configuration by a prose ``software`` column ("torch 2.11.0+cu130 · cuDNN 91900 · driver
580.159.04 · cudnn.benchmark off"); v2 keys it by columns (``schema.Configuration``). The prose is parsed back
into versions and cuDNN settings, and must regenerate exactly, else the store is left unchanged. v1 op-class rows
of a non-default cuDNN setting were measured with full autotuning (a v1 bug: attribution ignored the survey's cuDNN
options), so they are keyed with the settings they were measured with. v1 named a NAS architecture by the path of
its JSONL file relative to where it was measured (``nas:data/h200/mbv3_archs.jsonl:ID``); v2 names it by content
(``nas:mbv3:ID``) and keeps its record in the store, so a store moves with its architectures.

v2 -> v3: v2 named a CPU by its model and torch's thread count ("AMD EPYC 9654 (16 threads)", as
``hardware.with_threads`` writes it); v3 keeps the count in a column of its own, ``threads`` (``GPU_THREADS`` on a
GPU's rows), so that the same CPU cells measured with the same thread count share keys whichever process measured
them. A device name that a row recorded as a CPU's (its environment's ``device_type``) but that names no thread count
cannot be converted: the store is left unchanged. A v1 store is converted to v3 in one step, its device names by
the same rule.

v3 -> v4 adds the table of published rows; v4 -> v5 adds its ``conv_class`` column (empty: counted again by
``ingest``, which fills it). Neither changes a row of ours, so neither copies a backup.

v5 -> v6: ``fp32`` became PyTorch's default math (TF32 in cuDNN convolutions) and ``fp32_strict`` the math without
TF32 that ``fp32`` measured before. A GPU's fp32 rows of an older schema were measured with TF32 forbidden, so they
become ``fp32_strict`` rows (a backup is copied first); a CPU's keep ``fp32``, the same math on a CPU. Every
migration ends with this step.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from utilscope.measure.settings import CudnnSettings
from utilscope.survey.schema import (
    GPU_THREADS,
    KEY_COLUMNS,
    OP_CLASS_VALUE_KINDS,
    SCHEMA_VERSION,
    VALUE_COLUMNS,
    CellKey,
    Configuration,
    encode_key,
    schema_sql,
)
from utilscope.survey.store_files import StoreError

V1_KEY_COLUMNS = ("model", "resolution", "batch", "precision", "backend", "device", "software")
V1_VALUE_COLUMNS = (
    "family",
    "flops_per_sample",
    "params",
    "status",
    "latency_ms",
    "samples_per_s",
    "achieved_tflops",
    "utilization",
    "utilization_vs_ceiling",
    "peak_tflops",
    "peak_source",
    "achieved_gbs",
    "bandwidth_utilization",
    "bytes_model",
    "nvml_util",
    "cv",
    "unstable",
    "iters_per_sample",
    "cuda_graph",
    "notes",
    "environment",
    "measured_at",
    "wall_s",
)
V1_MEMORY_FORMAT = "channels_last"  # every v1 survey and NAS measurement ran channels_last
_V1_SOFTWARE = re.compile(r"torch (?P<torch>\S+) · cuDNN (?P<cudnn>\S+) · driver (?P<driver>\S+)(?P<rest>.*)")
_CPU_NAME = re.compile(r"(?P<device>.+) \((?P<threads>[1-9][0-9]*) threads?\)")  # as hardware.with_threads wrote it
KEYED_TABLES = ("measurements", "op_classes", "claims")  # the tables a v2 store keys by a configuration


class MigrationError(StoreError):
    """A store that cannot be migrated; it was left unchanged."""


@dataclass(frozen=True)
class Migration:
    """What opening a store of an older schema did."""

    from_version: int
    to_version: int
    backup: Path | None  # None: migrated in memory only (a snapshot), no file was copied
    measurements: int  # rows converted
    op_classes: int  # op-class rows kept
    op_classes_rekeyed: int  # op-class rows keyed with the cuDNN settings they were measured with
    architectures: int = 0  # NAS architectures now named by content, their records kept in the store
    added_only: bool = False  # in place, only tables were added (no row changed): no backup is kept
    strict_fp32: int = 0  # a GPU's fp32 rows (and op-class rows) now fp32_strict (v5 -> v6)

    def describe(self) -> str:
        rows = f"{self.measurements} rows, {self.op_classes} op-class rows"
        kept = f"the schema-{self.from_version} file is kept as {self.backup}" if self.backup else "in memory only"
        if self.added_only:
            kept = (
                "no row changed" if self.from_version >= 5 else "published rows' table or columns added, no row changed"
            )
        if self.strict_fp32:
            kept += f"; {self.strict_fp32} GPU rows measured in fp32 without TF32 are fp32_strict now"
        return f"migrated from schema {self.from_version} to {self.to_version} ({rows}); {kept}"


def split_device(name: str, cpu: bool) -> tuple[str, int]:
    """A v1 or v2 device name -> (the device, its thread count): "AMD EPYC 9654 (16 threads)" -> ("AMD EPYC 9654",
    16); a GPU's name -> (the name, ``GPU_THREADS``). MigrationError for a CPU's (``cpu``: a row recorded it as a
    CPU) that names no thread count."""
    match = _CPU_NAME.fullmatch(name)
    if match is not None:
        return match["device"], int(match["threads"])
    if cpu:
        raise MigrationError(f'the CPU device name {name!r} names no thread count ("NAME (N threads)")')
    return name, GPU_THREADS


def device_threads(conn: sqlite3.Connection, tables: tuple[str, ...]) -> dict[str, tuple[str, int]]:
    """Every device name of ``tables`` -> (device, threads) (``split_device``); a name is a CPU's when a
    measurement recorded it so."""
    cpu = {
        name
        for name, env in conn.execute("SELECT device, environment FROM measurements")
        if json.loads(env).get("device_type") == "cpu"
    }
    names = {name for table in tables for (name,) in conn.execute(f"SELECT DISTINCT device FROM {table}")}
    return {name: split_device(name, name in cpu) for name in sorted(names)}


def v1_configuration(software: str, device: str, memory_format: str, threads: int) -> Configuration:
    """The configuration a v1 ``software`` string names (on ``device`` with ``threads``, ``split_device``'s);
    MigrationError when it is not one v1 wrote."""
    match = _V1_SOFTWARE.fullmatch(software)
    if match is None:
        raise MigrationError(f"unrecognized software {software!r}")
    rest = [part for part in match["rest"].split(" · ") if part]
    if rest == ["cudnn.benchmark off"]:
        cudnn = CudnnSettings(benchmark=False)
    else:
        limits = [int(p.rpartition(" ")[2]) for p in rest if re.fullmatch(r"cudnn\.benchmark_limit \d+", p)]
        cudnn = CudnnSettings(True, limits[0] if limits else None, "depthwise heuristic" in rest)
    versions = [("" if match[name] == "None" else match[name]) for name in ("torch", "cudnn", "driver")]
    config = Configuration(
        device, memory_format, *versions, cudnn.benchmark, cudnn.benchmark_limit, cudnn.depthwise_heuristic, threads
    )
    if v1_software(config.torch, config.cudnn, config.driver, cudnn) != software:  # a part the parse did not take
        raise MigrationError(f"unrecognized software {software!r}")
    return config


def v1_software(torch_version: str, cudnn_version: str, driver: str, cudnn: CudnnSettings) -> str:
    """The ``software`` string schema 1 wrote: every version named, "None" for one a CPU has none of."""
    text = f"torch {torch_version} · cuDNN {cudnn_version or None} · driver {driver or None}"
    return f"{text} · {cudnn.label()}" if cudnn.label() else text


def backup_path(path: Path, version: int) -> Path:
    """A file name beside ``path`` that does not exist yet."""
    candidate, n = path.with_name(f"{path.stem}.schema{version}-backup{path.suffix}"), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}.schema{version}-backup-{n}{path.suffix}")
    return candidate


def copy_store(path: Path, destination: Path) -> None:
    """A consistent copy through SQLite's backup API (the write-ahead log included)."""
    source, target = sqlite3.connect(path), sqlite3.connect(destination)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _v1_nas_models(conn: sqlite3.Connection) -> dict[str, str]:
    """v1 NAS model ids (``nas:<path>.jsonl:<ID>``, the file named relative to where it was measured) -> ids by
    content (``nas:<space>:<ID>``), the space read from the row's family ("NAS mbv3")."""
    renames = {}
    for model, family in conn.execute("SELECT DISTINCT model, family FROM measurements WHERE model LIKE 'nas:%'"):
        if not family.startswith("NAS "):
            raise MigrationError(f"the NAS model {model} has no search space in its family {family!r}")
        renames[model] = f"nas:{family.removeprefix('NAS ')}:{model.rpartition(':')[2]}"
    return renames


def _find_file(name: str, store: Path) -> Path:
    """A file a v1 NAS id names: relative to the working folder, or to the store's folder or one above it."""
    folder = store.resolve().parent
    for candidate in (Path(name), *(base / name for base in (folder, *folder.parents))):
        if candidate.is_file():
            return candidate
    raise MigrationError(
        f"the architectures file {name} its NAS rows name is not found (in the working folder or "
        "above the store): migrate it from the folder it was measured in"
    )


def _v1_nas_records(renames: dict[str, str], store: Path) -> dict[str, dict]:
    """The record of each renamed architecture, from the JSONL file (``utilscope nas sample``) its v1 id names."""
    files: dict[str, dict[str, dict]] = {}
    records = {}
    for old, new in renames.items():
        name, _, arch = old.removeprefix("nas:").rpartition(":")
        if name not in files:
            lines = _find_file(name, store).read_text().splitlines()
            files[name] = {doc["id"]: doc for doc in map(json.loads, filter(str.strip, lines)) if "id" in doc}
        if arch not in files[name]:
            raise MigrationError(f"{name} holds no architecture {arch}")
        records[new] = files[name][arch]
    return records


def _v1_measurements(
    conn: sqlite3.Connection,
    renames: dict[str, str],
    devices: dict[str, tuple[str, int]],
) -> tuple[list[tuple], dict[tuple, str]]:
    """Current rows of the v1 measurements, and each v1 key's memory format (for its op-class rows)."""
    rows, formats = [], {}
    env_at = V1_VALUE_COLUMNS.index("environment")
    for record in conn.execute(f"SELECT {', '.join(V1_KEY_COLUMNS + V1_VALUE_COLUMNS)} FROM measurements"):
        v1_key, values = record[: len(V1_KEY_COLUMNS)], record[len(V1_KEY_COLUMNS) :]
        memory_format = json.loads(values[env_at]).get("memory_format", V1_MEMORY_FORMAT)
        formats[v1_key] = memory_format
        key = _key_of_v1(v1_key, memory_format, renames, devices)
        by_name = dict(zip(V1_VALUE_COLUMNS, values, strict=True))
        rows.append(encode_key(key) + tuple(by_name[name] for name in VALUE_COLUMNS))
    return rows, formats


def _key_of_v1(
    v1_key: tuple,
    memory_format: str,
    renames: dict[str, str],
    devices: dict[str, tuple[str, int]],
    cudnn: CudnnSettings | None = None,
) -> CellKey:
    model, resolution, batch, precision, backend, device, software = v1_key
    model = renames.get(model, model)
    name, threads = devices[device]
    config = v1_configuration(software, name, memory_format, threads)
    if cudnn is not None:
        config = dataclasses.replace(config, **cudnn.to_dict())  # its keys are the configuration's columns
    return CellKey(model, resolution, batch, precision, backend, config)


def _v1_op_classes(
    conn: sqlite3.Connection, formats: dict[tuple, str], renames: dict[str, str], devices: dict[str, tuple[str, int]]
) -> tuple[list[tuple], int]:
    """Current op-class rows keyed with the settings they were measured with (full autotuning), those already keyed
    so first; and how many were re-keyed."""
    values = tuple(OP_CLASS_VALUE_KINDS)
    rows, rekeyed = [], []
    for record in conn.execute(f"SELECT {', '.join(V1_KEY_COLUMNS + values)} FROM op_classes"):
        v1_key, rest = record[: len(V1_KEY_COLUMNS)], record[len(V1_KEY_COLUMNS) :]
        stored = _key_of_v1(v1_key, formats.get(v1_key, V1_MEMORY_FORMAT), renames, devices)
        measured = _key_of_v1(v1_key, stored.config.memory_format, renames, devices, CudnnSettings())
        (rows if measured == stored else rekeyed).append(encode_key(measured) + rest)
    return rows + rekeyed, len(rekeyed)


def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _replace_tables(
    conn: sqlite3.Connection, measurements: list[tuple], op_classes: list[tuple], records: dict[str, dict]
) -> int:
    """The v1 tables replaced by current ones holding the converted rows; returns the op-class rows kept."""
    conn.execute("ALTER TABLE measurements RENAME TO measurements_v1")
    conn.execute("ALTER TABLE op_classes RENAME TO op_classes_v1")
    for statement in schema_sql():
        conn.execute(statement)
    conn.executemany(_insert_sql("measurements", KEY_COLUMNS + VALUE_COLUMNS), measurements)
    conn.executemany(_insert_sql("op_classes", KEY_COLUMNS + tuple(OP_CLASS_VALUE_KINDS)), op_classes)
    conn.executemany(_insert_sql("models", ("model", "record")), [(m, json.dumps(r)) for m, r in records.items()])
    if conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] != len(measurements):
        raise MigrationError("two v1 rows map to one key")  # cannot happen: the v1 key is part of the current key
    conn.execute("DROP TABLE measurements_v1")
    conn.execute("DROP TABLE op_classes_v1")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return conn.execute("SELECT COUNT(*) FROM op_classes").fetchone()[0]


def _gpu_fp32_rows(conn: sqlite3.Connection) -> int:
    """A store's GPU rows (and op-class rows) in ``fp32``, which schemas before 6 measured without TF32."""
    tables = [t for t in ("measurements", "op_classes") if _has_threads(conn, t)]
    return sum(_count(conn, f"{t} WHERE precision = 'fp32' AND threads = {GPU_THREADS}") for t in tables)


def _has_threads(conn: sqlite3.Connection, table: str) -> bool:
    return "threads" in {name for (_, name, *_) in conn.execute(f"PRAGMA table_info({table})")}


def _count(conn: sqlite3.Connection, table_where: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table_where}").fetchone()[0]


def _fp32_now_strict(conn: sqlite3.Connection) -> int:
    """The v5 -> v6 step on a store of the current tables: a GPU's fp32 rows become fp32_strict (a CPU's stay
    fp32); the rows changed."""
    changed = _gpu_fp32_rows(conn)
    for table in KEYED_TABLES:
        conn.execute(
            f"UPDATE {table} SET precision = 'fp32_strict' WHERE precision = 'fp32' AND threads = ?", (GPU_THREADS,)
        )
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return changed


def migrate_v1(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration:
    """Convert a v1 store to the current schema inside the caller's write transaction (the caller commits or
    rolls back), after a backup copy of ``path`` unless ``backup`` is False. MigrationError (the store unchanged)
    when a row cannot be converted."""
    try:
        renames = _v1_nas_models(conn)
        records = _v1_nas_records(renames, path)
        devices = device_threads(conn, ("measurements", "op_classes"))
        measurements, formats = _v1_measurements(conn, renames, devices)
        op_classes, rekeyed = _v1_op_classes(conn, formats, renames, devices)
    except (MigrationError, ValueError) as exc:
        raise MigrationError(f"cannot migrate {path} from schema 1: {exc}; it was left unchanged") from None
    copy, kept = _after_backup(path, 1, backup, lambda: _replace_tables(conn, measurements, op_classes, records))
    strict = _fp32_now_strict(conn)
    return Migration(1, SCHEMA_VERSION, copy, len(measurements), kept, rekeyed, len(records), strict_fp32=strict)


def _after_backup(path: Path, version: int, backup: bool, convert: Callable[[], object]) -> tuple[Path | None, object]:
    """``convert()`` after a backup copy of ``path`` (unless ``backup`` is False): the copy's path (None without
    one) and what ``convert`` returned. When it raises, the copy is removed (the caller rolls back)."""
    copy = backup_path(path, version) if backup else None
    if copy is not None:
        copy_store(path, copy)
    try:
        return copy, convert()
    except BaseException:
        if copy is not None:
            copy.unlink(missing_ok=True)  # the caller rolls back: the store stays as it was
        raise


def _split_devices(conn: sqlite3.Connection, devices: dict[str, tuple[str, int]]) -> dict[str, int]:
    """The v2 tables keyed by a configuration replaced by current ones, each row's device name split into its
    device and ``threads`` column; returns the rows of each."""
    converted = {}
    for table in KEYED_TABLES:
        columns = tuple(name for (_, name, *_) in conn.execute(f"PRAGMA table_info({table})"))
        at = columns.index("device")
        rows = [
            (*row[:at], devices[row[at]][0], *row[at + 1 :], devices[row[at]][1])
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table}")
        ]
        converted[table] = (columns + ("threads",), rows)
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_v2")
    for statement in schema_sql():
        conn.execute(statement)
    for table, (columns, rows) in converted.items():
        conn.executemany(_insert_sql(table, columns), rows)
        if conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] != len(rows):
            raise MigrationError("two v2 rows map to one key")  # cannot happen: (device, threads) names one v2 device
        conn.execute(f"DROP TABLE {table}_v2")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return {table: len(rows) for table, (_, rows) in converted.items()}


def migrate_v2(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration:
    """Convert a v2 store to the current schema (``migrate_v1``'s transaction and backup): each CPU device name's
    thread count moves to the ``threads`` column. MigrationError (the store unchanged) when a CPU's name names no
    thread count."""
    try:
        devices = device_threads(conn, KEYED_TABLES)
    except (MigrationError, ValueError) as exc:
        raise MigrationError(f"cannot migrate {path} from schema 2: {exc}; it was left unchanged") from None
    copy, rows = _after_backup(path, 2, backup, lambda: _split_devices(conn, devices))
    strict = _fp32_now_strict(conn)
    return Migration(2, SCHEMA_VERSION, copy, rows["measurements"], rows["op_classes"], 0, strict_fp32=strict)


def _added_then_strict(conn: sqlite3.Connection, path: Path, version: int, backup: bool, add) -> Migration:
    """A store of schema 3 to 5 to the current one inside the caller's transaction: ``add()`` adds tables or
    columns (no row changes), then ``_fp32_now_strict``; a backup is copied only when a GPU fp32 row changes
    (``backup`` False: a snapshot, in memory)."""
    changes = _gpu_fp32_rows(conn) > 0

    def convert() -> int:
        add()
        return _fp32_now_strict(conn)

    copy, strict = _after_backup(path, version, backup and changes, convert)
    counts = [_count(conn, table) for table in ("measurements", "op_classes")]
    return Migration(version, SCHEMA_VERSION, copy, *counts, 0, added_only=backup and not changes, strict_fp32=strict)


def migrate_v3(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration:
    """Convert a v3 store to the current schema (``_added_then_strict``): schema 4 adds the table of published
    rows and its ``conv_class`` column."""

    def add() -> None:
        for statement in schema_sql():
            conn.execute(statement)  # CREATE TABLE IF NOT EXISTS: only the tables v3 lacks

    return _added_then_strict(conn, path, 3, backup, add)


def migrate_v4(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration:
    """Convert a v4 store to the current schema (``_added_then_strict``): schema 5 adds the published rows'
    ``conv_class`` column (empty until ``ingest`` counts them again)."""
    add = lambda: conn.execute("ALTER TABLE published ADD COLUMN conv_class TEXT NOT NULL DEFAULT ''")  # noqa: E731
    return _added_then_strict(conn, path, 4, backup, add)


def migrate_v5(conn: sqlite3.Connection, path: Path, backup: bool = True) -> Migration:
    """Convert a v5 store to the current schema (``_added_then_strict``): only the fp32 rows of a GPU change."""
    return _added_then_strict(conn, path, 5, backup, lambda: None)


# schema N -> the conversion of a store of schema N to the current one
MIGRATIONS: dict[int, Callable[[sqlite3.Connection, Path, bool], Migration]] = {
    1: migrate_v1,
    2: migrate_v2,
    3: migrate_v3,
    4: migrate_v4,
    5: migrate_v5,
}


V1_SCHEMA = [
    "CREATE TABLE measurements (model TEXT NOT NULL, resolution INTEGER NOT NULL, batch INTEGER NOT NULL, "
    "precision TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL, software TEXT NOT NULL, family TEXT NOT "
    "NULL, flops_per_sample INTEGER, params INTEGER, status TEXT NOT NULL, latency_ms REAL, samples_per_s REAL, "
    "achieved_tflops REAL, utilization REAL, utilization_vs_ceiling REAL, peak_tflops REAL, peak_source TEXT NOT "
    "NULL, achieved_gbs REAL, bandwidth_utilization REAL, bytes_model TEXT NOT NULL, nvml_util REAL, cv REAL, "
    "unstable INTEGER NOT NULL, iters_per_sample INTEGER, cuda_graph INTEGER NOT NULL, notes TEXT NOT NULL, "
    "environment TEXT NOT NULL, measured_at TEXT NOT NULL, wall_s REAL, PRIMARY KEY (model, resolution, batch, "
    "precision, backend, device, software))",
    "CREATE TABLE op_classes (model TEXT NOT NULL, resolution INTEGER NOT NULL, batch INTEGER NOT NULL, precision "
    "TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL, software TEXT NOT NULL, op_class TEXT NOT NULL, "
    "flop_share REAL, time_share REAL, time_ms REAL, PRIMARY KEY (model, resolution, batch, precision, backend, "
    "device, software, op_class))",
]  # the v1 tables as utilscope wrote them (tests build v1 stores from this)

_V2_KEY = (
    "model TEXT NOT NULL, resolution INTEGER NOT NULL, batch INTEGER NOT NULL, precision TEXT NOT NULL, "
    "backend TEXT NOT NULL, device TEXT NOT NULL, memory_format TEXT NOT NULL, torch TEXT NOT NULL, cudnn TEXT "
    "NOT NULL, driver TEXT NOT NULL, cudnn_benchmark INTEGER NOT NULL, cudnn_benchmark_limit INTEGER NOT NULL, "
    "cudnn_depthwise_heuristic INTEGER NOT NULL"
)
_V2_PRIMARY = (
    "model, resolution, batch, precision, backend, device, memory_format, torch, cudnn, driver, "
    "cudnn_benchmark, cudnn_benchmark_limit, cudnn_depthwise_heuristic"
)
V2_SCHEMA = [
    f"CREATE TABLE measurements ({_V2_KEY}, family TEXT NOT NULL, flops_per_sample INTEGER, params INTEGER, status "
    "TEXT NOT NULL, latency_ms REAL, samples_per_s REAL, achieved_tflops REAL, utilization REAL, "
    "utilization_vs_ceiling REAL, peak_tflops REAL, peak_source TEXT NOT NULL, achieved_gbs REAL, "
    "bandwidth_utilization REAL, bytes_model TEXT NOT NULL, nvml_util REAL, cv REAL, unstable INTEGER NOT NULL, "
    "iters_per_sample INTEGER, cuda_graph INTEGER NOT NULL, notes TEXT NOT NULL, environment TEXT NOT NULL, "
    f"measured_at TEXT NOT NULL, wall_s REAL, PRIMARY KEY ({_V2_PRIMARY}))",
    f"CREATE TABLE op_classes ({_V2_KEY}, op_class TEXT NOT NULL, flop_share REAL, time_share REAL, time_ms REAL, "
    f"PRIMARY KEY ({_V2_PRIMARY}, op_class))",
    f"CREATE TABLE claims ({_V2_KEY}, owner TEXT NOT NULL, owner_device TEXT NOT NULL, expires_at REAL NOT NULL, "
    f"PRIMARY KEY ({_V2_PRIMARY}))",
    "CREATE TABLE models (model TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (model))",
]  # the v2 tables as utilscope wrote them (tests build v2 stores from this)
