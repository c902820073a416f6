"""A device profile's own held-back check: how well its layer models predict configs they were not fitted on.

A seeded fifth of the profile's single-op rows (``layers.calibration_rows``: one per timed config that is one op or
one squeeze-excite gate) is held back; the layer models are fitted on the rest, as ``predict`` fits them on all,
and predict the held-back configs' times. Per group (convolutions, matmuls, memory-bound ops, gates): the rows
held back, MAPE, median error (predicted / measured - 1), the share within ±10%, and the same MAPE of the roofline
time alone (``ref_ms``: the configs' bytes and FLOPs at the datasheet's peaks), for scale. ``calibrate`` prints it
at its end; ``python -m utilscope.predict.held_back PROFILE...`` checks shipped profiles.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.predict import profile_rows
from utilscope.predict.calibrate import DeviceProfile
from utilscope.predict.features import Gpu
from utilscope.predict.layers import fit_layer_models

HELD_BACK_SHARE = 0.2
SEED = 0
MIN_CONFIGS = 200  # fewer leave too few rows per group, held back or fitted on, to say anything


def held_back_rows(profile: DeviceProfile, path: Path) -> pd.DataFrame:
    """The held-back single-op rows, each with its measured ``ms`` and the layer models' ``predicted_ms``."""
    gpu = Gpu.of(profile.device, profile.precision)
    ops, _ = profile_rows.load(path) or profile_rows.derive(profile, gpu)  # the rows kept beside it, else traced
    held = np.random.default_rng(SEED).random(len(ops)) < HELD_BACK_SHARE
    models = fit_layer_models(ops[~held], gpu)
    test = ops[held].reset_index(drop=True)
    predicted_ms, _ = models.times_ms(test)
    return test.assign(predicted_ms=predicted_ms)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group and over every row: held-back rows, MAPE, median error, share within ±10%, roofline MAPE."""

    def line(part: pd.DataFrame) -> dict:
        error = part["predicted_ms"] / part["ms"] - 1
        roofline = part["ref_ms"] / part["ms"] - 1
        return {
            "rows": len(part),
            "mape": error.abs().mean(),
            "median_error": error.median(),
            "within_10": (error.abs() <= 0.10).mean(),
            "roofline_mape": roofline.abs().mean(),
        }

    lines = {group: line(part) for group, part in rows.groupby("group")}
    lines["every op"] = line(rows)
    return pd.DataFrame.from_dict(lines, orient="index")


def describe(table: pd.DataFrame) -> list[str]:
    """One line per group: what the held-back check found."""
    return [
        f"{group}: {r.rows:.0f} held back, MAPE {r.mape:.1%} (median {r.median_error:+.1%}, "
        f"{r.within_10:.0%} within ±10%; the roofline alone {r.roofline_mape:.0%})"
        for group, r in table.iterrows()
    ]


def check(path: str | Path) -> pd.DataFrame:
    """The held-back check of the device profile at ``path`` (its ``summary``)."""
    path = Path(path)
    return summary(held_back_rows(DeviceProfile.load(path), path))


def main(argv: list[str]) -> int:
    for name in argv:
        print(f"{Path(name).name}, {HELD_BACK_SHARE:.0%} of its single-op configs held back (seed {SEED}):")
        print("\n".join("  " + line for line in describe(check(name))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
