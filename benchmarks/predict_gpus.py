"""How well `predict --gpu` predicts GPUs it has no profile for: every timm-CNN row of timm's published tables in
timm's condition (amp, NCHW, eager, the table's batch and resolution), predicted by transfer from the shipped H200
profile, against the table's samples/s; beside it the baselines of the protocol in docs/predict.md (our measured
H200 throughput in the same condition scaled by the ratio of dense fp16 peaks, or of memory bandwidths; and, as an
oracle no predictor has, by the one constant that fits the table best), on the rows the H200 was measured on.

    python benchmarks/predict_gpus.py STORE --out rows.csv [--jobs 2] [--backend eager|compile] [--profile JSON]
        [--test] [--figure PNG]
    python benchmarks/predict_gpus.py STORE --from-csv rows.csv [--figure PNG]   # the scores and figure again

STORE holds the published rows (``utilscope ingest timm-benchmark``) and the H200's measurements in timm's
condition (data/h200/timm_condition.sqlite). The test tables (RTX 5090, RTX PRO 6000) are left out unless --test
is given: docs/predict.md says when that is allowed (once, after the design is frozen).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

TEST_GPUS = ("rtx_5090", "rtx_pro_6000_maxq", "rtx_pro_6000")
CONDITION = "backend = '{backend}' and memory_format = 'contiguous' and precision = 'amp'"
_PREDICTOR = None
_BACKEND = "eager"


def published_rows(store: str, test: bool, backend: str = "eager") -> pd.DataFrame:
    """The timm-CNN rows of the store's tables in timm's condition (reparameterizable models only where the row's
    reparameterization is decided), each with the spec that counts what the table ran."""
    from utilscope.models import sets

    cnn = set(sets.set_members("timm-cnn"))
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        condition = CONDITION.format(backend=backend)
        rows = pd.read_sql(
            f"select * from published where {condition} and reparam in ('n/a', 'yes') and count_status = 'ok'", db
        )
    rows = rows[rows["model"].isin(cnn) & (test == rows["gpu"].isin(TEST_GPUS))]
    rows["spec"] = rows["model"] + rows["reparam"].map({"yes": "+reparam", "n/a": ""})
    return rows.reset_index(drop=True)


def h200_measured(store: str, backend: str = "eager") -> pd.DataFrame:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return pd.read_sql(
            f"select model as spec, resolution, batch, samples_per_s as h200_samples_per_s "
            f"from measurements where status = 'ok' and {CONDITION.format(backend=backend)}",
            db,
        )


def _start(backend: str, profile: str | None) -> None:
    global _PREDICTOR, _BACKEND
    import torch

    from utilscope.predict.fit_cache import load_predictor
    from utilscope.predict.selection import select_profile

    torch.set_num_threads(1)
    _BACKEND = backend
    _PREDICTOR = load_predictor(select_profile("h200", profile, "amp", backend))


def _predict(task: tuple[str, int, int, tuple[str, ...]]) -> list[dict]:
    """One (model, resolution, batch), counted once, predicted on each GPU (``Predictor.predict_on``)."""
    from utilscope.hardware.specs import get_spec
    from utilscope.predict.features import Gpu

    spec, resolution, batch, gpus = task
    targets = [Gpu.from_spec(get_spec(gpu), "fp16") for gpu in gpus]
    try:
        predictions = _PREDICTOR.predict_on(spec, batch, targets, resolution, _BACKEND, "amp", channels_last=False)
    except Exception as exc:  # noqa: BLE001 - a row that cannot be counted or predicted is reported, not fatal
        return [
            {"spec": spec, "resolution": resolution, "batch": batch, "gpu": gpu, "error": str(exc)[:200]}
            for gpu in gpus
        ]
    return [
        {
            "spec": spec,
            "resolution": resolution,
            "batch": batch,
            "gpu": gpu,
            "predicted_samples_per_s": p.samples_per_s,
            "bound": p.bound,
            "extrapolated": p.extrapolated,
        }
        for gpu, p in zip(gpus, predictions, strict=True)
    ]


def predict_all(
    rows: pd.DataFrame, measured: pd.DataFrame, jobs: int, backend: str, profile: str | None
) -> pd.DataFrame:
    wanted = pd.concat(
        [rows[["spec", "resolution", "batch", "gpu"]], measured[["spec", "resolution", "batch"]].assign(gpu="h200_sxm")]
    )
    tasks = [
        (spec, int(res), int(batch), tuple(sorted(set(part["gpu"]))))
        for (spec, res, batch), part in wanted.groupby(["spec", "resolution", "batch"])
    ]
    results = []
    with ProcessPoolExecutor(jobs, initializer=_start, initargs=(backend, profile)) as pool:
        for i, out in enumerate(pool.map(_predict, tasks, chunksize=4)):
            results += out
            if i % 100 == 0:
                print(f"{i}/{len(tasks)} networks predicted", file=sys.stderr, flush=True)
    return pd.DataFrame(results)


def scores(measured: np.ndarray, predicted: np.ndarray) -> dict:
    from scipy.stats import spearmanr

    error = predicted / measured - 1
    return {
        "rows": len(error),
        "MAPE": np.mean(np.abs(error)),
        "median error": np.median(error),
        "within 10%": np.mean(np.abs(error) <= 0.1),
        "within 20%": np.mean(np.abs(error) <= 0.2),
        "Spearman": spearmanr(predicted, measured).statistic,
    }


def baselines(part: pd.DataFrame, gpu: str) -> dict:
    """The protocol's baselines on the rows with an H200 measurement: peak ratio, bandwidth ratio, best constant."""
    from utilscope.hardware.specs import get_spec

    source, target = get_spec("h200_sxm"), get_spec(gpu)
    both = part.dropna(subset=["h200_samples_per_s"])
    h200, table = both["h200_samples_per_s"].to_numpy(), both["samples_per_s"].to_numpy()
    oracle = np.exp(np.median(np.log(table / h200)))  # the constant of least absolute log error
    return {
        "peak ratio": scores(table, h200 * target.peak_tflops("fp16") / source.peak_tflops("fp16")),
        "bandwidth ratio": scores(table, h200 * target.memory_bandwidth_gbs / source.memory_bandwidth_gbs),
        "best constant (oracle)": scores(table, h200 * oracle),
        "transfer, same rows": scores(table, both["predicted_samples_per_s"].to_numpy()),
    }


def predicted_table(store: str, test: bool, backend: str, jobs: int, profile: str | None = None) -> pd.DataFrame:
    """Every row of the tables with its prediction (and its H200 measurement where there is one), and the H200's
    own rows as a table of their own."""
    rows, measured = published_rows(store, test, backend), h200_measured(store, backend)
    predicted = predict_all(rows, measured, jobs, backend, profile)
    keys = ["spec", "resolution", "batch", "gpu"]
    table = rows.merge(predicted, on=keys, how="left").merge(measured, on=keys[:3], how="left")
    own = measured.merge(predicted[predicted["gpu"] == "h200_sxm"], on=keys[:3])
    own = own.rename(columns={"h200_samples_per_s": "samples_per_s"})
    own["source_file"] = "H200 measured (timm's condition)"
    return pd.concat([table, own.assign(h200_samples_per_s=np.nan)], ignore_index=True)


def figure(table: pd.DataFrame, path: str) -> None:
    """Predicted against published (or measured) samples/s, log-log, one panel per table, the ±20% band drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = list(table.groupby("source_file"))
    fig, axes = plt.subplots(1, len(parts), figsize=(4.2 * len(parts), 4.2), squeeze=False)
    for ax, (name, part) in zip(axes[0], parts, strict=True):
        measured, predicted = part["samples_per_s"], part["predicted_samples_per_s"]
        low, high = min(measured.min(), predicted.min()) / 1.5, max(measured.max(), predicted.max()) * 1.5
        ax.fill_between([low, high], [low / 1.2, high / 1.2], [low * 1.2, high * 1.2], color="0.9", label="±20%")
        ax.plot([low, high], [low, high], color="0.5", linewidth=0.8)
        ax.scatter(measured, predicted, s=6, alpha=0.6)
        what = "measured" if name.startswith("H200") else "published"
        title = name.removeprefix("benchmark-infer-").removesuffix(".csv")
        ax.set(
            xscale="log",
            yscale="log",
            xlim=(low, high),
            ylim=(low, high),
            xlabel=f"{what} samples/s",
            ylabel="predicted samples/s",
            title=title,
        )
        ax.title.set_fontsize(8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--out", help="write the per-row predictions here (CSV); needed unless --from-csv")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--test", action="store_true", help="the test tables instead of the validation ones")
    parser.add_argument("--figure", help="draw predicted against published samples/s, a panel per table (PNG)")
    parser.add_argument(
        "--from-csv", help="the per-row predictions of an earlier run (its --out) instead of predicting again"
    )
    parser.add_argument(
        "--backend",
        default="eager",
        choices=("eager", "compile"),
        help="eager: the tables without -dynamo; compile: the -dynamo ones",
    )
    parser.add_argument(
        "--profile",
        help="the H200 device profile to transfer from (default: the one `predict --precision amp` selects)",
    )
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if not (args.out or args.from_csv):
        parser.error("give --out (or --from-csv)")
    if args.from_csv:
        table = pd.read_csv(args.from_csv)
    else:
        table = predicted_table(args.store, args.test, args.backend, args.jobs, args.profile)
        table.to_csv(args.out, index=False)
    if args.figure:
        figure(table.dropna(subset=["predicted_samples_per_s"]), args.figure)
    lines = []
    for name, part in table.dropna(subset=["predicted_samples_per_s"]).groupby("source_file"):
        lines.append(
            {
                "table": name,
                "method": "transfer",
                **scores(part["samples_per_s"].to_numpy(), part["predicted_samples_per_s"].to_numpy()),
            }
        )
        if part["gpu"].iloc[0] != "h200_sxm" and part["h200_samples_per_s"].notna().any():
            lines += [
                {"table": name, "method": method, **s} for method, s in baselines(part, part["gpu"].iloc[0]).items()
            ]
    print(pd.DataFrame(lines).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    errors = table["error"].notna().sum() if "error" in table else 0
    print(f"{errors} rows could not be counted; per-row predictions in {args.out}")


if __name__ == "__main__":
    main()
