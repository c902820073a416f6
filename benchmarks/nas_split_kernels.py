"""What-if (validation, not shipped): the H100 eager RegNets of `data/h100/nas_eager.sqlite` with the host time of
cuDNN's per-group kernels added to `nas predict`'s latency. At batch 1 on the H100 (cuDNN 9.19) a 3x3 conv of 2
channels a group runs as one kernel per group at 8-68 groups (`benchmarks/results/h100-2026-12-08/`, docs/nas.md);
the host model prices it as one call. Each such conv here gets its groups - 1 extra launches at ``--us`` host
microseconds each (7: the sweep's host time a split kernel). Prints, per batch, the width-2 networks' median error,
the space's MAPE and Spearman, as shipped and with the extra launches.

    OMP_NUM_THREADS=1 python3 benchmarks/nas_split_kernels.py [--db data/h100/nas_eager.sqlite] [--us 7]
"""

from __future__ import annotations

import argparse
import json

import torch
from nas_general_validation import measured, predicted
from scipy.stats import spearmanr

from utilscope.models import zoo

ARCHS = "data/h200/regnet_archs.jsonl"
SPLIT_GROUPS = (2, 68)  # channels a group; the most groups seen split (docs/nas.md)


def split_launches(model_id: str) -> int:
    """The extra kernels a forward of the architecture launches: groups - 1 for each conv that splits."""
    module = zoo.build_model(zoo.parse_spec(f"{ARCHS}:{model_id.split(':')[-1]}"))
    width, most = SPLIT_GROUPS
    convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d) and m.groups > 1]
    return sum(c.groups - 1 for c in convs if c.in_channels // c.groups == width and c.groups <= most)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="data/h100/nas_eager.sqlite")
    parser.add_argument("--us", type=float, default=7.0, help="host microseconds a split kernel")
    args = parser.parse_args(argv)
    frame, gpu = measured(args.db)
    rows = predicted(frame[frame["model"].str.startswith("nas:regnet")], gpu)
    with open(ARCHS) as handle:
        widths = {arch["id"]: arch["group_width"] for arch in map(json.loads, handle)}
    extra = {model: split_launches(model) for model in rows["model"].unique()}
    rows = rows.assign(
        width=rows["model"].map(lambda model: widths[model.split(":")[-1]]),
        with_splits_ms=rows["predicted_ms"] + rows["model"].map(extra) * args.us / 1e3,
    )
    for batch, group in rows.groupby("batch"):
        for name, column in (("as shipped", "predicted_ms"), (f"+{args.us:g} us a split kernel", "with_splits_ms")):
            error = group[column] / group["latency_ms"] - 1
            print(
                f"batch {batch} {name}: width-2 median error {error[group['width'] == 2].median():+.1%}, "
                f"MAPE {error.abs().mean():.1%}, Spearman {spearmanr(group[column], group['latency_ms'])[0]:.3f}"
            )


if __name__ == "__main__":
    main()
