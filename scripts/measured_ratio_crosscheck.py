"""The measured ratio carried between the two lent GPUs (docs/predict.md, "Measured networks: the measured ratio";
validation): every network both the H100 and the H200 measured in one condition, each GPU's cells predicted from
the other GPU's profile, without and with the other GPU's measured ratio (measured / predicted there, from the same
profile; carried only from a cell predicted device-bound there, as ``predict.measured`` does), against its own
measurement. Prints MAPE, median error and the share within ±10% per direction and batch; ``--out`` keeps the rows.

    python3 scripts/measured_ratio_crosscheck.py --precision fp16 --out rows.csv

The rule it decides (written before it was run): a ratio is carried to another GPU at the batch sizes where it
lowers the MAPE in both directions.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from utilscope import api
from utilscope.predict import measured, profiles

GPUS = ("h100_sxm", "h200_sxm")


def profile_of(gpu: str, precision: str, memory_format: str) -> str:
    """The shipped graph profile of ``gpu`` in the condition."""
    for entry in profiles.shipped():
        own = (entry.gpu, entry.precision, entry.memory_format, entry.backend)
        if own == (gpu, precision, memory_format, "graph"):
            return str(entry.path)
    raise SystemExit(f"no shipped {precision} {memory_format} graph profile of the {gpu}")


def predicted(profile: str, models: list[str], batches: tuple[int, ...], channels_last: bool) -> pd.DataFrame:
    """Every model at every batch on both GPUs from one profile, without measured ratios."""
    result = api.predict(models, ",".join(GPUS), batches, profile=profile, channels_last=channels_last, measured=False)
    frame = result.to_frame()
    return frame[["model", "batch", "gpu_key", "samples_per_s", "bound"]]


def rows_of(precision: str, memory_format: str) -> pd.DataFrame:
    """The cells both GPUs measured in the condition (graph), one row per model and batch."""
    cells = measured.table()
    cells = cells[(cells.precision == precision) & (cells.memory_format == memory_format) & (cells.backend == "graph")]
    wide = cells.pivot_table(index=["model", "batch"], columns="gpu", values="samples_per_s", aggfunc="first")
    return wide.dropna(subset=list(GPUS)).reset_index()


def scores(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (direction, batch), part in rows.groupby(["direction", "batch"]):
        for how in ("alone", "ratio"):
            error = part[how] / part["measured"] - 1
            out.append(
                {
                    "direction": direction,
                    "batch": batch,
                    "how": how,
                    "rows": len(part),
                    "mape_pct": round(100 * float(np.mean(np.abs(error))), 1),
                    "median_pct": round(100 * float(np.median(error)), 1),
                    "within_10_pct": round(100 * float(np.mean(np.abs(error) <= 0.10))),
                }
            )
    return pd.DataFrame(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    memory_format = "channels_last" if args.channels_last else "contiguous"
    wide = rows_of(args.precision, memory_format)
    models, batches = sorted(wide["model"].unique()), tuple(sorted(wide["batch"].unique()))
    print(f"{len(wide)} cells ({len(models)} networks, batches {batches}) measured on both GPUs", file=sys.stderr)
    rows = []
    for source, target in (GPUS, GPUS[::-1]):
        frame = predicted(profile_of(source, args.precision, memory_format), models, batches, args.channels_last)
        there = frame[frame.gpu_key == source].set_index(["model", "batch"])
        here = frame[frame.gpu_key == target].set_index(["model", "batch"])
        for _, cell in wide.iterrows():
            key = (cell["model"], cell["batch"])
            if key not in here.index or key not in there.index:
                continue
            ratio = cell[source] / there.loc[key, "samples_per_s"] if there.loc[key, "bound"] != "host" else 1.0
            alone = here.loc[key, "samples_per_s"]
            rows.append(
                {
                    "direction": f"{source} -> {target}",
                    "model": key[0],
                    "batch": key[1],
                    "measured": cell[target],
                    "alone": alone,
                    "ratio": alone * ratio,
                }
            )
    rows = pd.DataFrame(rows)
    if args.out:
        rows.to_csv(args.out, index=False)
    print(scores(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
