"""GPU datasheet peaks: load and validate ``specs.toml``, detect the row for a CUDA device name.

The table is data (``specs.toml`` beside this module); this module only reads, validates and looks it up.
Peaks are dense (no sparsity). ``int8`` peaks are tera-ops/s; everything else is TFLOP/s. Each row also carries
what a model comparing GPUs needs beside the peaks: architecture, compute capability, boost clock, L2 cache,
shared memory per SM and board power, each with its source.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from utilscope.errors import UsageError
from utilscope.precision import UNITS, Precision

if TYPE_CHECKING:
    import pandas as pd

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PRECISIONS = tuple(p.value for p in UNITS)  # fp32, tf32, fp16, bf16, int8: the units a row gives peaks for
PEAK_FIELDS = {p: ("int8_tops" if p == "int8" else f"{p}_tflops") for p in PRECISIONS}
HARDWARE_FIELDS = ("boost_clock_mhz", "l2_cache_mb", "smem_per_sm_kb", "tdp_w")  # positive numbers
REQUIRED_FIELDS = (
    "name",
    "patterns",
    "examples",
    "sm_count",
    "memory_gb",
    "memory_bandwidth_gbs",
    "memory_technology",
    "memory_bus_bits",
    "source",
    "architecture",
    "compute_capability",
    *HARDWARE_FIELDS,
    "source_hardware",
)
OPTIONAL_FIELDS = ("notes", "aliases", "base_clock_mhz", "tdp_shared", *PEAK_FIELDS.values())
TOP_LEVEL_KEYS = {"schema_version", "non_matching_examples", "gpu"}
SCHEMA_VERSION = 3  # 2 added architecture, compute_capability, the HARDWARE_FIELDS and source_hardware; 3 added
# memory_technology, memory_bus_bits and base_clock_mhz (left out where the vendor publishes none)
MEMORY_TECHNOLOGIES = ("HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5", "GDDR5X", "GDDR6", "GDDR6X", "GDDR7")
# The compute capabilities of each architecture (NVIDIA's CUDA GPUs list): a row's pair must be one of these.
ARCHITECTURES = {
    "Kepler": ("3.0", "3.2", "3.5", "3.7"),
    "Maxwell": ("5.0", "5.2", "5.3"),
    "Pascal": ("6.0", "6.1", "6.2"),
    "Volta": ("7.0", "7.2"),
    "Turing": ("7.5",),
    "Ampere": ("8.0", "8.6", "8.7"),
    "Ada": ("8.9",),
    "Hopper": ("9.0",),
    "Blackwell": ("10.0", "10.3", "11.0", "12.0", "12.1"),
}
DATASHEET = "datasheet"
USER_PEAK = "user --peak"
_KEY_RE = re.compile(r"^[a-z0-9_]+$")


class SpecFileError(UsageError):
    """``specs.toml`` (or a user-supplied table) is malformed: bad TOML, missing fields, overlapping patterns."""


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU's datasheet figures. ``peaks_tflops`` maps precision -> dense peak (int8: tera-ops/s)."""

    key: str
    name: str
    patterns: tuple[str, ...]
    peaks_tflops: Mapping[str, float] = field(hash=False)
    examples: tuple[str, ...] = ()
    sm_count: int | None = None
    memory_gb: float | None = None
    memory_bandwidth_gbs: float | None = None
    source: str = ""
    notes: str = ""
    peak_source: str = DATASHEET
    aliases: tuple[str, ...] = ()  # short names other people's tables give the GPU (timm's "5090"), lowercase
    architecture: str = ""  # one of ARCHITECTURES
    compute_capability: str = ""  # "9.0"
    boost_clock_mhz: float | None = None
    l2_cache_mb: float | None = None
    smem_per_sm_kb: float | None = None  # the most shared memory an SM has (CUDA's per-compute-capability table)
    tdp_w: float | None = None
    source_hardware: str = ""  # where boost_clock_mhz, l2_cache_mb and tdp_w come from
    memory_technology: str = ""  # one of MEMORY_TECHNOLOGIES
    memory_bus_bits: int | None = None
    base_clock_mhz: float | None = None  # None: not published (source_hardware says so)
    tdp_shared: bool = False  # tdp_w is a module's, shared with a CPU (GH200)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "examples", tuple(self.examples))
        object.__setattr__(self, "aliases", tuple(alias.casefold() for alias in self.aliases))
        object.__setattr__(self, "peaks_tflops", MappingProxyType(dict(self.peaks_tflops)))

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions this device has a peak for, in canonical order."""
        return tuple(p for p in PRECISIONS if p in self.peaks_tflops)

    def unit_for(self, precision: str | Enum) -> str:
        """The math unit ``precision`` runs on here: a unit's name is that unit; a ``Precision`` its unit, where a
        precision that allows TF32 runs on the fp32 units of a GPU without TF32 tensor cores (before Ampere),
        whatever PyTorch's TF32 switches say (``Precision.unit_among``)."""
        if isinstance(precision, Precision):
            return precision.unit_among(self.peaks_tflops)
        return normalize_precision(precision)

    def peak_tflops(self, precision: str | Enum) -> float:
        """Dense peak for ``precision`` (fp32|tf32|fp16|bf16|int8, or a ``Precision``; ``unit_for``); int8 is in
        tera-ops/s."""
        prec = self.unit_for(precision)
        if prec not in self.peaks_tflops:
            have = ", ".join(self.precisions) or "none"
            raise UsageError(
                f"{self.name} has no {prec} peak (no such unit, or not in the table); "
                f"available: {have}. Pass --peak to supply one."
            )
        return self.peaks_tflops[prec]

    def matches(self, device_name: str) -> bool:
        """True when any of this row's patterns is found in ``device_name`` (case-insensitive)."""
        return any(re.search(p, device_name, re.IGNORECASE) for p in self.patterns)


def normalize_precision(precision: str | Enum) -> str:
    """The math unit of a precision: a unit's name is itself (``"FP16"`` -> ``"fp16"``, ``"fp32"``: the fp32 units);
    a ``Precision`` or another precision's name is its ``Precision.unit`` (``"amp"`` -> ``"fp16"``, ``"amp_bf16"`` ->
    ``"bf16"``, ``Precision.FP32`` -> ``"tf32"``: PyTorch's default fp32 runs convolutions in TF32); anything else
    raises a UsageError listing the choices."""
    if isinstance(precision, Precision):
        return precision.unit.value
    value = precision.value if isinstance(precision, Enum) else precision
    prec = str(value).strip().lower()
    if prec not in {p.value for p in Precision}:
        choices = ", ".join(p.value for p in Precision)
        raise UsageError(f"unknown precision {precision!r}; choose one of: {choices}")
    return prec if Precision(prec) in UNITS else Precision(prec).unit.value


def default_specs_path() -> Path:
    """The ``specs.toml`` shipped with the package."""
    return Path(str(resources.files("utilscope.hardware").joinpath("specs.toml")))


def load_specs(path: str | Path | None = None) -> list[DeviceSpec]:
    """Load and validate a specs table (the shipped one by default). Raises SpecFileError when malformed."""
    resolved = (Path(path) if path is not None else default_specs_path()).resolve()
    try:
        mtime_ns = resolved.stat().st_mtime_ns
    except FileNotFoundError as exc:
        raise SpecFileError(f"specs file not found: {resolved}") from exc
    return list(_load_cached(str(resolved), mtime_ns))


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> tuple[DeviceSpec, ...]:
    """Parse once per (path, modification time)."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SpecFileError(f"{path}: invalid TOML (a key declared twice is also this error): {exc}") from exc
    return tuple(_parse_table(data, path))


def _parse_table(data: dict[str, Any], path: str) -> list[DeviceSpec]:
    unknown = set(data) - TOP_LEVEL_KEYS
    if unknown:
        raise SpecFileError(f"{path}: unknown top-level keys {sorted(unknown)}; allowed: {sorted(TOP_LEVEL_KEYS)}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SpecFileError(
            f"{path}: schema_version must be {SCHEMA_VERSION} (every row has architecture, compute_capability, "
            f"{', '.join(HARDWARE_FIELDS)}, memory_technology, memory_bus_bits and source_hardware), got "
            f"{data.get('schema_version')!r}"
        )
    rows = data.get("gpu")
    if not isinstance(rows, dict) or not rows:
        raise SpecFileError(f"{path}: no [gpu.<key>] tables found")
    specs = [_parse_row(key, row, path) for key, row in rows.items()]
    _check_unique_names(specs, path)
    _check_patterns(specs, _string_list(data, "non_matching_examples", path, allow_empty=True), path)
    return specs


def _parse_row(key: str, row: Any, path: str) -> DeviceSpec:
    where = f"{path}: [gpu.{key}]"
    if not _KEY_RE.match(key):
        raise SpecFileError(f"{where}: key must be lowercase letters, digits and '_'")
    if not isinstance(row, dict):
        raise SpecFileError(f"{where}: must be a table")
    missing = [f for f in REQUIRED_FIELDS if f not in row]
    if missing:
        raise SpecFileError(f"{where}: missing required field(s) {missing}")
    unknown = set(row) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS)
    if unknown:
        raise SpecFileError(
            f"{where}: unknown field(s) {sorted(unknown)}; allowed: {REQUIRED_FIELDS + OPTIONAL_FIELDS}"
        )
    for text_field in ("name", "source", "notes", "architecture", "compute_capability", "source_hardware"):
        if text_field in row and (not isinstance(row[text_field], str) or not row[text_field].strip()):
            raise SpecFileError(f"{where}: {text_field} must be a non-empty string")
    peaks = {p: _positive(row, f, where) for p, f in PEAK_FIELDS.items() if f in row}
    if "fp32" not in peaks:
        raise SpecFileError(f"{where}: fp32_tflops is required (every GPU has FP32 units)")
    sm_count = _positive(row, "sm_count", where)
    if sm_count != int(sm_count):
        raise SpecFileError(f"{where}: sm_count must be an integer, got {sm_count}")
    _check_architecture(row["architecture"], row["compute_capability"], where)
    memory = _check_memory(row, where)
    clocks = _check_clocks(row, where)
    patterns = _string_list(row, "patterns", where)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SpecFileError(f"{where}: bad regular expression {pattern!r}: {exc}") from exc
    return DeviceSpec(
        key=key,
        name=row["name"],
        patterns=tuple(patterns),
        peaks_tflops=peaks,
        examples=tuple(_string_list(row, "examples", where)),
        sm_count=int(sm_count),
        memory_gb=_positive(row, "memory_gb", where),
        memory_bandwidth_gbs=_positive(row, "memory_bandwidth_gbs", where),
        source=row["source"],
        notes=row.get("notes", ""),
        aliases=tuple(_string_list(row, "aliases", where, allow_empty=True)),
        architecture=row["architecture"],
        compute_capability=row["compute_capability"],
        **{name: _positive(row, name, where) for name in HARDWARE_FIELDS if name != "boost_clock_mhz"},
        **clocks,
        **memory,
        tdp_shared=_flag(row, "tdp_shared", where),
        source_hardware=row["source_hardware"],
    )


def _check_memory(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The row's memory technology (one of MEMORY_TECHNOLOGIES) and bus width (a positive whole number of bits)."""
    if row["memory_technology"] not in MEMORY_TECHNOLOGIES:
        raise SpecFileError(
            f"{where}: memory_technology must be one of {', '.join(MEMORY_TECHNOLOGIES)}, "
            f"got {row['memory_technology']!r}"
        )
    bits = _positive(row, "memory_bus_bits", where)
    if bits != int(bits):
        raise SpecFileError(f"{where}: memory_bus_bits must be a whole number, got {bits}")
    return {"memory_technology": row["memory_technology"], "memory_bus_bits": int(bits)}


def _flag(row: dict[str, Any], name: str, where: str) -> bool:
    value = row.get(name, False)
    if not isinstance(value, bool):
        raise SpecFileError(f"{where}: {name} must be true or false, got {value!r}")
    return value


def _check_clocks(row: dict[str, Any], where: str) -> dict[str, float | None]:
    """The boost clock, and the base clock where given: positive, and not above the boost clock."""
    boost = _positive(row, "boost_clock_mhz", where)
    base = _positive(row, "base_clock_mhz", where) if "base_clock_mhz" in row else None
    if base is not None and base > boost:
        raise SpecFileError(f"{where}: base_clock_mhz ({base:g}) is above boost_clock_mhz ({boost:g})")
    return {"boost_clock_mhz": boost, "base_clock_mhz": base}


def _check_architecture(architecture: str, compute_capability: str, where: str) -> None:
    """The architecture is a known one and the compute capability one of its own."""
    if architecture not in ARCHITECTURES:
        raise SpecFileError(f"{where}: architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    if compute_capability not in ARCHITECTURES[architecture]:
        raise SpecFileError(
            f"{where}: compute_capability {compute_capability!r} is not a {architecture} one "
            f"({', '.join(ARCHITECTURES[architecture])})"
        )


def _positive(row: dict[str, Any], name: str, where: str) -> float:
    value = row[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecFileError(f"{where}: {name} must be a positive number, got {value!r}")
    return float(value)


def _string_list(row: dict[str, Any], name: str, where: str, allow_empty: bool = False) -> list[str]:
    value = row.get(name, [])
    ok = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    if not ok or (not value and not allow_empty):
        raise SpecFileError(f"{where}: {name} must be a non-empty list of non-empty strings")
    return value


def _check_unique_names(specs: list[DeviceSpec], path: str) -> None:
    """A name, key or alias names one row."""
    seen: dict[str, str] = {}
    for spec in specs:
        for folded in {spec.name.casefold(), spec.key, *spec.aliases}:
            if folded in seen:
                raise SpecFileError(
                    f"{path}: [gpu.{spec.key}] and [gpu.{seen[folded]}] have the same name or alias {folded!r}"
                )
            seen[folded] = spec.key


def _check_patterns(specs: list[DeviceSpec], non_matching: list[str], path: str) -> None:
    """Every example matches its own row only; identical patterns and non-matching examples are errors."""
    owners: dict[str, str] = {}
    for spec in specs:
        for pattern in spec.patterns:
            if pattern in owners:
                raise SpecFileError(
                    f"{path}: pattern {pattern!r} appears in [gpu.{owners[pattern]}] and [gpu.{spec.key}]"
                )
            owners[pattern] = spec.key
    for spec in specs:
        for example in spec.examples:
            hits = [s.key for s in specs if s.matches(example)]
            if hits != [spec.key]:
                raise SpecFileError(
                    f"{path}: example {example!r} of [gpu.{spec.key}] matches rows {hits}; "
                    "patterns must match their own row's examples and no other row's (overlapping patterns?)"
                )
    for example in non_matching:
        hits = [s.key for s in specs if s.matches(example)]
        if hits:
            raise SpecFileError(f"{path}: non_matching_examples entry {example!r} matches rows {hits}")


def gpu_matches(gpu: str, device_name: str) -> bool:
    """``h200``, ``H200`` and ``nvidia-h200`` match "NVIDIA H200": ``gpu``'s letters and digits equal the name's, the
    name's without its vendor word, or one of its words (so ``h20`` or ``a`` match nothing)."""

    def squash(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    words = ["".join(ch for ch in word if ch.isalnum()) for word in device_name.lower().split()]
    names = {squash(device_name), "".join(words[1:]), *words}
    return bool(squash(gpu)) and squash(gpu) in names


def detect(device_name: str, specs: list[DeviceSpec] | None = None) -> DeviceSpec | None:
    """The table row whose patterns match ``device_name`` (as torch.cuda.get_device_name reports it), or None.

    Raises SpecFileError if several rows match: the table's patterns overlap for this name.
    """
    rows = load_specs() if specs is None else specs
    hits = [spec for spec in rows if spec.matches(device_name)]
    if len(hits) > 1:
        keys = ", ".join(spec.key for spec in hits)
        raise SpecFileError(f"device name {device_name!r} matches several spec rows ({keys}); fix their patterns")
    return hits[0] if hits else None


def find_spec(name_or_key: str, specs: list[DeviceSpec] | None = None) -> DeviceSpec | None:
    """The row of a key (``h200_sxm``), display name (``NVIDIA H200 SXM``), alias (``5090``), CUDA device name, or
    short name that ``gpu_matches`` one row's name only (``h200``), or None."""
    rows = load_specs() if specs is None else specs
    wanted = name_or_key.strip().casefold()
    for spec in rows:
        if wanted in (spec.key.casefold(), spec.name.casefold(), *spec.aliases):
            return spec
    detected = detect(name_or_key, rows)
    if detected is not None:
        return detected
    short = [spec for spec in rows if gpu_matches(name_or_key, spec.name)]
    return short[0] if len(short) == 1 else None


def gpu_names(gpu: str) -> list[str]:
    """The GPU names of ``--gpu``: one, ``all``, or a comma-separated list (``l4,a100_sxm4_80gb``)."""
    return [name.strip() for name in gpu.split(",") if name.strip()]


def family_members(name: str, specs: list[DeviceSpec] | None = None) -> list[DeviceSpec]:
    """The rows a family name names: each of its words (split at ``_``, ``-`` and spaces) begins a word of the row's
    key (``a100`` names the four A100 rows, ``a100_80gb`` the two of 80 GB, ``h100`` every H100)."""
    rows = load_specs() if specs is None else specs
    words = [word for word in re.split(r"[_\s-]+", name.strip().casefold()) if word]
    return [spec for spec in rows if words and all(any(k.startswith(w) for k in spec.key.split("_")) for w in words)]


def lookup_gpu(name: str, precision: str | None = None, specs: list[DeviceSpec] | None = None) -> DeviceSpec | None:
    """The row a user's GPU name names (``find_spec``, else the one row of its family), or None for ``all``; a
    UsageError listing the family's keys when it names several, else the closest names (family and prefix matches
    before spelling guesses); with ``precision``, one naming the units the GPU has when it lacks the precision's
    (a T4 has no bf16)."""
    if name.strip().casefold() == "all":
        return None
    rows = load_specs() if specs is None else specs
    spec = find_spec(name, rows)
    family = [] if spec is not None else family_members(name, rows)
    if spec is None and len(family) == 1:
        spec = family[0]
    if spec is None and family:
        keys = ", ".join(member.key for member in family)
        raise UsageError(f"GPU {name!r} names {len(family)} GPUs of the spec table: {keys}; give one")
    if spec is None:
        raise UsageError(f"unknown GPU {name!r}{_closest(name, rows)}; `utilscope devices` lists the spec table")
    if precision is not None and spec.unit_for(Precision(precision)) not in spec.precisions:
        unit = spec.unit_for(Precision(precision))
        raise UsageError(f"{spec.name} has no {unit} unit for {precision}; it has: {', '.join(spec.precisions)}")
    return spec


def _closest(name: str, rows: list[DeviceSpec]) -> str:
    """The "; closest: ..." of an unknown GPU: the keys and aliases that begin with the name, then spelling
    guesses."""
    wanted = name.strip().casefold()
    names = [n for spec in rows for n in (spec.key, *spec.aliases)]
    prefix = [n for n in names if n.startswith(wanted)] if wanted else []
    guesses = difflib.get_close_matches(wanted, names, n=3, cutoff=0.5)
    close = list(dict.fromkeys(prefix + guesses))[:5]
    return f"; closest: {', '.join(close)}" if close else ""


@functools.lru_cache(maxsize=256)
def gpu_display_name(name_or_key: str) -> str:
    """The one name reports give a GPU, whatever a row calls it (its key ``h200_sxm``, CUDA's "NVIDIA H200", a
    table's "H200"): its spec row's display name ("NVIDIA H200 SXM"); the text itself for a GPU of no row."""
    found = find_spec(str(name_or_key))
    return found.name if found is not None else str(name_or_key)


def get_spec(name_or_key: str, specs: list[DeviceSpec] | None = None) -> DeviceSpec:
    """``find_spec``'s row; a UsageError listing the known keys when nothing matches."""
    rows = load_specs() if specs is None else specs
    found = find_spec(name_or_key, rows)
    if found is None:
        keys = ", ".join(spec.key for spec in rows)
        raise UsageError(f"unknown GPU {name_or_key!r}; known keys: {keys}. Pass --peak for other devices.")
    return found


def check_peak_tflops(tflops) -> float:
    """A user's peak (``--peak``): a positive, finite number of TFLOP/s; UsageError otherwise."""
    if isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or not math.isfinite(tflops) or tflops <= 0:
        raise UsageError(f"--peak must be a positive, finite number of TFLOP/s (TOPS for int8), got {tflops!r}")
    return float(tflops)


def specs_frame(specs: list[DeviceSpec] | None = None) -> pd.DataFrame:
    """The table as a DataFrame (one row per GPU; a missing unit is NaN) for ``utilscope devices``."""
    import pandas as pd  # here: a command line's parser looks GPUs up in this module

    rows = load_specs() if specs is None else specs
    records = []
    for spec in rows:
        record: dict[str, Any] = {
            "key": spec.key,
            "name": spec.name,
            "architecture": spec.architecture,
            "compute_capability": spec.compute_capability,
            "sm_count": spec.sm_count,
            "boost_clock_mhz": spec.boost_clock_mhz,
            "base_clock_mhz": spec.base_clock_mhz,
            "l2_cache_mb": spec.l2_cache_mb,
            "smem_per_sm_kb": spec.smem_per_sm_kb,
            "tdp_w": spec.tdp_w,
            "memory_gb": spec.memory_gb,
            "memory_bandwidth_gbs": spec.memory_bandwidth_gbs,
            "memory_technology": spec.memory_technology,
            "memory_bus_bits": spec.memory_bus_bits,
        }
        for prec, column in PEAK_FIELDS.items():
            record[column] = spec.peaks_tflops.get(prec, math.nan)
        record.update(aliases=list(spec.aliases), source=spec.source, source_hardware=spec.source_hardware)
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    return frame.astype({"sm_count": "Int64"}) if not frame.empty else frame
