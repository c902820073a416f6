"""How much slower a convolution with unaligned channels runs than the same one zero-padded to the next multiple
of 8, on this GPU (channels_last, cuDNN autotuned, as `profile` runs), per precision, kernel, width and batch size.
Times each pair with the calibration's harness (`predict.calibrate.time_op_ms`: CUDA graphs of 20 calls, cold
weights) and prints a table; ``--write`` puts the rows into ``src/utilscope/hardware/alignment_penalty.csv``
(replacing this GPU's), which `layers`' ``unaligned_channels`` hint cites (docs/advise.md).

    python3 benchmarks/alignment_penalty.py [--precisions fp16,bf16] [--batches 1,32,256] [--write]
"""

from __future__ import annotations

import argparse
import datetime

import pandas as pd
import torch

from utilscope.hardware import device_name, resolve_device
from utilscope.hardware.alignment import COLUMNS, PENALTY_PATH, load_penalties, round_up
from utilscope.measure.precision import parse_precision
from utilscope.measure.settings import CudnnSettings
from utilscope.predict.calibrate import time_op_ms
from utilscope.predict.ops import OpConfig

MULTIPLE = 8
SHAPES = ((3, 56, (20, 60, 126, 250)), (3, 14, (250, 510)), (1, 28, (60, 250, 510)))  # kernel, size, widths


def pair_ms(kernel: int, size: int, channels: int, batch: int, precision: str) -> tuple[float, float, int]:
    """The unaligned conv (channels in and out) and its padded twin, each timed once."""
    device, prec, cudnn = resolve_device("cuda"), parse_precision(precision), CudnnSettings()
    padded = round_up(channels, MULTIPLE)
    times = [time_op_ms(OpConfig("conv", batch, c, c, size, kernel), device, prec, cudnn) for c in (channels, padded)]
    return times[0], times[1], padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="fp16,bf16")
    parser.add_argument("--batches", default="1,32,256")
    parser.add_argument("--write", action="store_true", help=f"replace this GPU's rows in {PENALTY_PATH.name}")
    args = parser.parse_args()
    gpu = device_name(resolve_device("cuda"))
    when = datetime.date.today().isoformat()
    rows = []
    for precision in args.precisions.split(","):
        for batch in map(int, args.batches.split(",")):
            for kernel, size, widths in SHAPES:
                for channels in widths:
                    unaligned_ms, padded_ms, padded = pair_ms(kernel, size, channels, batch, precision)
                    rows.append(
                        dict(
                            zip(
                                COLUMNS,
                                (
                                    gpu,
                                    precision,
                                    kernel,
                                    channels,
                                    padded,
                                    size,
                                    batch,
                                    unaligned_ms,
                                    padded_ms,
                                    torch.__version__,
                                    torch.backends.cudnn.version(),
                                    when,
                                ),
                                strict=True,
                            )
                        )
                    )
                    print(
                        f"{precision} batch {batch:>3} {kernel}x{kernel} at {size}x{size}: {channels} -> {padded} "
                        f"channels: {unaligned_ms:.4f} ms vs {padded_ms:.4f} ms, {unaligned_ms / padded_ms:.2f}x",
                        flush=True,
                    )
    if args.write:
        kept = load_penalties()
        table = pd.concat([kept[kept["gpu"] != gpu], pd.DataFrame(rows)], ignore_index=True)
        table.to_csv(PENALTY_PATH, index=False)
        print(f"wrote {len(rows)} rows for the {gpu} to {PENALTY_PATH}")


if __name__ == "__main__":
    main()
