"""The design choices (utilscope.counting.design) of every timm-cnn member and of the curated torchvision survey,
one row per model, into data/timm_design.csv: what docs/findings-timm.md relates utilization to.

    python3 scripts/build_timm_design.py [--processes 2]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path

import pandas as pd

from utilscope.counting.design import design
from utilscope.models import sets as model_sets
from utilscope.models import zoo

OUT = Path(__file__).resolve().parents[1] / "data" / "timm_design.csv"


def row(model_id: str) -> dict:
    spec = zoo.parse_spec(model_id)
    resolution = zoo.native_resolution(spec)
    module, _ = zoo.build_on_meta(spec, resolution)
    return {"model": model_id, "resolution": resolution, **asdict(design(module, resolution))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    models = model_sets.set_members("timm-cnn") + model_sets.default_survey()
    with get_context("spawn").Pool(args.processes, maxtasksperchild=20) as pool:
        rows = pool.map(row, models, chunksize=4)
    pd.DataFrame(rows).to_csv(OUT, index=False, float_format="%.6g")
    print(f"{len(rows)} models -> {OUT.relative_to(OUT.parents[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
