"""The timm survey's CNNs (`timm-cnn`) whose conv/linear FLOPs sit >= 10% in layers with unaligned channels (not
multiples of 8; the image's 3 channels do not count), at their survey resolution, and what `advise`'s padding pass
makes of each: groups padded, unaligned share after, FLOPs added, largest output difference (fp32, CPU, random
weights seeded 0). Writes ``benchmarks/results/advise/timm_unaligned.csv``: the list `scripts/h200_advise.sh
LIMIT timm` measures the padding gain of (docs/advise.md).

    python3 scripts/timm_unaligned.py [--threshold 0.10] [--pad-gflops G]   # all 649: 8 minutes, 13 GB on 2 cores
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pandas as pd
import torch

from utilscope.advise.padding import pad_channels, verify
from utilscope.advise.rewrites import unaligned_share
from utilscope.counting.counter import count
from utilscope.errors import ModelError
from utilscope.models import zoo
from utilscope.models.sets import set_members

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "src/utilscope/models/timm_models.csv"
OUT = ROOT / "benchmarks/results/advise/timm_unaligned.csv"
MULTIPLE = 8
# pad_error stays a column when no model has one
COLUMNS = [
    "model",
    "resolution",
    "gflops",
    "unaligned_share",
    "groups_padded",
    "unaligned_after",
    "flops_added",
    "max_output_difference",
    "pad_error",
]


def padded_row(model: torch.nn.Module, flops: int, resolution: int) -> dict:
    """The padding pass on the model (``flops`` per sample) at ``resolution``: groups padded, unaligned share
    after, FLOPs added."""
    x = torch.randn(1, 3, resolution, resolution)
    try:
        result = pad_channels(model, x, MULTIPLE)
    except ModelError as exc:  # a script over a zoo: record why the pass cannot run on this model and go on
        return {"pad_error": str(exc)}
    if result.nothing_to_do:
        return {"groups_padded": 0, "unaligned_after": None, "flops_added": 0.0, "max_output_difference": 0.0}
    after = count(result.model, resolution=resolution)
    return {
        "groups_padded": sum(1 for g in result.groups if g.added_channels),
        "unaligned_after": unaligned_share(after, MULTIPLE, result.model),
        "flops_added": after.total.flops / flops - 1,
        "max_output_difference": verify(model, result.model, x, rtol=float("inf")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.10)
    parser.add_argument(
        "--pad-gflops",
        type=float,
        default=float("inf"),
        help="run the pass (a CPU forward) only on models up to this many GFLOPs per image (default: every model)",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    table = pd.read_csv(TABLE).set_index("model")
    rows = []
    for spec in set_members("timm-cnn"):
        resolution = int(table.loc[spec, "resolution"])
        torch.manual_seed(0)  # the weights the padding pass is checked with
        model = zoo.build_model(zoo.parse_spec(spec), resolution).eval()
        counted = count(model, resolution=resolution)
        share, flops = unaligned_share(counted, MULTIPLE, model), counted.total.flops
        if share < args.threshold:
            continue
        row = {"model": spec, "resolution": resolution, "gflops": flops / 1e9, "unaligned_share": share}
        if flops / 1e9 <= args.pad_gflops:
            row.update(padded_row(model, flops, resolution))
        rows.append(row)
        print(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(OUT, index=False)
    print(f"{len(rows)} of {len(set_members('timm-cnn'))} timm CNNs at or above {args.threshold:.0%}: {OUT}")


if __name__ == "__main__":
    main()
