"""The measured cost of unaligned channels: per GPU and precision, how much slower a convolution whose channel
count is not a multiple of what the tensor cores want runs than the same convolution zero-padded to the next
multiple (``alignment_penalty.csv`` beside this module, written on the GPU by ``benchmarks/alignment_penalty.py``).

One row per timed pair: the GPU's name as torch reports it, the precision, the conv's kernel, channels (in and
out), padded channels, spatial size and batch, the two median times, and the software it was measured with.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

PENALTY_PATH = Path(__file__).with_name("alignment_penalty.csv")
COLUMNS = ("gpu", "precision", "kernel", "channels", "padded_channels", "size", "batch", "unaligned_ms", "padded_ms",
           "torch", "cudnn", "measured_at")  # fmt: skip


@dataclass(frozen=True)
class Penalty:
    """How much slower the unaligned convs of one kernel size ran than their padded twins, at one batch size."""

    gpu: str
    precision: str
    kernel: int
    batch: int
    shapes: int  # timed pairs summarized
    median: float  # unaligned ms / padded ms
    low: float
    high: float

    def describe(self) -> str:
        spread = f"{self.low:.2f}–{self.high:.2f}×, " if self.shapes > 1 else ""
        return (f"measured on the {self.gpu} in {self.precision}: {self.kernel}×{self.kernel} convs with unaligned "
                f"channels ran {self.median:.2f}× slower than padded to the next multiple at batch {self.batch} "
                f"({spread}median of {self.shapes} shapes)")  # fmt: skip


@functools.cache
def round_up(channels: int, multiple: int) -> int:
    """``channels`` rounded up to a multiple of ``multiple`` (what padding a layer to alignment gives it)."""
    return -(-channels // multiple) * multiple


def load_penalties(path: Path = PENALTY_PATH) -> pd.DataFrame:
    """The table, or an empty one with its columns when none was measured (a fresh checkout of a new GPU)."""
    if not path.is_file():
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.read_csv(path)


def penalty_for(gpu: str, precision: str, kernel: int, batch: int, table: pd.DataFrame | None = None) -> Penalty | None:
    """The measured penalty for this GPU (exact name) and precision, at the timed kernel size nearest ``kernel``
    and the timed batch size nearest ``batch`` (in log scale); None when the table has no row for them."""
    table = load_penalties() if table is None else table
    rows = table[(table["gpu"] == gpu) & (table["precision"] == precision)]
    if rows.empty:
        return None
    nearest_kernel = min(rows["kernel"].unique(), key=lambda k: (abs(int(k) - kernel), int(k)))
    rows = rows[rows["kernel"] == nearest_kernel]
    nearest_batch = min(rows["batch"].unique(), key=lambda b: (abs(math.log(int(b)) - math.log(batch)), int(b)))
    rows = rows[rows["batch"] == nearest_batch]
    slowdown = rows["unaligned_ms"] / rows["padded_ms"]
    return Penalty(gpu, precision, int(nearest_kernel), int(nearest_batch), len(rows), float(slowdown.median()),
                   float(slowdown.min()), float(slowdown.max()))  # fmt: skip
