"""How well `predict --gpu` predicts measurements of GPUs of the spec table, from a CSV of them: per GPU, zero-shot
and with one anchor (the anchor model's row of that GPU at the same batch, fitted as `predict --anchor` does), beside
the GPU's best constant times our prediction (an oracle: what is left once the GPU's bias is gone). The harness of
the hidden data-center test (docs/predict.md, "The GPUs people rent: protocol"): amp, channels_last, eager, batches
of 64 and more, one ResNet-50 anchor at the same batch.

    python benchmarks/predict_measured.py MEASURED.csv [--out rows.csv] [--anchor-model SPEC ...]
        [--min-batch 64] [--profile JSON] [--h200 STORE]

MEASURED.csv: columns gpu,model,batch,samples_per_s (a GPU of `utilscope devices`, a model spec `predict` takes),
and optionally precision (default amp), layout (channels_last or contiguous; default channels_last), backend
(default eager), res (default: the model's native resolution) and source. ``--h200 STORE`` adds the protocol's
oracle: the GPU's best constant times the H200's measurement of the row in the same condition, where the store has
one. With PYTHONPATH naming another checkout's ``src`` (the frozen commit's), the same run scores that checkout's
`predict`; a checkout without anchors scores zero-shot only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sqlite3
import sys

import pandas as pd

REQUIRED = ("gpu", "model", "batch", "samples_per_s")
DEFAULTS = {"precision": "amp", "layout": "channels_last", "backend": "eager", "res": 0, "source": ""}
CONDITION = ["precision", "layout", "backend", "res"]
LAYOUTS = ("channels_last", "contiguous")
LAYOUT_NAMES = {"nhwc": "channels_last", "nchw": "contiguous"}  # as timm's tables name them
ANCHOR_MODELS = ("timm:resnet50", "torchvision:resnet50")  # the protocol's ResNet-50, by either zoo's name


class BadInput(Exception):
    """A CSV this script cannot score: one line, exit 2."""


def read_measured(path: str, min_batch: int) -> pd.DataFrame:
    """The CSV's rows at ``min_batch`` and more, each with its condition and its GPU's spec-table key."""
    try:
        rows = pd.read_csv(path, dtype={"model": str, "gpu": str})
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: {' '.join(str(exc).split())}") from None
    missing = [column for column in REQUIRED if column not in rows]
    if missing:
        raise BadInput(f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(REQUIRED)}[,...]")
    rows = rows.assign(**{k: rows.get(k, v) for k, v in DEFAULTS.items()}).fillna(DEFAULTS)
    for column in ("samples_per_s", "batch", "res"):
        rows[column] = pd.to_numeric(rows[column], errors="coerce")
    if not ((rows["samples_per_s"] > 0) & (rows["batch"] >= 1) & (rows["res"] >= 0)).all():
        raise BadInput(f"{path}: every samples_per_s must be a positive number, every batch and res a whole one")
    rows["layout"] = rows["layout"].astype(str).str.strip().str.lower().replace(LAYOUT_NAMES)
    if not rows["layout"].isin(LAYOUTS).all():
        raise BadInput(f"{path}: layout must be one of {', '.join(LAYOUTS)} (or nhwc, nchw)")
    rows = rows.astype({"batch": int, "res": int})
    rows["gpu_key"] = rows["gpu"].map({name: gpu_key(name) for name in set(rows["gpu"])})
    rows["spec_id"] = rows["model"].map({model: spec_id(model) for model in set(rows["model"])})
    rows = rows[rows["batch"] >= min_batch].reset_index(drop=True)
    if rows.empty:
        raise BadInput(f"{path}: no row at a batch of {min_batch} or more (--min-batch)")
    return rows


def gpu_key(name: str) -> str:
    """The spec table's key of a GPU name (`utilscope devices`); BadInput naming one the table does not have, or
    a family of several ("a100")."""
    from utilscope.errors import UtilscopeError
    from utilscope.hardware import specs

    try:
        spec = specs.lookup_gpu(name) if hasattr(specs, "lookup_gpu") else specs.get_spec(name)  # older: get_spec
    except (UtilscopeError, KeyError, ValueError) as exc:
        raise BadInput(f"gpu {name!r}: {' '.join(str(exc).split())}") from None
    if spec is None:
        raise BadInput("gpu 'all': name one GPU a row")
    return spec.key


def has_anchors() -> bool:
    """Whether the checkout on the path predicts with anchors (the frozen design and later do)."""
    from utilscope.predict.run import PredictRequest

    return "anchors" in {f.name for f in dataclasses.fields(PredictRequest)}


def request(models, gpu: str, batch: int, condition: tuple, profile: str | None, anchors=()):
    from utilscope.predict.run import PredictRequest

    precision, layout, backend, res = condition
    fields = {"anchors": tuple(anchors)} if anchors else {}
    return PredictRequest(
        tuple(models), gpu, profile, (int(batch),), precision, backend, layout == "channels_last", res or None, **fields
    )


def predicted(rows: pd.DataFrame, profile: str | None, anchor=None) -> pd.DataFrame:
    """Each row's predicted samples/s (NaN where it could not be predicted, and its ``error``): one request per GPU,
    batch and condition (an older checkout takes no list of GPUs), with ``anchor`` (an ``Anchor``) fitted to it."""
    from utilscope.errors import UtilscopeError
    from utilscope.predict.run import predict_networks

    out = []
    for (gpu, batch, *condition), part in rows.groupby(["gpu_key", "batch", *CONDITION]):
        models = sorted(set(part["model"]))
        try:
            asked = request(models, gpu, batch, tuple(condition), profile, [anchor] if anchor else ())
            result = predict_networks(asked)
            speed = {p.model: p.samples_per_s for p in result.predictions}  # keyed by the spec's id
            failed = {m: text for m in models for text in result.failures if text.startswith(f"{m}: ")}
        except UtilscopeError as exc:  # one model that cannot be predicted (several: ``failures``)
            speed, failed = {}, dict.fromkeys(models, f"{','.join(models)} on {gpu}: {' '.join(str(exc).split())}")
        out.append(
            part.assign(
                predicted_samples_per_s=[speed.get(spec_id(m), math.nan) for m in part["model"]],
                error=[failed.get(m, "") for m in part["model"]],
            )
        )
    return pd.concat(out) if out else rows.assign(predicted_samples_per_s=[], error=[])


def spec_id(model: str) -> str:
    """The id a prediction names its model by (a model file's carries its hash), or the spec when it is no spec."""
    from utilscope.errors import UtilscopeError
    from utilscope.models.zoo import parse_spec

    try:
        return parse_spec(model).id
    except UtilscopeError:
        return model


def anchored(rows: pd.DataFrame, profile: str | None, anchor_models: list[str]) -> pd.DataFrame:
    """The rows of other models, per GPU, condition and batch where the GPU has a row of one of ``anchor_models``
    (the first there, by spec id: "resnet50" names torchvision's), predicted with that row as the one anchor; the
    ``anchor`` column names it. A GPU and batch without such a row is said on stderr."""
    from utilscope.predict.anchors import Anchor

    ids = [spec_id(model) for model in anchor_models]
    out = []
    for (gpu, batch, *condition), part in rows.groupby(["gpu_key", "batch", *CONDITION]):
        found = [i for i in ids if (part["spec_id"] == i).any()]
        if not found:
            print(f"no {' or '.join(ids)} row on {gpu} at batch {batch}: no anchored score there", file=sys.stderr)
            continue
        own, others = part[part["spec_id"] == found[0]], part[part["spec_id"] != found[0]]
        if len(others):
            anchor = Anchor(found[0], int(batch), float(own["samples_per_s"].iloc[0]), int(condition[3]) or None)
            out.append(predicted(others, profile, anchor).assign(anchor=found[0]))
    return pd.concat(out) if out else rows.iloc[:0].assign(predicted_samples_per_s=[], error=[], anchor=[])


def h200_measured(rows: pd.DataFrame, store: str) -> pd.Series:
    """Each row's H200 samples/s in the store, in the row's condition and resolution (a row without ``res``: its
    model's native one); NaN where the store has none."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        measured = pd.read_sql(
            "select model, resolution as res, batch, precision, backend, memory_format as layout, "
            "samples_per_s as h200 from measurements where status = 'ok'",
            db,
        )
    keys = ["model", "res", "batch", "precision", "backend", "layout"]
    measured = measured.groupby(keys, as_index=False)["h200"].median()
    native = {model: native_resolution(model) for model in set(rows["model"][rows["res"] == 0])}
    res = rows["res"].where(rows["res"] > 0, rows["model"].map(native))
    return rows.assign(res=res).merge(measured, on=keys, how="left")["h200"].set_axis(rows.index)


def native_resolution(model: str) -> float:
    """The model's native input resolution, NaN for a spec utilscope cannot build."""
    from utilscope.errors import UtilscopeError
    from utilscope.models import zoo

    try:
        return float(zoo.resolve_resolution(zoo.parse_spec(model), None))
    except UtilscopeError:
        return math.nan


def score_lines(zero: pd.DataFrame, fitted: pd.DataFrame) -> pd.DataFrame:
    from predict_gpus import best_constant, scores

    lines = []
    for gpu, part in zero.dropna(subset=["predicted_samples_per_s"]).groupby("gpu_key"):
        measured, ours = part["samples_per_s"].to_numpy(float), part["predicted_samples_per_s"].to_numpy(float)
        lines.append({"gpu": gpu, "method": "zero-shot", **scores(measured, ours)})
        lines.append(
            {"gpu": gpu, "method": "ours x best constant (oracle)", **scores(measured, best_constant(measured, ours))}
        )
        if "h200" in part and part["h200"].notna().any():
            both = part.dropna(subset=["h200"])
            seen, h200 = both["samples_per_s"].to_numpy(float), both["h200"].to_numpy(float)
            lines.append(
                {"gpu": gpu, "method": "H200 x best constant (oracle)", **scores(seen, best_constant(seen, h200))}
            )
        one = fitted[fitted["gpu_key"] == gpu].dropna(subset=["predicted_samples_per_s"])
        if len(one):
            scored = scores(one["samples_per_s"].to_numpy(float), one["predicted_samples_per_s"].to_numpy(float))
            names = ", ".join(sorted(set(one["anchor"])))
            lines.append({"gpu": gpu, "method": f"one anchor ({names}, same batch)", **scored})
    return pd.DataFrame(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measured", help="CSV: gpu,model,batch,samples_per_s[,precision,layout,backend,res,source]")
    parser.add_argument("--out", help="write every row with its predictions here (CSV)")
    parser.add_argument(
        "--anchor-model",
        action="append",
        help="the anchor's model, repeatable: the first a GPU has a row of at the batch (default: timm:resnet50, "
        "then torchvision:resnet50)",
    )
    parser.add_argument("--min-batch", type=int, default=64, help="score rows at this batch and more (default: 64)")
    parser.add_argument("--profile", help="the device profile to predict from (default: the one predict selects)")
    parser.add_argument("--h200", help="a store of H200 measurements for the protocol's oracle")
    args = parser.parse_args(argv)
    from utilscope.errors import UsageError

    try:
        rows = read_measured(args.measured, args.min_batch)
        if args.h200:
            rows["h200"] = h200_measured(rows, args.h200)
        zero = predicted(rows, args.profile)
        anchor_models = args.anchor_model or list(ANCHOR_MODELS)
        fitted = anchored(rows, args.profile, anchor_models) if has_anchors() else zero.iloc[:0].assign(anchor=[])
    except (BadInput, UsageError, sqlite3.Error, pd.errors.DatabaseError) as exc:
        print(f"predict_measured.py: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.out:
        pd.concat([zero.assign(anchor=""), fitted]).to_csv(args.out, index=False)
    for text in sorted((set(zero["error"]) | set(fitted["error"])) - {""}):
        print(f"not predicted: {text}", file=sys.stderr)
    print(score_lines(zero, fitted).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
