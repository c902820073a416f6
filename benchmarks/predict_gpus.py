"""How well `predict --gpu` predicts GPUs it has no profile for: every timm-CNN row of timm's published amp tables
(NCHW, timm's condition, and NHWC: channels_last; eager, the table's batch and resolution), predicted by transfer
from the shipped H200 profile of the row's layout, against the table's samples/s; beside it the baselines of the
protocol in docs/predict.md (our measured H200 throughput in timm's condition scaled by the ratio of dense fp16
peaks, or of memory bandwidths; and, as an oracle no predictor has, by the one constant that fits the table best),
on the rows the H200 was measured on (in NCHW: for an NHWC table the baselines scale the NCHW measurement).

    python benchmarks/predict_gpus.py STORE --out rows.csv [--jobs 2] [--backend eager|compile] [--profile JSON]
        [--figure PNG] [--anchors]
    python benchmarks/predict_gpus.py STORE --from-csv rows.csv [--figure PNG]   # the scores and figure again

STORE holds the published rows (``utilscope ingest timm-benchmark``) and the H200's measurements in timm's
condition (data/h200/timm_condition.sqlite). Every shipped table is validation data (docs/predict.md, "The GPUs
people rent"). With PYTHONPATH naming an older checkout's ``src``, the same run scores that checkout's transfer.
``--anchors`` also fits each table's GPU to the table's own ResNet-50 row (``ANCHORS[:1]``) and to its ResNet-50,
EfficientNet-B0 and ConvNeXt-T rows (``ANCHORS``) as `predict --anchor` does, and scores each fit on the table's
other rows.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

CONDITION = "backend = '{backend}' and precision = 'amp'"
MEASURED = "backend = '{backend}' and memory_format = 'contiguous' and precision = 'amp'"
ANCHORS = ("timm:resnet50", "timm:efficientnet_b0", "timm:convnext_tiny")  # each at 224 px, the table's batch
ANCHOR_RESOLUTION = 224
ANCHOR_SETS = {"anchor1": ANCHORS[:1], "anchor3": ANCHORS}
_PREDICTORS: dict[bool, object] = {}
_PROFILE = None
_BACKEND = "eager"
_TARGETS: dict = {}  # label -> a fitted Gpu (``anchor_targets``); other labels are spec-table keys


def published_rows(store: str, backend: str = "eager") -> pd.DataFrame:
    """The timm-CNN rows of the store's amp tables (reparameterizable models only where the row's
    reparameterization is decided), each with the spec that counts what the table ran."""
    from utilscope.models import sets

    cnn = set(sets.set_members("timm-cnn"))
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        condition = CONDITION.format(backend=backend)
        rows = pd.read_sql(
            f"select * from published where {condition} and reparam in ('n/a', 'yes') and count_status = 'ok'", db
        )
    rows = rows[rows["model"].isin(cnn)]
    rows["spec"] = rows["model"] + rows["reparam"].map({"yes": "+reparam", "n/a": ""})
    return rows.reset_index(drop=True)


def h200_measured(store: str, backend: str = "eager") -> pd.DataFrame:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return pd.read_sql(
            f"select model as spec, resolution, batch, samples_per_s as h200_samples_per_s "
            f"from measurements where status = 'ok' and {MEASURED.format(backend=backend)}",
            db,
        )


def _start(backend: str, profile: str | None, targets: dict | None = None) -> None:
    global _PROFILE, _BACKEND, _TARGETS
    import torch

    torch.set_num_threads(1)
    _BACKEND, _PROFILE, _TARGETS = backend, profile, targets or {}


def _predictor(channels_last: bool):
    """The H200 predictor of the layout (``select_profile``'s, or the given profile), loaded once per process; an
    older checkout's (before ``predict.selection``) for a "before" run."""
    if channels_last not in _PREDICTORS:
        try:
            from utilscope.predict.fit_cache import load_predictor
            from utilscope.predict.selection import select_profile

            path = select_profile("h200", _PROFILE, "amp", _BACKEND, channels_last)
        except ImportError:  # an older checkout: one amp profile for both layouts
            from utilscope.predict.predictor import load_predictor, select_profile

            path = select_profile("h200", _PROFILE, "amp", _BACKEND)
        _PREDICTORS[channels_last] = load_predictor(path)
    return _PREDICTORS[channels_last]


def _predict(task: tuple[str, int, int, str, tuple[str, ...]]) -> list[dict]:
    """One (model, resolution, batch, layout), counted once, predicted on each GPU (``Predictor.predict_on``)."""
    from utilscope.hardware.specs import get_spec
    from utilscope.predict.features import Gpu

    spec, resolution, batch, layout, gpus = task
    targets = [_TARGETS[gpu] if gpu in _TARGETS else Gpu.from_spec(get_spec(gpu), "fp16") for gpu in gpus]
    channels_last = layout == "channels_last"
    try:
        predictor = _predictor(channels_last)
        predictions = predictor.predict_on(spec, batch, targets, resolution, _BACKEND, "amp", channels_last)
    except Exception as exc:  # noqa: BLE001 - a row that cannot be counted or predicted is reported, not fatal
        return [
            {
                "spec": spec,
                "resolution": resolution,
                "batch": batch,
                "memory_format": layout,
                "gpu": gpu,
                "error": str(exc)[:200],
            }
            for gpu in gpus
        ]
    return [
        {
            "spec": spec,
            "resolution": resolution,
            "batch": batch,
            "memory_format": layout,
            "gpu": gpu,
            "predicted_samples_per_s": p.samples_per_s,
            "bound": p.bound,
            "extrapolated": p.extrapolated,
        }
        for gpu, p in zip(gpus, predictions, strict=True)
    ]


def anchor_targets(rows: pd.DataFrame, backend: str) -> tuple[dict, pd.DataFrame]:
    """Per table and anchor set, its GPU fitted to the table's anchor rows (``predict.anchors.fit_anchors``), keyed
    by the label ``GPU|TABLE|SET``; and the rows again for each fit, their ``gpu`` that label."""
    from utilscope.hardware.specs import get_spec
    from utilscope.predict.anchors import Anchor, fit_anchors
    from utilscope.predict.features import Gpu

    _start(backend, _PROFILE)
    fitted, extra = {}, []
    for name, part in rows.groupby("source_file"):
        gpu, layout = part["gpu"].iloc[0], part["memory_format"].iloc[0]
        for label, models in ANCHOR_SETS.items():
            chosen = part[part["model"].isin(models) & (part["resolution"] == ANCHOR_RESOLUTION)]
            chosen = chosen.drop_duplicates("model")
            anchors = [
                Anchor(r.spec, int(r.batch), float(r.samples_per_s), int(r.resolution)) for r in chosen.itertuples()
            ]
            base = Gpu.from_spec(get_spec(gpu), "fp16")
            predictor = _predictor(layout == "channels_last")
            fit = fit_anchors(predictor, anchors, base, "amp", backend, layout == "channels_last")
            key = f"{gpu}|{name}|{label}"
            fitted[key] = fit.target
            print(f"{name}: {' '.join(fit.describe())}", file=sys.stderr, flush=True)
            extra.append(part.assign(gpu=key, anchor_set=label))
    return fitted, pd.concat(extra)  # the rows keep their index (a --sample keeps the same rows of each)


def predict_all(
    rows: pd.DataFrame,
    measured: pd.DataFrame,
    jobs: int,
    backend: str,
    profile: str | None,
    targets: dict | None = None,
) -> pd.DataFrame:
    own = measured[["spec", "resolution", "batch"]].assign(gpu="h200_sxm", memory_format="contiguous")
    wanted = pd.concat([rows[["spec", "resolution", "batch", "memory_format", "gpu"]], own])
    tasks = [
        (spec, int(res), int(batch), layout, tuple(sorted(set(part["gpu"]))))
        for (spec, res, batch, layout), part in wanted.groupby(["spec", "resolution", "batch", "memory_format"])
    ]
    results = []
    with ProcessPoolExecutor(jobs, initializer=_start, initargs=(backend, profile, targets)) as pool:
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
        "Spearman": spearmanr(predicted, measured).statistic if len(error) > 2 else np.nan,  # a rank needs rows
    }


def best_constant(measured: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``base`` times the one constant of least absolute log error against ``measured`` (the oracle)."""
    return base * np.exp(np.median(np.log(measured / base)))


def baselines(part: pd.DataFrame, gpu: str) -> dict:
    """The protocol's baselines on the rows with an H200 measurement: peak ratio, bandwidth ratio, best constant."""
    from utilscope.hardware.specs import get_spec

    source, target = get_spec("h200_sxm"), get_spec(gpu)
    both = part.dropna(subset=["h200_samples_per_s"])
    h200, table = both["h200_samples_per_s"].to_numpy(), both["samples_per_s"].to_numpy()
    return {
        "peak ratio": scores(table, h200 * target.peak_tflops("fp16") / source.peak_tflops("fp16")),
        "bandwidth ratio": scores(table, h200 * target.memory_bandwidth_gbs / source.memory_bandwidth_gbs),
        "best constant (oracle)": scores(table, best_constant(table, h200)),
        "transfer, same rows": scores(table, both["predicted_samples_per_s"].to_numpy()),
    }


def predicted_table(
    store: str, backend: str, jobs: int, profile: str | None = None, anchored: bool = False, sample: int | None = None
) -> pd.DataFrame:
    """Every row of the tables with its prediction (and its H200 measurement where there is one), the H200's own
    rows as a table of their own, and with ``anchored`` every row again per anchor set (``anchor_set``)."""
    global _PROFILE
    _PROFILE = profile
    rows, measured = published_rows(store, backend), h200_measured(store, backend)
    targets = {}
    if anchored:
        targets, again = anchor_targets(rows, backend)
    if sample:  # a seeded subset of each table's rows, for a quick look while designing (never for a score)
        rows = rows.groupby("source_file").sample(frac=1.0, random_state=0).groupby("source_file").head(sample)
        measured = measured.sample(min(sample, len(measured)), random_state=0)
        again = again[again.index.isin(rows.index)] if anchored else None
    if anchored:
        rows = pd.concat([rows.assign(anchor_set=""), again], ignore_index=True)
    predicted = predict_all(rows, measured, jobs, backend, profile, targets)
    keys = ["spec", "resolution", "batch", "memory_format", "gpu"]
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
    columns = min(4, len(parts))
    lines = -(-len(parts) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 4.2 * lines), squeeze=False)
    for ax in axes.flat[len(parts) :]:
        ax.set_visible(False)
    for ax, (name, part) in zip(axes.flat, parts, strict=False):
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


def score_lines(table: pd.DataFrame, anchor_set: pd.Series) -> pd.DataFrame:
    """Per table: the transfer's scores, the baselines', and each anchor set's over the rows of other models."""
    lines = []
    for name, part in table[anchor_set == ""].groupby("source_file"):
        measured, predicted = part["samples_per_s"].to_numpy(), part["predicted_samples_per_s"].to_numpy()
        lines.append({"table": name, "method": "transfer", **scores(measured, predicted)})
        if part["gpu"].iloc[0] != "h200_sxm" and part["h200_samples_per_s"].notna().any():
            lines += [
                {"table": name, "method": method, **s} for method, s in baselines(part, part["gpu"].iloc[0]).items()
            ]
        for label, models in ANCHOR_SETS.items():
            fitted = table[(anchor_set == label) & (table["source_file"] == name) & ~table["model"].isin(models)]
            if len(fitted):
                measured, predicted = fitted["samples_per_s"].to_numpy(), fitted["predicted_samples_per_s"].to_numpy()
                lines.append({"table": name, "method": f"{label} ({', '.join(models)})", **scores(measured, predicted)})
    return pd.DataFrame(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--out", help="write the per-row predictions here (CSV); needed unless --from-csv")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--figure", help="draw predicted against published samples/s, a panel per table (PNG)")
    parser.add_argument(
        "--from-csv", help="the per-row predictions of an earlier run (its --out) instead of predicting again"
    )
    parser.add_argument(
        "--anchors", action="store_true", help="also score the anchored fits of each table (ANCHOR_SETS)"
    )
    parser.add_argument("--sample", type=int, help="a seeded N rows of each table only: a quick look, not a score")
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
        table = predicted_table(args.store, args.backend, args.jobs, args.profile, args.anchors, args.sample)
        table.to_csv(args.out, index=False)
    table = table.dropna(subset=["predicted_samples_per_s"])
    anchor_set = table["anchor_set"].fillna("") if "anchor_set" in table else pd.Series("", index=table.index)
    if args.figure:
        figure(table[anchor_set == ""], args.figure)
    print(score_lines(table, anchor_set).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    errors = table["error"].notna().sum() if "error" in table else 0
    print(f"{errors} rows could not be counted; per-row predictions in {args.out}")


if __name__ == "__main__":
    main()
