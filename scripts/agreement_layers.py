"""Where a timm model and its torchvision twin differ in time, layer by layer, from `utilscope layers --json` runs
(scripts/h200_agreement.sh layers): per pair and cuDNN setting, each twin's end-to-end time, the time per op class,
and the convolutions (the same sequence of shapes in both libraries) whose times differ most. With the `inference`
stage's `utilscope profile --json` runs, also the twins' throughput ratio measured in one call beside the surveys';
with the `inference-layers` stage's runs, the time per op class of the pairs that stay apart on `inference`.

    python3 scripts/agreement_layers.py [--dir benchmarks/results/agreement/h200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from utilscope.files import read_json
from utilscope.present.markdown import markdown

ROOT = Path(__file__).resolve().parents[1]
PAIRS = {
    "timm:efficientnet_b0": "torchvision:efficientnet_b0",
    "timm:efficientnet_b1": "torchvision:efficientnet_b1",
    "timm:mnasnet_050": "torchvision:mnasnet0_5",
    "timm:vgg11": "torchvision:vgg11",
    "timm:vgg19": "torchvision:vgg19",
    "timm:resnet152": "torchvision:resnet152",
}
# timed one after the other on `inference` (the BatchNorm folding fixed: MobileNetV3-L's and RegNetY-16/32GF's runs,
# made while timm's BatchNormAct2d stayed unfolded, are kept in h200/bn-unfolded/, out of these tables)
INFERENCE_PAIRS = {
    "timm:convnext_small": "torchvision:convnext_small",
    "timm:resnext50_32x4d": "torchvision:resnext50_32x4d",
    "timm:convnext_tiny": "torchvision:convnext_tiny",
    # apart by 6-9% on `inference` in the surveys, within 1% on `graph` at 256
    "timm:regnetx_016": "torchvision:regnet_x_1_6gf",
    "timm:regnetx_160": "torchvision:regnet_x_16gf",
    "timm:wide_resnet101_2": "torchvision:wide_resnet101_2",
}
# the inference pairs that stay apart when timed in one call (and agree on `graph`): timed region by region
# (MobileNetV3-L's and RegNetY-16GF's runs found the BatchNorm folding bug: timm's side ran with it unfolded)
INFERENCE_LAYER_PAIRS = {
    "timm:mobilenetv3_large_100": "torchvision:mobilenet_v3_large",
    "timm:regnety_160": "torchvision:regnet_y_16gf",
    "timm:regnetx_016": "torchvision:regnet_x_1_6gf",
    "timm:regnetx_160": "torchvision:regnet_x_16gf",
}
STORES = {"timm": ROOT / "data/h200/timm.csv", "torchvision": ROOT / "data/h200/survey.csv"}
SETTINGS = ("autotune", "depthwise-heuristic")


def load(folder: Path, model: str, setting: str) -> dict | None:
    path = folder / f"{model.replace(':', '_')}_{setting}.json.gz"
    return read_json(path, "a `utilscope layers --json` run") if path.is_file() else None


def totals(pairs: list[tuple[str, str, str, dict, dict]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "timm": a_name,
                "setting": setting,
                "timm ms": a["end_to_end_ms"],
                "torchvision ms": b["end_to_end_ms"],
                "ratio": a["end_to_end_ms"] / b["end_to_end_ms"],
            }
            for a_name, _, setting, a, b in pairs
        ]
    )


def per_class(a: dict, b: dict) -> pd.DataFrame:
    """Milliseconds per op class in each twin, and timm's minus torchvision's."""
    times = {
        label: pd.Series({c["op_class"]: c["time_ms"] for c in doc["classes"]})
        for label, doc in (("timm ms", a), ("torchvision ms", b))
    }
    frame = pd.DataFrame(times).fillna(0.0).rename_axis("op_class")
    return frame.assign(difference_ms=frame["timm ms"] - frame["torchvision ms"]).sort_values("difference_ms")


def conv_differences(a: dict, b: dict, top: int = 5) -> pd.DataFrame | None:
    """The convolutions in order, paired by position (None if the two sequences' shapes differ), most different
    first."""
    convs = [[layer for layer in doc["layers"] if layer["op_class"].endswith("_conv")] for doc in (a, b)]
    if len(convs[0]) != len(convs[1]) or any(
        x["input_shapes"] != y["input_shapes"] for x, y in zip(*convs, strict=True)
    ):
        return None
    frame = pd.DataFrame(
        [
            {
                "timm layer": x["name"],
                "torchvision layer": y["name"],
                "op_class": x["op_class"],
                "input": "x".join(map(str, x["input_shapes"][0])),
                "timm ms": x["time_ms"],
                "torchvision ms": y["time_ms"],
            }
            for x, y in zip(*convs, strict=True)
        ]
    )
    frame["difference_ms"] = frame["timm ms"] - frame["torchvision ms"]
    return frame.reindex(frame["difference_ms"].abs().sort_values(ascending=False).index).head(top)


def inference_ratios(folder: Path) -> pd.DataFrame:
    """Per inference pair measured in one call: each twin's samples/s at batch 256, their ratio, and the ratio of
    the two surveys' rows (measured on different days)."""
    surveys = pd.concat(pd.read_csv(path) for path in STORES.values())
    surveys = surveys[(surveys["backend"] == "inference") & (surveys["batch"] == 256) & (surveys["status"] == "ok")]
    surveyed = surveys.set_index("model")["samples_per_s"]
    rows = []
    for a_name, b_name in INFERENCE_PAIRS.items():
        a, b = (load(folder, name, "inference") for name in (a_name, b_name))
        if not (a and b):
            continue
        a_rate, b_rate = (doc["rows"][0]["samples_per_s"] for doc in (a, b))
        rows.append(
            {
                "timm": a_name,
                "timm samples/s": a_rate,
                "torchvision samples/s": b_rate,
                "ratio, one call": a_rate / b_rate,
                "ratio, the surveys": surveyed.get(a_name, float("nan")) / surveyed.get(b_name, float("nan")),
            }
        )
    return pd.DataFrame(rows)


def report(folder: Path) -> str:
    runs = [(a, b, s) for a, b in PAIRS.items() for s in SETTINGS]
    runs += [(a, b, "inference-layers") for a, b in INFERENCE_LAYER_PAIRS.items()]
    pairs = [(a, b, s, load(folder, a, s), load(folder, b, s)) for a, b, s in runs]
    pairs = [p for p in pairs if p[3] and p[4]]
    if not pairs:
        raise SystemExit(f"no pair of runs in {folder}: run scripts/h200_agreement.sh on the GPU first")
    ms = {"timm ms": ".4f", "torchvision ms": ".4f", "difference_ms": "+.4f", "ratio": ".3f"}
    parts = [markdown(totals(pairs), ms)]
    for a_name, b_name, setting, a, b in pairs:
        parts += [f"### {a_name} / {b_name}, {setting}", markdown(per_class(a, b), ms, index=True)]
        convs = conv_differences(a, b)
        parts.append("(the two conv sequences differ in shape)" if convs is None else markdown(convs, ms))
    inference = inference_ratios(folder)
    if len(inference):
        rates = {
            "timm samples/s": ",.0f",
            "torchvision samples/s": ",.0f",
            "ratio, one call": ".3f",
            "ratio, the surveys": ".3f",
        }
        parts += ["### `inference`, batch 256: the twins in one call", markdown(inference, rates)]
    return "\n\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT / "benchmarks/results/agreement/h200"))
    print(report(Path(parser.parse_args().dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
