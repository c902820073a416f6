"""Write the predictor's validation errors, the text `predict` and the report give beside a prediction
(``predict.profiles.validation_of``): ``src/utilscope/predict/profiles/validation_gpus.csv``, one row per GPU,
precision, memory format, backend, source of rows and torch (``profiles.VALIDATION_COLUMNS``: rows, the batch sizes,
MAPE of samples/s and the median signed error), from three kinds of scored rows, every one validation data:

- ``--timm``: timm's published tables, transferred (``benchmarks/predict_gpus.py``'s CSV: one row per published row
  with its ``predicted_samples_per_s``); source ``timm``, per torch of the tables;
- ``--dle``: NVIDIA's DeepLearningExamples rows at batch 64 and more, zero-shot (``benchmarks/predict_measured.py``'s
  CSV; its anchored rows left out); source ``dle``;
- ``--measured``: networks a profiled GPU measured itself, predicted from its own profiles
  (``scripts/validate_precisions.py --csv``: the H100's precision and eager stores, the H200's survey); source
  ``measured``.

Usage: python benchmarks/predict_errors.py [--timm RUN.csv.gz ...] [--dle ROWS.csv ...] [--measured ROWS.csv ...]
    [-o OUT.csv]
(defaults: benchmarks/results/predict/gpus/validation_network_scales.csv.gz, the current design's run on every GPU's
eager tables, docs/predict.md "Network scales"; benchmarks/results/predict/dle/rows_native_layout.csv; and
data/h100/precisions.csv, data/h100/eager.csv and data/h200/survey_validation.csv).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from utilscope.hardware.specs import detect
from utilscope.predict.profiles import VALIDATION_COLUMNS

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TIMM = [REPO / "benchmarks/results/predict/gpus/validation_network_scales.csv.gz"]
DEFAULT_DLE = [REPO / "benchmarks/results/predict/dle/rows_native_layout.csv"]
DEFAULT_MEASURED = [
    REPO / "data/h100/precisions.csv",
    REPO / "data/h100/eager.csv",
    REPO / "data/h200/survey_validation.csv",
]
DEFAULT_OUT = REPO / "src/utilscope/predict/profiles/validation_gpus.csv"
KEYS = ["gpu", "precision", "memory_format", "backend", "source", "torch"]
DLE_MIN_BATCH = 64  # NVIDIA's smaller batches ran at their loader's and host's pace (docs/predict.md)


def timm_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path, dtype={"torch": str})
    return rows.assign(source="timm", predicted=rows["predicted_samples_per_s"])


def dle_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path)
    rows = rows[rows["anchor"].isna() & (rows["batch"] >= DLE_MIN_BATCH)]
    return rows.assign(
        gpu=rows["gpu_key"],
        memory_format=rows["layout"],
        source="dle",
        torch="",
        predicted=rows["predicted_samples_per_s"],
    )


def measured_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path)
    gpus = {device: detect(device) for device in rows["device"].unique()}
    unknown = [device for device, spec in gpus.items() if spec is None]
    if unknown:
        raise SystemExit(f"predict_errors.py: {path}: {unknown} not in the spec table")
    gpu = rows["device"].map({device: spec.key for device, spec in gpus.items()})
    return rows.assign(gpu=gpu, source="measured", torch="", predicted=rows["samples_per_s_predicted"])


def batches_text(batches: pd.Series) -> str:
    """The batch sizes of a group as the text names them: "64–256" for NVIDIA's, else "1, 8, 64 and 256"."""
    values = sorted(set(batches.astype(int)))
    if len(values) > 4:
        return f"{values[0]}–{values[-1]}"
    return ", ".join(map(str, values[:-1])) + (" and " if len(values) > 1 else "") + str(values[-1])


def errors(scored: pd.DataFrame) -> pd.DataFrame:
    """Per ``KEYS``: rows, batch sizes, mean absolute percentage error, median signed error (of samples/s)."""
    error = scored["predicted"] / scored["samples_per_s"] - 1
    grouped = scored.assign(error=error, absolute=error.abs()).groupby(KEYS)
    table = grouped.agg(
        rows=("error", "size"),
        batches=("batch", batches_text),
        mape=("absolute", "mean"),
        median_error=("error", "median"),
    )
    return table.round(4).reset_index()[VALIDATION_COLUMNS]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timm", nargs="*", type=Path, default=DEFAULT_TIMM)
    parser.add_argument("--dle", nargs="*", type=Path, default=DEFAULT_DLE)
    parser.add_argument("--measured", nargs="*", type=Path, default=DEFAULT_MEASURED)
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    readers = [(timm_rows, args.timm), (dle_rows, args.dle), (measured_rows, args.measured)]
    scored = pd.concat([read(path) for read, paths in readers for path in paths], ignore_index=True)
    table = errors(scored.dropna(subset=["predicted", "samples_per_s"]))
    table.to_csv(args.out, index=False)
    print(table.to_string(index=False))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
