"""Whole networks measured on a profiled GPU, and what a prediction takes from them (docs/predict.md, "Measured
networks: the measured ratio").

The shipped tables (``profiles/measured/GPU.csv``, one per GPU, written from the stores under ``data/`` by
``scripts/measured_networks.py``: adding a GPU's is adding a file) hold one row per measured cell: model,
resolution, batch, precision, memory format, backend, samples/s, the GPU (as CUDA named it, and its spec key), torch,
date and the store it came from.

A network measured in a prediction's condition (the same model, resolution, batch, precision, memory format and
backend; cuDNN as `profile` runs it) is predicted from that measurement: on the GPU that measured it, the
measurement itself; on another GPU, the prediction times the *measured ratio*, measured / predicted on the measuring
GPU from the same profile, which carries what the layer models miss in that network's composition. A ratio is
carried to GPUs of the measuring GPU's compute capability alone (the H100's and H200's to Hopper GPUs): across
Hopper it lowered the error both ways, to the Ampere, Ada and Blackwell GPUs of timm's tables it raised it. Of
several measuring GPUs the profile's own is taken first, then the one nearest the target in memory bandwidth. A ratio is
carried only from a cell the profile predicts device-bound on its GPU (an eager cell at the host's pace measured
that machine's host, not the network's kernels). Such a network is predicted from its layer models' own times, without
the profile's per-category network scales (``network_scales``): its measured ratio stands for them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from utilscope import hardware
from utilscope.predict import profiles

if TYPE_CHECKING:
    from utilscope.predict.predictor import Prediction

MEASURED_DIR = Path(__file__).parent / "profiles" / "measured"
# a ratio is carried to GPUs of another compute capability than the measuring GPU's (False: the shipped rule; True
# only to score that rule, ``scripts/measured_ratio_published.py --across-architectures``)
ACROSS_ARCHITECTURES = False
CELL = ("model", "resolution", "batch", "precision", "memory_format", "backend")  # a measured cell: one row a GPU
COLUMNS = (
    *CELL,
    "samples_per_s",
    "device",
    "gpu",
    "torch",
    "date",
    "source",
)


def table() -> pd.DataFrame:
    """Every shipped measured cell (an empty frame when none is shipped)."""
    return _table(MEASURED_DIR)


@functools.lru_cache(maxsize=4)
def _table(folder: Path) -> pd.DataFrame:
    files = sorted(folder.glob("*.csv"))
    frames = [pd.read_csv(path) for path in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))


def cells(model: str, batch: int, precision: str, memory_format: str, backend: str) -> pd.DataFrame:
    """The measured cells of a network in a condition, on every GPU that measured it, at any resolution."""
    rows = table()
    same = (
        (rows["model"] == model)
        & (rows["batch"] == batch)
        & (rows["precision"] == precision)
        & (rows["memory_format"] == memory_format)
        & (rows["backend"] == backend)
    )
    return rows[same]


def ordered(found: pd.DataFrame, target_key: str, profile_key: str) -> pd.DataFrame:
    """The cells that serve a target, in the order they are taken: its own GPU's, then of the GPUs of its compute
    capability (``profiles.capability``; a ratio carried to another architecture made timm's tables worse) the
    profile's GPU's, then by memory bandwidth nearest the target's (``profiles.bandwidth_distance``)."""
    target = hardware.find_spec(target_key)
    keys = found["gpu"].tolist()

    def serves(key: str) -> bool:
        same = target is not None and profiles.capability(key) == target.compute_capability
        return key == target_key or same or (ACROSS_ARCHITECTURES and target is not None)

    def rank(i: int) -> tuple:
        distance = profiles.bandwidth_distance(keys[i], target) if target is not None else math.inf
        return (keys[i] != target_key, keys[i] != profile_key, distance, keys[i])

    return found.iloc[sorted((i for i, key in enumerate(keys) if serves(key)), key=rank)]


def measured_on(cell: pd.Series) -> str:
    """Where a cell comes from, in words."""
    where = f"{cell['source']}, torch {cell['torch']}, {cell['date']}"
    return f"{cell['samples_per_s']:,.0f} samples/s measured on the {cell['device']} ({where})"


def corrected(prediction: Prediction, found: pd.DataFrame, on_gpu: dict[str, Prediction]) -> Prediction:
    """``prediction`` from the first usable cell of ``found`` (``ordered``): the measurement on its own GPU, else
    times the measured ratio over ``on_gpu[key]``, the same network's prediction on the measuring GPU; unchanged
    where no cell serves."""
    for _, cell in found[found["resolution"] == prediction.resolution].iterrows():
        if cell["gpu"] == prediction.gpu_key:
            return _scaled(prediction, cell["samples_per_s"] / prediction.samples_per_s, f"as {measured_on(cell)}")
        there = on_gpu.get(cell["gpu"])
        if there is None or there.bound == "host":
            continue
        ratio = cell["samples_per_s"] / there.samples_per_s
        return _scaled(prediction, ratio, f"x{ratio:.2f}, the measured ratio of {measured_on(cell)}")
    return prediction


def _scaled(prediction: Prediction, ratio: float, note: str) -> Prediction:
    """The prediction's throughput times ``ratio`` (its latency and utilization with it; its layers as predicted)."""
    return replace(
        prediction,
        samples_per_s=prediction.samples_per_s * ratio,
        latency_ms=prediction.latency_ms / ratio,
        utilization=prediction.utilization * ratio,
        measured_ratio=ratio,
        measured=note,
    )
