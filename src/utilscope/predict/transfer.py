"""Transfer: a network's per-op times predicted on the calibrated GPU, carried to another GPU by its datasheet.

The layer models give each op's time on the GPU the device profile was timed on (the *source*, the H200). An op's
time on a *target* GPU is the largest of three bounds, each from the target's datasheet figures (spec table):

- ``sm``: the source's time scaled by the ratio of SM throughput, SMs x boost clock (source / target), and by the
  ratio of the op's wave efficiency on the two SM counts (tiles of a GEMM or conv spread over the SMs). What the
  source's time holds beyond its tensor and memory rooflines (instruction issue, shared-memory traffic, address
  arithmetic, epilogues, small tiles, CUDA-core work such as depthwise convs) is work every SM does per clock: it
  scales with the SMs and their clock, not with the tensor cores' peak or the memory's bandwidth.
- ``tensor``: a conv's or GEMM's FLOPs at ``TENSOR_EFFICIENCY`` of the target's dense peak for the precision's math
  unit, times the op's wave efficiency on the target: the tensor cores at their best.
- ``memory``: the op's bytes at ``MEMORY_EFFICIENCY`` of the target's bandwidth. (What keeps a memory-bound op
  below that on the source, the H200's HBM needing more bytes in flight per SM than an SM keeps, is in ``sm``.)

The bound that sets the time is the op's ``bound`` on the target (``launch`` when its time is the launch floor).
Nothing here is fitted on any GPU's measurements: the two efficiencies are constants set before any comparison
(docs/predict.md says which design choice the validation tables informed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from utilscope.predict.features import FLOOR_MS, Gpu

TENSOR_EFFICIENCY = 0.85  # the share of the dense tensor peak a large, aligned conv or GEMM reaches at full waves
MEMORY_EFFICIENCY = 0.85  # the share of the memory bandwidth an op's reads and writes reach at best (fused ones too)
BOUNDS = ("sm", "tensor", "memory")
COMPUTE_GROUPS = ("conv", "matmul")


def wave_efficiency(tiles: np.ndarray, sm_count: int) -> np.ndarray:
    """The share of the SMs' time a GEMM of ``tiles`` tiles keeps busy when the tiles run in waves of one per SM."""
    tiles = np.maximum(tiles, 1e-9)
    return tiles / (np.ceil(tiles / sm_count) * sm_count)


def transfer(rows: pd.DataFrame, source_ms: np.ndarray, source: Gpu, target: Gpu):
    """Each row's milliseconds on ``target`` and its bound, from its ``source_ms`` on ``source`` (see the module's
    docstring). ``rows``: ``predictor.network_rows`` of the network (their ``waves`` are on the source's SMs)."""
    compute = rows["group"].isin(COMPUTE_GROUPS).to_numpy()
    flops, moved = rows["flops"].to_numpy(float), rows["bytes"].to_numpy(float)
    waves = rows["waves"].to_numpy(float) if "waves" in rows else np.zeros(len(rows))
    tiles = np.where(compute, np.nan_to_num(waves) * source.sm_count, 0.0)
    waves_source = np.where(compute, wave_efficiency(tiles, source.sm_count), 1.0)
    waves_target = np.where(compute, wave_efficiency(tiles, target.sm_count), 1.0)
    sm_ms = source_ms * (source.sm_hz / target.sm_hz) * (waves_source / waves_target)
    tensor_ms = np.where(compute, flops / (target.peak_flops * TENSOR_EFFICIENCY * waves_target) * 1e3, 0.0)
    memory_ms = moved / (target.bandwidth_bytes * MEMORY_EFFICIENCY) * 1e3
    bounds = np.column_stack([sm_ms, tensor_ms, memory_ms])
    ms = np.maximum(bounds.max(axis=1), FLOOR_MS)
    bound = np.where(bounds.max(axis=1) <= FLOOR_MS, "launch", np.array(BOUNDS)[bounds.argmax(axis=1)])
    return ms, bound
