"""Transfer: a network's per-op times predicted on the calibrated GPU, carried to another GPU by its datasheet.

The layer models give each op's time on the GPU the device profile was timed on (the *source*, the H200). An op's
time on a *target* GPU is the largest of three bounds, each from the target's datasheet figures (spec table):

- ``sm``: the source's time scaled by the ratio of SM throughput, SMs x sustained clock (source / target: the clock
  each sustains under its board power, ``predict.sustained``), and by the
  ratio of the op's wave efficiency on the two SM counts (tiles of a GEMM or conv spread over the SMs). What the
  source's time holds beyond its tensor and memory rooflines (instruction issue, shared-memory traffic, address
  arithmetic, epilogues, small tiles, CUDA-core work such as depthwise convs) is work every SM does per clock: it
  scales with the SMs and their clock, not with the tensor cores' peak or the memory's bandwidth.
- ``tensor``: a conv's or GEMM's FLOPs at ``TENSOR_EFFICIENCY`` of the target's dense peak for the precision's math
  unit at its sustained clock, times the op's wave efficiency on the target: the tensor cores at their best. Where
  the precision runs on the fp32 units (``fp32_strict``; any fp32 before Ampere) the bound is named ``fp32``.
- ``memory``: the op's bytes at the target's streamed bandwidth (``Gpu.streamed_bytes_per_s``: its memory
  technology's share of the datasheet bandwidth, held down with the SM clock on a board whose power holds it below
  its boost clock). (What keeps a memory-bound op below that on the source, the H200's HBM needing more bytes in
  flight per SM than an SM keeps, is in ``sm``.)

A memory-bound op (``group`` memory) carried to a GPU that streams faster than the source: its source time held its
bytes at the source's streamed bandwidth as well as its per-SM work, and only the first gets faster. So that part
(at most all of the source time) shrinks by the ratio of the two streamed bandwidths before the ``sm`` bound scales
the time (``faster_memory_ms``). Without it a source of slower memory carried nothing of a faster memory's gain:
from the H100's profile, the H200's elementwise kernels came out as slow as the H100's (adds 40% too slow; the
H100/H200 cross-check in docs/predict.md, validation). To a GPU that streams slower, nothing changes.

A conv of a profile timed NCHW carries its layout's cost on the source apart (``Predictor.layout_overhead_ms``: its
time above the same conv's channels_last time): the bounds are those of the rest, and the overhead, per-SM work
(layout transforms through shared memory), is added scaled as the ``sm`` bound is (``sm_scaled_ms``).

The bound that sets the time is the op's ``bound`` on the target (``launch`` when its time is the launch floor).
Nothing here is fitted on any GPU's measurements (docs/predict.md says which design choices the validation tables
informed); ``anchors`` fits a target's clock and memory efficiency to a user's own measurements of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope.predict.features import FLOOR_MS, Gpu

TENSOR_EFFICIENCY = 0.85  # the share of the dense tensor peak a large, aligned conv or GEMM reaches at full waves
MEMORY_EFFICIENCY = 0.85  # the share of the H200's bandwidth a fused kernel's reads and writes reach (``fused``)
BOUNDS = ("sm", "tensor", "memory")
COMPUTE_GROUPS = ("conv", "matmul")


def wave_efficiency(tiles: np.ndarray, sm_count: int) -> np.ndarray:
    """The share of the SMs' time a GEMM of ``tiles`` tiles keeps busy when the tiles run in waves of one per SM."""
    tiles = np.maximum(tiles, 1e-9)
    return tiles / (np.ceil(tiles / sm_count) * sm_count)


def transfer(rows: pd.DataFrame, source_ms: np.ndarray, source: Gpu, target: Gpu):
    """Each row's milliseconds on ``target`` and its bound, from its ``source_ms`` on ``source`` (see the module's
    docstring). ``rows``: ``predictor.network_rows`` of the network (their ``waves`` are on the source's SMs)."""
    bounds = transfer_bounds(rows, source_ms, source, target)
    return settle(bounds, target.unit)


def transfer_bounds(rows: pd.DataFrame, source_ms: np.ndarray, source: Gpu, target: Gpu) -> np.ndarray:
    """Each row's three bounds on ``target`` (columns ``BOUNDS``, milliseconds), before the launch floor."""
    compute = rows["group"].isin(COMPUTE_GROUPS).to_numpy()
    flops, moved = rows["flops"].to_numpy(float), rows["bytes"].to_numpy(float)
    waves = rows["waves"].to_numpy(float) if "waves" in rows else np.zeros(len(rows))
    tiles = np.where(compute, np.nan_to_num(waves) * source.sm_count, 0.0)
    waves_source = np.where(compute, wave_efficiency(tiles, source.sm_count), 1.0)
    waves_target = np.where(compute, wave_efficiency(tiles, target.sm_count), 1.0)
    per_sm_ms = source_ms - faster_memory_ms(rows, source_ms, source, target)
    sm_ms = sm_scaled_ms(per_sm_ms, source, target) * (waves_source / waves_target)
    peak = target.sustained_peak_flops * TENSOR_EFFICIENCY
    tensor_ms = np.where(compute, flops / (peak * waves_target) * 1e3, 0.0)
    memory_ms = moved / target.streamed_bytes_per_s * 1e3
    return np.column_stack([sm_ms, tensor_ms, memory_ms])


def settle(bounds: np.ndarray, unit: str = "fp16") -> tuple[np.ndarray, np.ndarray]:
    """Each row's time (its largest bound, at least the launch floor) and the name of that bound; the ``tensor``
    bound is named ``fp32`` where the math ``unit`` is the fp32 units (CUDA cores), not tensor cores."""
    largest = bounds.max(axis=1)
    ms = np.maximum(largest, FLOOR_MS)
    names = np.array([("fp32" if name == "tensor" and unit == "fp32" else name) for name in BOUNDS])
    bound = np.where(largest <= FLOOR_MS, "launch", names[bounds.argmax(axis=1)])
    return ms, bound


def fused_stream_ms(ref_ms: np.ndarray, source: Gpu, target: Gpu) -> np.ndarray:
    """A fused kernel's milliseconds on ``target`` for the bytes whose roofline time on ``source`` is ``ref_ms``:
    at ``MEMORY_EFFICIENCY`` of the bandwidth on the source, scaled by the two GPUs' streamed bandwidths."""
    return ref_ms / MEMORY_EFFICIENCY * source.streamed_bytes_per_s / target.streamed_bytes_per_s


def faster_memory_ms(rows: pd.DataFrame, source_ms: np.ndarray, source: Gpu, target: Gpu) -> np.ndarray:
    """What a target that streams faster saves of each memory-bound row's source time (the module's docstring): its
    bytes at the source's streamed bandwidth, at most its source time, times one minus the ratio of the source's
    streamed bandwidth to the target's; 0 for the other rows, and for every row where the target streams no faster."""
    saved = 1.0 - source.streamed_bytes_per_s / target.streamed_bytes_per_s
    if saved <= 0:
        return np.zeros(len(rows))
    streamed_ms = rows["bytes"].to_numpy(float) / source.streamed_bytes_per_s * 1e3
    memory = (rows["group"] == "memory").to_numpy()
    return np.where(memory, np.minimum(streamed_ms, source_ms) * saved, 0.0)


def sm_scaled_ms(source_ms: np.ndarray, source: Gpu, target: Gpu) -> np.ndarray:
    """Milliseconds of per-SM work that took ``source_ms`` on ``source``, on ``target``: scaled by the two GPUs' SM
    cycles per second (SMs x sustained clock)."""
    return source_ms * (source.sm_hz / target.sm_hz)
