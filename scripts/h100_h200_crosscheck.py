"""The H100 and the H200 share SMs and clocks and differ in memory (HBM3 3.35 TB/s, HBM3e 4.8 TB/s): their fp16
channels_last profiles time the same seeded configs, so the transfer's memory side can be tested on real hardware.
Each op row timed on both GPUs is carried from one to the other by ``predict.transfer`` (from its measured time, so
the layer models' error is not in it) and compared with its measured time there, per op group and category; the
measured ratio and the "same time" baseline beside it. Validation data: the transfer's faster-memory rule
(``transfer.faster_memory_ms``, 2026-12-07) was chosen on it.

    python scripts/h100_h200_crosscheck.py [--precision fp16] [--csv rows.csv]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from utilscope.predict import profile_rows, profiles
from utilscope.predict.features import Gpu
from utilscope.predict.transfer import transfer

MATCH = (
    "op", "group", "flops", "bytes", "in_bytes", "out_bytes", "style", "batch", "channels", "out_channels", "size",
    "out_size", "kernel", "kernel_w", "stride", "dilation", "groups", "category", "broadcast", "norm_rows", "hidden",
)  # fmt: skip


def shared_rows(precision: str) -> tuple[pd.DataFrame, Gpu, Gpu]:
    """The single-op rows timed on both GPUs in ``precision`` (channels_last, graph): the H200's columns, with
    ``ms_h100`` and ``ms_h200``; and the two GPUs."""
    found = {
        entry.gpu: entry
        for entry in profiles.shipped()
        if (entry.precision, entry.memory_format, entry.backend) == (precision, "channels_last", "graph")
    }
    if not {"h100_sxm", "h200_sxm"} <= set(found):
        raise SystemExit(f"no H100 and H200 profiles of {precision} channels_last are shipped: {sorted(found)}")
    frames = {}
    for key in ("h100_sxm", "h200_sxm"):
        ops, _ = profile_rows.load(found[key].path) or (None, None)
        if ops is None:
            raise SystemExit(f"{found[key].path.name} has no rows of the current code beside it")
        ops = ops.copy()
        ops[list(MATCH)] = ops[list(MATCH)].astype(str)  # NaN and numbers matched as text
        frames[key] = ops.drop_duplicates(list(MATCH))
    merged = frames["h200_sxm"].merge(frames["h100_sxm"][[*MATCH, "ms"]], on=list(MATCH), suffixes=("_h200", "_h100"))
    for column in ("flops", "bytes", "waves"):
        merged[column] = pd.to_numeric(merged[column], errors="coerce")
    gpus = {key: Gpu.of(found[key].device, precision) for key in found}
    return merged, gpus["h200_sxm"], gpus["h100_sxm"]


def carried(rows: pd.DataFrame, source: Gpu, target: Gpu, source_column: str) -> np.ndarray:
    return transfer(rows, rows[source_column].to_numpy(float), source, target)[0]


def scores(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per ``by``: rows, the measured H100/H200 ratio (median), and each direction's MAPE and share within ±10%,
    against the "same time on both" baseline."""

    def summary(group: pd.DataFrame) -> pd.Series:
        out = {"rows": len(group), "measured_h100_over_h200": (group["ms_h100"] / group["ms_h200"]).median()}
        for name, predicted, measured in (
            ("to_h100", "pred_h100", "ms_h100"),
            ("to_h200", "pred_h200", "ms_h200"),
            ("same_h100", "ms_h200", "ms_h100"),
        ):
            error = group[predicted] / group[measured] - 1
            out[f"{name}_mape"] = error.abs().mean()
            out[f"{name}_within10"] = (error.abs() <= 0.10).mean()
        return pd.Series(out)

    table = frame.groupby(by).apply(summary, include_groups=False)
    table.loc["all"] = summary(frame)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--csv", help="write every shared row with both predictions")
    args = parser.parse_args(argv)
    rows, h200, h100 = shared_rows(args.precision)
    rows["pred_h100"] = carried(rows, h200, h100, "ms_h200")
    rows["pred_h200"] = carried(rows, h100, h200, "ms_h100")
    rows["kind"] = np.where(rows["group"].isin(("conv", "matmul")), rows["group"], "memory: " + rows["category"])
    pd.set_option("display.width", 200)
    print(f"{len(rows)} single-op rows timed on both GPUs ({args.precision}, channels_last, graph)")
    print(scores(rows, "kind").round(3).to_string())
    if args.csv:
        rows.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
