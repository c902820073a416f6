"""NVIDIA DeepLearningExamples' PyTorch ConvNets inference rows (``data/public/deeplearningexamples``) as the
measurements CSV of ``benchmarks/predict_measured.py``, each row in the condition NVIDIA's benchmark ran it
(``PyTorch/Classification/ConvNets/configs.yml`` at the snapshot's commit): AMP on NHWC (channels_last), FP32 and
TF32 on NCHW (contiguous), eager, ResNets and EfficientNet-B0 at 224 px, EfficientNet-B4 at 380 px; real data
loaded by PyTorch's loader in the loop (8 workers; 10 on a DGX A100), one process, batches of every size. Rows of
models utilscope cannot build (the ``dle:`` widese EfficientNets) are left out and counted.

    python benchmarks/dle_measured.py OUT.csv [--layout channels_last]

``--layout channels_last`` writes every row as channels_last: the layout utilscope's fp32 profiles were timed in,
not the one NVIDIA ran FP32 and TF32 in (a comparison of different work, said so wherever it is quoted).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

SOURCE = Path(__file__).resolve().parents[1] / "data/public/deeplearningexamples/pytorch_convnets_inference.csv"
LAYOUT = {"amp": "channels_last", "fp32": "contiguous", "tf32": "contiguous"}  # configs.yml's memory_format
RESOLUTION = {"timm:efficientnet_b4": 380}  # configs.yml's image_size; 224 for the others


def measured(layout: str | None = None) -> tuple[pd.DataFrame, int]:
    """The harness's rows, and how many rows of unbuildable models were left out."""
    rows = pd.read_csv(SOURCE)
    kept = rows[~rows["model"].str.startswith("dle:")]
    out = pd.DataFrame(
        {
            "gpu": kept["gpu"],
            "model": kept["model"],
            "batch": kept["batch"],
            "samples_per_s": kept["throughput_img_s"],
            "precision": kept["precision"],
            "layout": layout or kept["precision"].map(LAYOUT),
            "backend": "eager",
            "res": kept["model"].map(RESOLUTION).fillna(224).astype(int),
            "source": "DeepLearningExamples " + kept["table_heading"],
        }
    )
    return out, len(rows) - len(kept)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the measurements CSV to write")
    parser.add_argument("--layout", choices=("channels_last", "contiguous"), help="every row in this layout")
    args = parser.parse_args(argv)
    rows, left_out = measured(args.layout)
    rows.to_csv(args.out, index=False)
    print(f"{len(rows)} rows written to {args.out}; {left_out} rows of models utilscope cannot build left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
