"""Channel alignment: the one rule of which channel multiple tensor-core kernels want (``channel_multiple``, by
precision and GPU architecture), the one rule of which conv / linear layers count as unaligned
(``unaligned_sides``, ``unaligned_channels``), and its measured cost: per GPU and precision, how much slower a
convolution whose channel count is not a multiple of it runs than the same convolution zero-padded to the next
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

from utilscope.errors import UsageError
from utilscope.precision import Precision

# The channel multiple of 16 bytes that tensor-core kernels read in one vector, per math unit (NVIDIA's deep-learning
# performance guide: fp16/bf16 8, tf32 4, int8 16; fp32 on the CUDA cores gets the same 16-byte vectors), keyed by
# (unit, architecture); "*" holds for every architecture without a row of its own.
CHANNEL_MULTIPLES = {("fp16", "*"): 8, ("bf16", "*"): 8, ("tf32", "*"): 4, ("fp32", "*"): 4, ("int8", "*"): 16}
PENALTY_PATH = Path(__file__).with_name("alignment_penalty.csv")
COLUMNS = (
    "gpu",
    "precision",
    "kernel",
    "channels",
    "padded_channels",
    "size",
    "batch",
    "unaligned_ms",
    "padded_ms",
    "torch",
    "cudnn",
    "measured_at",
)


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
        return (
            f"measured on the {self.gpu} in {self.precision}: {self.kernel}×{self.kernel} convs with unaligned "
            f"channels ran {self.median:.2f}× slower than padded to the next multiple at batch {self.batch} "
            f"({spread}median of {self.shapes} shapes)"
        )


def channel_multiple(precision: str | Precision, architecture: str = "*") -> int:
    """The channel multiple the precision's math unit wants on GPUs of ``architecture`` (amp: fp16's); a
    UsageError for an unknown precision."""
    value = precision.value if isinstance(precision, Precision) else str(precision)
    if value not in {p.value for p in Precision}:
        raise UsageError(
            f"no channel alignment for precision {value!r}; known: {', '.join(p.value for p in Precision)}"
        )
    unit = Precision(value).unit.value
    return CHANNEL_MULTIPLES.get((unit, architecture), CHANNEL_MULTIPLES[(unit, "*")])


def unaligned_sides(
    channels_in: int,
    channels_out: int,
    multiple: int,
    groups: int = 1,
    image_input: bool = False,
    depthwise_per_group: bool = False,
) -> dict[str, int]:
    """The sides (``"input"``, ``"output"``) of a conv / linear layer whose channels are not a multiple of
    ``multiple``, each with the channel count judged; empty when the layer is aligned.

    Channels are judged per group: the implicit GEMM of a grouped conv reduces over ``channels_in / groups``
    (times the kernel) and writes ``channels_out / groups`` columns per group, the widths its tensor-core tiles see.
    A linear layer is ``groups=1``.

    A depthwise conv (``groups > 1`` and one input channel per group) runs no tensor cores: its kernels run on the
    CUDA cores and vectorize over the channels of the whole tensor, so its total channels are judged, not its one
    channel per group. ``depthwise_per_group=True`` judges it per group like any grouped conv, so every depthwise
    conv is unaligned (``counting.design``'s stored shares, kept as they were built).

    ``image_input``: the layer reads the network's input, whose channels the data fixes (padding the image is not a
    rewrite of the network), so its input side is not judged."""
    if groups < 1 or channels_in % groups or channels_out % groups:
        raise ValueError(f"groups={groups} does not divide {channels_in} input and {channels_out} output channels")
    depthwise = groups > 1 and channels_in == groups
    per = 1 if depthwise and not depthwise_per_group else groups
    sides = {"output": channels_out // per}
    if not image_input:
        sides = {"input": channels_in // per, **sides}
    return {side: channels for side, channels in sides.items() if channels % multiple}


def unaligned_channels(
    channels_in: int,
    channels_out: int,
    multiple: int,
    groups: int = 1,
    image_input: bool = False,
    depthwise_per_group: bool = False,
) -> bool:
    """Whether a conv / linear layer is unaligned: its input channels per group (unless it reads the image) or its
    output channels per group are not a multiple of ``multiple``; a depthwise conv is judged by its total channels
    (``unaligned_sides`` has the rule and why)."""
    return bool(unaligned_sides(channels_in, channels_out, multiple, groups, image_input, depthwise_per_group))


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
    return Penalty(
        gpu,
        precision,
        int(nearest_kernel),
        int(nearest_batch),
        len(rows),
        float(slowdown.median()),
        float(slowdown.min()),
        float(slowdown.max()),
    )
