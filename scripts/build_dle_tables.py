"""Copy the ConvNets inference tables of NVIDIA DeepLearningExamples (TensorFlow, TensorFlow2, MXNet, PaddlePaddle,
Triton) from a clone into the CSVs of data/public/deeplearningexamples, as printed (``survey.formats.dle_readme``),
each row with its condition (``SOURCES``: what each README says; data/public/deeplearningexamples/README.md quotes
it). The PyTorch file (pytorch_convnets_inference.csv) is not written here.

    python3 scripts/build_dle_tables.py GIT_DIR [--out data/public/deeplearningexamples]

GIT_DIR: a clone (or bare git directory) of NVIDIA/DeepLearningExamples; the READMEs are read at its HEAD. Prints
the rows per file, and every skipped row or table and every GPU without a spec-table row (kept with ``gpu`` empty).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from collections import Counter
from pathlib import Path

from utilscope.survey.formats.dle_readme import read_readme

REPO = "NVIDIA/DeepLearningExamples"
TF1 = "TensorFlow/Classification/ConvNets"
TF2 = "TensorFlow2/Classification/ConvNets"
TF1_CONDITION = {
    "framework": "TensorFlow 1",
    "container": "TensorFlow 20.06-tf1-py3 NGC",
    "memory_format": "unstated",
    "data": "real: ImageNet TFRecords read in the loop (inference_benchmark.sh: --data_dir, no DALI)",
}
TF2_CONDITION = {
    "framework": "TensorFlow 2",
    "container": "tensorflow:21.09-tf2-py3 NGC",
    "backend": "tensorflow2",
    "memory_format": "unstated",
    "data": "unstated",
}
TRITON = {"memory_format": "unstated", "data": "synthetic: perf_analyzer --input-data random", "processes": "1"}
# README → (output file, model id, condition); "precision": the published name → utilscope's
SOURCES = {
    f"{TF1}/resnet50v1.5/README.md": ("tensorflow_convnets_inference.csv", "torchvision:resnet50", TF1_CONDITION),
    f"{TF1}/resnext101-32x4d/README.md": ("tensorflow_convnets_inference.csv", "timm:resnext101_32x4d", TF1_CONDITION),
    f"{TF1}/se-resnext101-32x4d/README.md": (
        "tensorflow_convnets_inference.csv",
        "timm:seresnext101_32x4d",
        TF1_CONDITION,
    ),
    f"{TF2}/efficientnet_v1/README.md": ("tensorflow_convnets_inference.csv", None, TF2_CONDITION),
    f"{TF2}/efficientnet_v2/README.md": ("tensorflow_convnets_inference.csv", "timm:efficientnetv2_s", TF2_CONDITION),
    "MxNet/Classification/RN50v1.5/README.md": (
        "mxnet_rn50_inference.csv",
        "torchvision:resnet50",
        {
            "framework": "MXNet",
            "backend": "mxnet",
            "memory_format": "unstated",
            "data": "real: data loading counted (Total IPS: data + compute; benchmark.py --mode val)",
        },
    ),
    "PaddlePaddle/Classification/RN50v1.5/README.md": (
        "paddlepaddle_rn50_inference.csv",
        "torchvision:resnet50",
        {"framework": "PaddlePaddle", "container": "PaddlePaddle NGC"},
    ),
    "PyTorch/Classification/ConvNets/triton/resnet50/README.md": (
        "triton_convnets_inference.csv",
        "torchvision:resnet50",
        {**TRITON, "framework": "PyTorch (ONNX export)", "backend": "triton-onnxruntime-tensorrt"},
    ),
    f"{TF1}/triton/README.md": (
        "triton_convnets_inference.csv",
        "torchvision:resnet50",
        {**TRITON, "framework": "TensorFlow (SavedModel)", "backend": "triton-tf-trt"},
    ),
}
EFFICIENTNET_V1 = {
    "results for EfficientNet v1-B0": "timm:efficientnet_b0",
    "for EfficientNet v1-B4": "timm:efficientnet_b4",
}
GPUS = {  # the heading's GPU → the spec-table key; a GPU missing here is kept with gpu ""
    "1x A100 40GB": "a100_sxm4_40gb",
    "1x A100 80GB": "a100_sxm4_80gb",
    "DGX-1 (1x V100 16G": "v100_sxm2",
    "DGX-1 (1x V100 32GB": "v100_sxm2",
    "NVIDIA T4": "t4",
    "NVIDIA A40": "a40",
    "NVIDIA A30": "a30",
    "NVIDIA A10 ": "a10",
}
COLUMNS = [
    "model",
    "gpu_heading",
    "gpu",
    "precision",
    "published_precision",
    "batch",
    "resolution",
    "throughput_img_s",
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "framework",
    "container",
    "backend",
    "memory_format",
    "data",
    "processes",
    "repo",
    "path",
    "commit",
    "table_heading",
]


def gpu_key(heading: str) -> str:
    keys = {key for text, key in GPUS.items() if text in heading + " "}
    return keys.pop() if len(keys) == 1 else ""


def precision(path: str, row: dict) -> tuple[str, str]:
    """(utilscope's precision, the published name) of a row, from its table's title, header or Precision cell."""
    title = row["table_heading"]
    if path.startswith("MxNet"):  # "- mixed precision" columns; the command runs --dtype float16
        return "fp16", "mixed precision (--dtype float16)"
    if "precision" in row:  # Triton: the Precision column, TensorRT engines
        return {"FP16": "fp16"}[row["precision"]], row["precision"]
    published = title.split(" Inference")[0]
    if published == "FP16":  # TF2 EfficientNet: the inference scripts run --use_amp; Paddle-TRT: an FP16 engine
        return ("amp" if path.startswith(TF2) else "fp16"), published
    return {"FP32": "fp32", "TF32": "tf32", "Mixed Precision": "amp", "INT8": "int8"}[published], published


def records(path: str, text: str, commit: str) -> tuple[list[dict], list[str]]:
    """The CSV rows of one README, and its skipped rows and tables."""
    _, model, condition = SOURCES[path]
    tables = read_readme(text, path)
    section = None
    out = []
    lines = text.splitlines()
    for row in tables.rows:
        if model is None:  # EfficientNet v1: the model is the "Inference performance results for ..." heading's
            section = next(h for h in reversed(lines[: row["line"]]) if h.startswith("#### Inference performance"))
            row_model = next(m for text_, m in EFFICIENTNET_V1.items() if text_ in section)
        else:
            row_model = model
        utilscope_precision, published = precision(path, row)
        backend = condition.get("backend")
        if path.startswith(TF1) and "triton" not in path:
            backend = "tensorflow+xla" if row["table_heading"].endswith("+ XLA") else "tensorflow"
        if path.startswith("Paddle"):
            trt = row["gpu_heading"].startswith("Paddle-TRT")
            backend = "paddle-tensorrt" if trt else "paddle"
            condition = {
                **condition,
                "memory_format": "unstated",
                "data": "synthetic: no data preprocessing (scripts/inference)"
                if trt
                else "unstated (--run-scope eval_only)",
            }
        resolution = row.get("resolution", "")
        out.append(
            {
                "model": row_model,
                "gpu_heading": row["gpu_heading"],
                "gpu": gpu_key(row["gpu_heading"]),
                "precision": utilscope_precision,
                "published_precision": published,
                "batch": row["batch"],
                "resolution": resolution.split("x")[0] if resolution else "224",
                "throughput_img_s": row["throughput"],
                **{
                    f"{c}_ms": row.get(c, "")
                    for c in ("latency_avg", "latency_p50", "latency_p90", "latency_p95", "latency_p99")
                },
                "framework": condition["framework"],
                "container": _container(row, condition),
                "backend": backend,
                "memory_format": condition["memory_format"],
                "data": condition["data"],
                "processes": "1",
                "repo": REPO,
                "path": path,
                "commit": commit,
                "table_heading": row["table_heading"] or row["gpu_heading"],
            }
        )
    return out, tables.skipped_rows + tables.skipped_tables


def _container(row: dict, condition: dict) -> str:
    if condition["framework"] == "MXNet":  # per GPU, as each section says
        return "mxnet-22.10-py3 NGC" if "A100" in row["gpu_heading"] else "mxnet-20.12-py3 NGC"
    if row["gpu_heading"].startswith("Paddle-TRT"):
        return "unstated"
    return condition.get("container", "unstated")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--out", default="data/public/deeplearningexamples")
    args = parser.parse_args(argv)
    git = ["git", f"--git-dir={args.git_dir}"]
    commit = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
    files: dict[str, list[dict]] = {}
    for path, (name, _, _) in SOURCES.items():
        text = subprocess.check_output([*git, "show", f"{commit}:{path}"], text=True)
        rows, skipped = records(path, text, commit)
        files.setdefault(name, []).extend(rows)
        for why in skipped:
            print(f"skipped: {why}")
    for name, rows in files.items():
        with open(Path(args.out) / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"{name}: {len(rows)} rows")
        for (gpu, heading), n in sorted(Counter((r["gpu"], r["gpu_heading"]) for r in rows).items()):
            if not gpu:
                print(f"  no spec-table row: {heading!r}: {n} rows (kept, gpu empty)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
