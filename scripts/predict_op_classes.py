"""`utilscope predict`'s time per op class against the profiler's, for the 8 torchvision CNNs whose op classes the
H200 survey attributed at batch 256 on `graph` (data/h200/survey_op_classes.csv: kernel time per class from torch's
profiler). Prints, per model and op class, measured and predicted ms and their ratio, then the totals per class.
The shipped H200 profile predicts; no network here was used in fitting it.

    python3 scripts/predict_op_classes.py
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from utilscope.predict import predictor as pr
from utilscope.present.markdown import markdown

MEASURED = Path(__file__).resolve().parent.parent / "data" / "h200" / "survey_op_classes.csv"
FORMATS = {"measured_ms": ".3f", "predicted_ms": ".3f", "ratio": ".2f"}


def per_class(predictor, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per model and op class: measured_ms, predicted_ms, ratio (predicted / measured)."""
    frames = []
    for (model, batch), rows in measured.groupby(["model", "batch"], sort=False):
        layers = pd.DataFrame(predictor.predict(model, int(batch)).layers)
        predicted = layers.groupby("op_class")["predicted_ms"].sum().rename("predicted_ms")
        both = pd.concat([rows.set_index("op_class")["time_ms"].rename("measured_ms"), predicted], axis=1)
        frames.append(both.fillna(0.0).rename_axis("op_class").reset_index().assign(model=model, batch=batch))
    table = pd.concat(frames, ignore_index=True)
    return table.assign(ratio=table["predicted_ms"] / table["measured_ms"])


def main() -> None:
    warnings.filterwarnings("ignore")
    measured = pd.read_csv(MEASURED)
    measured = measured[measured["backend"] == "graph"]
    predictor = pr.load_predictor(pr.select_profile("h200", None, "fp16", "graph"))
    table = per_class(predictor, measured)
    print(markdown(table[["model", "batch", "op_class", "measured_ms", "predicted_ms", "ratio"]], FORMATS))
    totals = table.groupby("op_class")[["measured_ms", "predicted_ms"]].sum()
    totals = totals.assign(ratio=totals["predicted_ms"] / totals["measured_ms"]).reset_index()
    print("\nAll 8 networks, per op class:\n")
    print(markdown(totals, FORMATS))


if __name__ == "__main__":
    main()
