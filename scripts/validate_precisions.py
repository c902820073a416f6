"""`predict` against `survey` on the same GPU, per precision, layout and batch (validation of the device profiles).

Reads a store of whole networks measured on one GPU of the spec table (``scripts/gpu_validation.sh`` writes
``data/GPU/precisions.sqlite``: the 61 torchvision CNNs at batch 1 and 256, `graph`), predicts every ok row with
`utilscope predict` on that GPU in the row's condition (the registry picks the profile; on the GPU the profile was
calibrated on, its own), and prints per condition and batch: rows, MAPE of samples/s, median error, share within
±10%, Spearman, the profile used, and the three worst networks. ``--csv`` keeps every row; ``--families`` adds,
per condition, one line per family (``models.sets.display_family``) with its MAPE and share within ±10% per batch,
and per batch how many families have at least 90% of their networks within ±10%. An eager
store (``data/GPU/eager.sqlite``) is predicted with the host profile the registry picks for the GPU, or with
``--host-profile HOST.json`` (one timed on the machine that measured the store: the host model on its own host).
``--profile FILE`` predicts every row from that profile instead (another GPU's: a transfer to the store's GPU,
the H100 and H200 checked against each other network by network); ``--backend`` and ``--precision`` keep that
backend's or precision's rows; ``--stable`` only the rows whose timing was stable (a coefficient of variation
within ``measure.timing.CV_LIMIT``: not flagged ``unstable``). ``--repeat STORE`` (repeatable) adds the same
cells timed again in another call on the same GPU: each cell is scored by its fastest timing (a host-bound forward
is only ever slowed by what else the machine runs), and ``--csv`` says how many stores timed it (``timings``); the
output adds how far each repeat lies from the first store's timing, and ``--repeated`` scores only the cells timed
again. ``--by-bound`` adds, per condition and batch, the errors of the rows the prediction calls host-bound (eager's
host side longer than its kernels: ``bound`` "host" in ``--csv``) apart from the device-bound ones.

    python3 scripts/validate_precisions.py data/h100/precisions.sqlite [--csv ROWS.csv] [--families]
        [--profile FILE] [--backend NAME] [--precision NAME] [--stable] [--repeat STORE ...] [--repeated]
        [--by-bound] [--host-profile HOST.json]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import spearmanr

from utilscope import api
from utilscope.hardware.specs import detect
from utilscope.present.markdown import WITHIN, family_errors  # WITHIN: |predicted / measured - 1| at most
from utilscope.survey.store import Store

COLUMNS = [
    "model",
    "resolution",
    "batch",
    "precision",
    "memory_format",
    "backend",
    "device",
    "samples_per_s",
    "unstable",
]
CONDITION = ["precision", "memory_format", "backend"]
CELL = ["model", "resolution", "batch", *CONDITION]  # one measured cell


@functools.cache
def measured(store: str) -> tuple[pd.DataFrame, str]:
    """The store's ok rows and the spec table's key of the one GPU they were measured on (read as every verb that
    only reads opens a store: read-only, nothing created beside it), once per store (``fastest`` and
    ``repeat_spread`` both read it; neither changes the frame)."""
    with Store(store, create=False) as opened:
        frame = opened.frame()
    rows = frame.loc[frame["status"] == "ok", COLUMNS].reset_index(drop=True)
    devices = rows["device"].unique()
    if len(devices) != 1:
        raise SystemExit(f"validate_precisions.py: {store} holds rows of {len(devices)} devices; one is needed")
    spec = detect(devices[0])
    if spec is None:
        raise SystemExit(f"validate_precisions.py: {devices[0]!r} is not a GPU of the spec table")
    return rows, spec.key


def fastest(stores: list[str]) -> tuple[pd.DataFrame, str]:
    """Every cell's fastest timing over ``stores`` (``measured`` of each, all of one GPU), with ``timings``: how many
    of the stores timed the cell."""
    frames, gpus = zip(*(measured(store) for store in stores), strict=True)
    if len(set(gpus)) != 1:
        raise SystemExit(f"validate_precisions.py: the stores hold rows of {len(set(gpus))} GPUs; one is needed")
    rows = pd.concat(frames, ignore_index=True)
    rows = rows.assign(timings=rows.groupby(CELL)["samples_per_s"].transform("size"))
    return rows.sort_values("samples_per_s", ascending=False).drop_duplicates(CELL).reset_index(drop=True), gpus[0]


def repeat_spread(stores: list[str]) -> str:
    """Per condition and batch, how far each repeat store's timing of a cell lies from the first store's: cells
    timed by both, the median of repeat / first samples/s, the share within ±10% and the range (markdown)."""
    first = measured(stores[0])[0].set_index(CELL)["samples_per_s"]
    lines = ["| store | precision | layout | backend | batch | cells | repeat / first: median | within ±10% | range |"]
    lines.append("|" + "---|" * 9)
    for store in stores[1:]:
        ratio = (measured(store)[0].set_index(CELL)["samples_per_s"] / first).dropna()
        for keys, cells in ratio.groupby([*CONDITION, "batch"]):
            lines.append(
                f"| {Path(store).name} | " + " | ".join(map(str, keys)) + f" | {len(cells)} | {cells.median():.3f} | "
                f"{((cells - 1).abs() <= WITHIN).mean():.0%} | {cells.min():.2f}–{cells.max():.2f} |"
            )
    return "\n".join(lines)


def predicted(rows: pd.DataFrame, gpu: str, profile: str | None = None, host: str | None = None) -> pd.DataFrame:
    """Every row with its prediction (samples/s, at the row's resolution) and the profile the prediction came from
    (``profile``: that one, else the registry's choice; ``host``: eager's host profile, else the registry's)."""
    parts = []
    for (precision, memory_format, backend, resolution), group in rows.groupby([*CONDITION, "resolution"]):
        prediction = api.predict(
            sorted(group["model"].unique()),
            gpu=gpu,
            batches=sorted(group["batch"].unique()),
            precision=precision,
            backend=backend,
            channels_last=memory_format == "channels_last",
            resolution=int(resolution),
            profile=profile,
            host_profile=host if backend == "eager" else None,
            measured=False,  # the layer models' own prediction: the rows' measurements are in the shipped tables
        )
        frame = prediction.to_frame()[["model", "batch", "samples_per_s", "bound"]]
        merged = group.merge(frame, on=["model", "batch"], suffixes=("", "_predicted"))
        parts.append(merged.assign(profile=Path(prediction.profile_path).name))
    out = pd.concat(parts, ignore_index=True)
    return out.assign(error=out["samples_per_s_predicted"] / out["samples_per_s"] - 1)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per condition and batch: rows, MAPE, median error, share within ±10%, Spearman, the three worst."""
    lines = []
    for keys, group in rows.groupby(CONDITION + ["batch"]):
        errors = group["error"]
        worst = group.reindex(errors.abs().sort_values(ascending=False).index).head(3)
        named = zip(worst["model"], worst["error"], strict=True)
        lines.append(
            {
                **dict(zip(CONDITION + ["batch"], keys, strict=True)),
                **error_stats(errors),
                "spearman": spearmanr(group["samples_per_s"], group["samples_per_s_predicted"]).statistic,
                "worst": ", ".join(f"{model.split(':')[-1]} {error:+.0%}" for model, error in named),
            }
        )
    return pd.DataFrame(lines)


def bound_table(rows: pd.DataFrame) -> str:
    """Per condition and batch, the rows the prediction says are bound by the host (eager's host side: the host's
    work of a forward longer than its kernels) apart from the rest (bound by the device): rows, MAPE, median error
    and share within ±10% of each side."""
    side = rows["bound"].where(rows["bound"] == "host", "device")
    lines = ["| precision | layout | backend | batch | bound | rows | MAPE | median error | within ±10% |"]
    lines.append("|" + "---|" * 9)
    for keys, group in rows.assign(side=side).groupby(CONDITION + ["batch", "side"]):
        stats = error_stats(group["error"])
        lines.append(
            f"| {' | '.join(map(str, keys))} | {stats['rows']} | {stats['mape']:.1%} | {stats['median_error']:+.1%} | "
            f"{stats['within_10']:.0%} |"
        )
    return "\n".join(lines)


def error_stats(errors: pd.Series) -> dict:
    """Rows, MAPE, median error and share within ±10% of a group's errors (``summary``'s and ``bound_table``'s)."""
    return {
        "rows": len(errors),
        "mape": errors.abs().mean(),
        "median_error": errors.median(),
        "within_10": (errors.abs() <= WITHIN).mean(),
    }


def markdown(table: pd.DataFrame, gpu: str) -> str:
    head = (
        "| GPU | precision | layout | backend | batch | rows | MAPE | median error | within ±10% | Spearman | worst |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in table.itertuples():
        lines.append(
            f"| {gpu} | {r.precision} | {r.memory_format} | {r.backend} | {r.batch} | {r.rows} | {r.mape:.1%} | "
            f"{r.median_error:+.1%} | {r.within_10:.0%} | {r.spearman:.3f} | {r.worst} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--csv", help="write every row here")
    parser.add_argument("--families", action="store_true", help="add each family's MAPE and share within ±10%%")
    parser.add_argument("--profile", help="predict every row from this device profile (default: the registry's)")
    parser.add_argument("--host-profile", help="eager's host profile (default: the registry's for the GPU)")
    parser.add_argument("--backend", help="only this backend's rows")
    parser.add_argument("--precision", help="only this precision's rows")
    parser.add_argument("--stable", action="store_true", help="only the rows not flagged unstable")
    parser.add_argument("--repeat", action="append", default=[], help="the same cells timed again: the fastest counts")
    parser.add_argument("--repeated", action="store_true", help="only the cells --repeat stores timed again")
    parser.add_argument("--by-bound", action="store_true", help="add the errors of host- and device-bound rows apart")
    args = parser.parse_args()
    rows, gpu = fastest([args.store, *args.repeat])
    if args.repeated:
        rows = rows[rows["timings"] > 1]
    if args.stable:
        rows = rows[rows["unstable"] == 0]
    for column in ("backend", "precision"):
        if getattr(args, column):
            rows = rows[rows[column] == getattr(args, column)]
    scored = predicted(rows, gpu, args.profile, args.host_profile)
    if args.csv:
        scored.to_csv(args.csv, index=False, float_format="%.6g")
    print(markdown(summary(scored), gpu))
    if args.repeat:
        print("\n" + repeat_spread([args.store, *args.repeat]))
    if args.by_bound:
        print("\n" + bound_table(scored))
    if args.families:
        print("\n" + family_errors(scored, dict(zip(CONDITION, ("precision", "layout", "backend"), strict=True))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
