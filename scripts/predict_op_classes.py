"""`utilscope predict`'s time per op class against the profiler's, for the 8 torchvision CNNs whose op classes the
H200 survey attributed at batch 256 on `graph` (data/h200/survey_op_classes.csv: kernel time per class from torch's
profiler), or for the `utilscope layers --json` runs in a folder (``--layers``, scripts/h200_predict_layers.sh,
scripts/gpu_predict_layers.sh). Prints, per model and op class, measured and predicted ms and their ratio, then the
totals per class; with ``--layers`` also the layers (joined by name) whose predicted time is furthest from the
measured one. The shipped profile the registry picks for the GPU and condition predicts (default: the H200's fp16
on channels_last; give the condition the runs were timed in); no network here was used in fitting it.

    python3 scripts/predict_op_classes.py [--layers DIR] [--gpu h100_sxm] [--precision amp] [--no-channels-last]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pandas as pd

from utilscope.files import read_json
from utilscope.predict import fit_cache, selection
from utilscope.present.markdown import markdown

MEASURED = Path(__file__).resolve().parent.parent / "data" / "h200" / "survey_op_classes.csv"
FORMATS = {"measured_ms": ".3f", "predicted_ms": ".3f", "ratio": ".2f"}


def layer_runs(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From `utilscope layers --json` files: (model, batch, op_class, time_ms) per class, and per layer (model,
    batch, name, op_class, measured_ms)."""
    classes, layers = [], []
    for path in sorted(folder.glob("*.json.gz")):
        doc = read_json(path, "a `utilscope layers --json` run")
        key = {"model": doc["model"], "batch": doc["batch"]}
        classes += [{**key, "op_class": c["op_class"], "time_ms": c["time_ms"]} for c in doc["classes"]]
        layers += [
            {**key, "name": x["name"], "op_class": x["op_class"], "measured_ms": x["time_ms"]}
            for x in doc["layers"]
            if x["time_ms"]
        ]
    return pd.DataFrame(classes), pd.DataFrame(layers)


def predicted_layers(
    predictor, measured: pd.DataFrame, channels_last: bool = True
) -> dict[tuple[str, int], pd.DataFrame]:
    """(model, batch) -> the predicted layers of each network ``measured`` holds, predicted once for every table, in
    the profile's precision on the layout given."""
    pairs = measured[["model", "batch"]].drop_duplicates().itertuples(index=False)
    return {
        (model, batch): pd.DataFrame(predictor.predict(model, int(batch), channels_last=channels_last).layers)
        for model, batch in pairs
    }


def worst_layers(predicted: dict, measured: pd.DataFrame, top: int = 25) -> pd.DataFrame:
    """The layers whose predicted ms differ most (in ms) from the measured ones, over all the measured models."""
    frames = [
        rows.merge(predicted[key][["name", "predicted_ms", "extrapolated"]], on="name")
        for key, rows in measured.groupby(["model", "batch"], sort=False)
    ]
    table = pd.concat(frames, ignore_index=True)
    table = table.assign(ratio=table["predicted_ms"] / table["measured_ms"])
    return table.reindex((table["predicted_ms"] - table["measured_ms"]).abs().sort_values(ascending=False).index)[:top]


def per_class(predicted: dict, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per model and op class: measured_ms, predicted_ms, ratio (predicted / measured)."""
    frames = []
    for (model, batch), rows in measured.groupby(["model", "batch"], sort=False):
        by_class = predicted[(model, batch)].groupby("op_class")["predicted_ms"].sum().rename("predicted_ms")
        both = pd.concat([rows.set_index("op_class")["time_ms"].rename("measured_ms"), by_class], axis=1)
        frames.append(both.fillna(0.0).rename_axis("op_class").reset_index().assign(model=model, batch=batch))
    table = pd.concat(frames, ignore_index=True)
    return table.assign(ratio=table["predicted_ms"] / table["measured_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=Path, help="a folder of `utilscope layers --json` runs")
    parser.add_argument("--gpu", default="h200", help="the GPU the runs were timed on (a spec table name)")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.layers:
        measured, layers = layer_runs(args.layers)
    else:
        measured, layers = pd.read_csv(MEASURED), None
        measured = measured[measured["backend"] == "graph"]
    path = selection.select_profile(args.gpu, None, args.precision, "graph", args.channels_last)
    print(f"profile: {path.name}\n")
    predictor = fit_cache.load_predictor(path)
    predicted = predicted_layers(predictor, measured, args.channels_last)
    table = per_class(predicted, measured)
    print(markdown(table[["model", "batch", "op_class", "measured_ms", "predicted_ms", "ratio"]], FORMATS))
    totals = table.groupby("op_class")[["measured_ms", "predicted_ms"]].sum()
    totals = totals.assign(ratio=totals["predicted_ms"] / totals["measured_ms"]).reset_index()
    print(f"\nAll {table['model'].nunique()} networks, per op class:\n")
    print(markdown(totals, FORMATS))
    if layers is not None:
        print("\nThe layers furthest from their measured time:\n")
        print(markdown(worst_layers(predicted, layers), FORMATS))


if __name__ == "__main__":
    main()
