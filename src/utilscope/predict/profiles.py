"""The device profiles utilscope knows, and the one place they are found: the shipped ones (``profiles/*.json``)
and any a user names, each described by its own record (the GPU it was timed on, its precision, layout and
backend, how many configs it timed), never by its file name. Adding a profile, a new GPU or a new precision, is
adding a file.

Which profile predicts a GPU (``nearest``), among those that express the condition asked (``Profile.expresses``):
1. the GPU's own profile (the profile's recorded device is that spec-table row);
2. else a profile of a GPU of the same compute capability, the one whose memory bandwidth is nearest the target's
   (the H100 and the H200 share SMs and clocks and differ in memory);
3. else the profile that timed the most configs (its layer models are the best sampled), by name on a tie.
On a GPU without TF32 tensor cores (before Ampere) ``fp32`` and ``tf32`` run on the fp32 units, whatever PyTorch's
switches say: they are predicted from an ``fp32_strict`` profile where one is shipped (``stand_ins``).

Host profiles (``predict.host``: what eager PyTorch's calls cost the CPU of the machine that timed a GPU's
profiles) are shipped under ``profiles/hosts/``; ``host_of`` finds the one of a GPU's machine.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.precision import Precision
from utilscope.predict.conditions import FUSED_BACKENDS, condition_problem
from utilscope.predict.profile_format import REMEDY, read_profile
from utilscope.versions import torch_key

if TYPE_CHECKING:  # the registry's choice imports neither (the command line makes it while parsing)
    import pandas as pd

    from utilscope.predict.host import HostProfile

PROFILES_DIR = Path(__file__).parent / "profiles"
VALIDATION_FILE = PROFILES_DIR / "validation_gpus.csv"  # written by benchmarks/predict_errors.py
HOSTS_DIR = PROFILES_DIR / "hosts"


@dataclass(frozen=True)
class Profile:
    """One device profile as its record describes it."""

    path: Path
    device: str  # the GPU as CUDA named it when the profile was timed
    gpu: str | None  # its spec-table key (None: a GPU the table does not know)
    precision: str
    memory_format: str  # channels_last or contiguous
    backend: str
    configs: int  # configs timed
    cudnn_autotuned: bool = True  # timed with cudnn.benchmark on (as `profile` and `layers` run by default)

    @property
    def name(self) -> str:
        return display_name(self.path)

    def expresses(self, precision: str, backend: str, channels_last: bool) -> bool:
        """Whether it is the profile to select for ``precision`` on ``backend`` with that layout: it predicts the
        condition (``conditions.condition_problem``), and on the fused backends (``FUSED_BACKENDS``) it is the graph
        profile of the precision's unit timed channels_last (inductor's layout optimization runs a graph's convs
        channels_last and fuses autocast's casts into its kernels, whatever layout the input has)."""
        own = (self.precision, self.memory_format, self.backend)
        if condition_problem(*own, precision, backend, channels_last):
            return False
        unit_profile = self.precision == Precision(precision).unit.value and self.memory_format == "channels_last"
        return backend not in FUSED_BACKENDS or unit_profile


def display_name(path: str | Path) -> str:
    """A shipped profile by its file name (``shipped h200_fp16_graph.json``), a user's as given."""
    return f"shipped {Path(path).name}" if Path(path).parent == PROFILES_DIR else str(path)


def read(path: str | Path) -> Profile:
    """The registry's entry of the profile file at ``path`` (read once per content)."""
    resolved = Path(path)
    return _read(resolved, resolved.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read(path: Path, mtime_ns: int) -> Profile:
    data = read_profile(path)
    try:
        spec = hardware.detect(data["device"])
        return Profile(
            path,
            data["device"],
            spec.key if spec is not None else None,
            data["precision"],
            data.get("memory_format", "channels_last"),
            data["backend"],
            len(data["latency_ms"]),
            bool(data.get("cudnn", {}).get("cudnn_benchmark", True)),
        )
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{path} is a damaged device profile (no {exc}); {REMEDY}") from None


def shipped() -> list[Profile]:
    """Every shipped profile, by file name."""
    return [read(path) for path in sorted(PROFILES_DIR.glob("*.json"))]


def host_of(device: str) -> HostProfile | None:
    """The shipped host profile timed on the machine of the GPU ``device`` (as CUDA names it, as a device profile
    records it), else any shipped one (a prediction by transfer keeps the calibration's host anyway; the profile's
    line names the GPU it launched to); the last by file name of several; None when none was shipped."""
    hosts = [_host(path, path.stat().st_mtime_ns) for path in sorted(HOSTS_DIR.glob("*.json"))]
    mine = [host for host in hosts if host.device == device]
    return (mine or hosts or [None])[-1]


@functools.lru_cache(maxsize=16)
def _host(path: Path, mtime_ns: int) -> HostProfile:
    from utilscope.predict.host import load_host

    return load_host(path)


def stand_ins(precision: str, spec) -> list[str]:
    """The precisions whose profiles predict ``precision`` on the GPU ``spec`` (None: any GPU), best first: on a GPU
    without TF32 units an fp32 or tf32 request is fp32_strict's math, then its own."""
    runs_on = spec.unit_for(Precision(precision)) if spec is not None else None
    if Precision(precision).unit is Precision.TF32 and runs_on == Precision.FP32_STRICT.unit.value:
        return [Precision.FP32_STRICT.value, precision]
    if precision == Precision.TF32.value:  # TF32 convolutions as fp32's; its matmuls IEEE, slower than TF32's
        return [precision, Precision.FP32.value]
    return [precision]


def nearest(candidates: list[Profile], spec) -> Profile:
    """The profile that predicts the GPU ``spec`` (None: no one GPU, the best sampled), by the rule of the module's
    docstring."""
    if not candidates:
        raise ValueError("nearest needs a profile")
    if spec is not None:
        own = [p for p in candidates if p.gpu == spec.key]
        if own:
            return max(own, key=lambda p: p.configs)
        same = [p for p in candidates if p.gpu and capability(p.gpu) == spec.compute_capability]
        if same and spec.memory_bandwidth_gbs:
            return min(same, key=lambda p: (bandwidth_distance(p.gpu, spec), -p.configs, p.path.name))
    return min(candidates, key=lambda p: (-p.configs, p.path.name))


def capability(key: str) -> str | None:
    return hardware.get_spec(key).compute_capability


def bandwidth_distance(key: str, spec) -> float:
    own = hardware.get_spec(key).memory_bandwidth_gbs
    return abs(math.log(own / spec.memory_bandwidth_gbs)) if own else math.inf


def predicted_as(asked: str, entry: Profile) -> str:
    """The precision a request is predicted in from ``entry``: the asked one, or the profile's where it stands in
    (``stand_ins``): fp32_strict for fp32 or tf32 on a GPU without TF32 units, fp32 for tf32."""
    stands_in = entry.precision != asked and entry.precision in stand_ins(asked, None) + [Precision.FP32_STRICT.value]
    return entry.precision if stands_in and Precision(asked).unit is Precision.TF32 else asked


def describe_choice(entry: Profile, spec, asked: str) -> str:
    """One line: which profile predicts, of which GPU and condition, and why it was chosen for ``spec``."""
    gpu = hardware.get_spec(entry.gpu).name if entry.gpu else entry.device
    head = (
        f"profile: {entry.name} ({gpu}, {entry.precision}, {entry.memory_format}, {entry.backend}, "
        f"{entry.configs:,} configs, {'cuDNN autotuned' if entry.cudnn_autotuned else 'cuDNN heuristics'})"
    )
    if spec is None:
        why = "transferred to each GPU from the best-sampled profile of the condition"
    elif entry.gpu == spec.key:
        why = f"{spec.name}'s own"
    elif entry.gpu and capability(entry.gpu) == spec.compute_capability:
        why = f"transferred to the {spec.name}: same compute capability ({spec.compute_capability}), nearest memory"
    else:
        why = f"transferred to the {spec.name}: none of compute capability {spec.compute_capability}; the best sampled"
    stand_in = predicted_as(asked, entry)
    if stand_in == Precision.FP32_STRICT.value != asked:
        why += f"; {asked} runs on the fp32 units of a GPU without TF32 tensor cores: predicted as fp32_strict"
    elif stand_in != asked:
        why += f"; no {asked} profile: predicted as {stand_in} (TF32 convolutions alike; its matmuls IEEE fp32, slower)"
    elif spec is not None and Precision.FP32_STRICT.value in stand_ins(asked, spec)[:1]:
        why += (
            f"; {asked} runs on the fp32 units of a GPU without TF32 tensor cores, and no fp32_strict profile is on "
            f"{entry.memory_format} tensors: its TF32 times carried to the fp32 units by the peaks"
        )
    return f"{head}: {why}"


NOT_VALIDATED = "not validated on this GPU"
VALIDATION_COLUMNS = [
    "gpu",
    "precision",
    "memory_format",
    "backend",
    "source",
    "torch",
    "rows",
    "batches",
    "mape",
    "median_error",
]
# what each source of validation rows is, as the text beside a prediction names it; the first one a condition has
# is shown: the GPU's own measurements, then NVIDIA's tables, then timm's (the newest torch)
VALIDATION_SOURCES = {
    "measured": "cells (network, batch) measured on this GPU",
    "dle": "of NVIDIA's DeepLearningExamples rows",
    "timm": "published rows",
}


@functools.cache
def validation_errors() -> pd.DataFrame:
    """The predictor's error per GPU, precision, memory format, backend and source of validation rows (shipped
    data, ``benchmarks/predict_errors.py``; an empty frame when none is shipped): ``VALIDATION_COLUMNS``."""
    import pandas as pd

    if not VALIDATION_FILE.is_file():
        return pd.DataFrame(columns=VALIDATION_COLUMNS)
    return pd.read_csv(VALIDATION_FILE, dtype={"torch": str, "batches": str}, keep_default_na=False)


def validation_text(errors: pd.DataFrame, gpu: str, precision: str, memory_format: str, backend: str) -> str | None:
    """What the validation says of one GPU in a condition: the MAPE of the first source that has rows there
    (``VALIDATION_SOURCES``' order; of timm's tables the newest torch's), None when none has."""
    mine = errors[
        (errors["gpu"] == gpu)
        & (errors["precision"] == precision)
        & (errors["memory_format"] == memory_format)
        & (errors["backend"] == backend)
    ]
    for source, said in VALIDATION_SOURCES.items():
        rows = mine[mine["source"] == source]
        if rows.empty:
            continue
        if source == "timm":  # one row per torch of timm's tables
            row = rows.sort_values("torch", key=lambda c: c.map(torch_key)).iloc[-1]
            where = f"torch {row['torch']}"
        else:
            row = rows.iloc[0]
            where = f"batch {row['batches']}"
        return (
            f"validation MAPE {row['mape']:.1%} (median error {row['median_error']:+.1%}) over {int(row['rows'])} "
            f"{said}, {where}"
        )
    return None


def validation_of(prediction) -> str | None:
    """A prediction's validation (``validation_text`` of the shipped file in its GPU, precision, layout and
    backend); an amp prediction transferred to a GPU no table validates says so; None otherwise."""
    text = _shipped_validation_text(
        prediction.gpu_key, prediction.precision, prediction.memory_format, prediction.backend
    )
    if text is None and prediction.precision == "amp" and prediction.transferred_from:
        return NOT_VALIDATED
    return text


@functools.lru_cache(maxsize=1024)
def _shipped_validation_text(gpu: str, precision: str, memory_format: str, backend: str) -> str | None:
    """``validation_text`` of the shipped validation file, once per GPU and condition (an atlas report asks for
    each of 1,285 models on 35 GPUs)."""
    return validation_text(validation_errors(), gpu, precision, memory_format, backend)
