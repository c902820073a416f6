"""What `advise`'s channel padding does to the validation models (docs/advise.md), on the CPU: per model, the
groups padded and blocked (with the reasons), the share of conv/linear FLOPs in layers with unaligned channels
before and after (the image's 3 input channels do not count: the data fixes them), the FLOPs per sample and the
parameters added, and the largest output difference (fp32, random weights seeded 0, one 224-pixel image).

    python3 scripts/padding_table.py [MODEL ...]
"""

from __future__ import annotations

import argparse
import collections
import time

import torch

from utilscope.advise.padding import pad_channels, verify
from utilscope.advise.rewrites import unaligned_share
from utilscope.counting.counter import count
from utilscope.models import zoo

MODELS = (
    "timm:rexnet_100",
    "timm:ghostnet_100",
    "timm:repghostnet_100",
    "timm:res2net50_26w_4s",
    "benchmarks/pruned_resnet50.py:build",
    "timm:resnet50",
    "timm:efficientnet_b0",
)
MULTIPLE = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    args = parser.parse_args()
    print(
        "| model | groups padded | blocked (reason x count) | unaligned FLOPs before -> after | FLOPs "
        "added | params added | max output difference | pass s |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for spec in args.models:
        torch.manual_seed(0)
        model = zoo.build_model(zoo.parse_spec(spec), 224).eval()
        x = torch.randn(1, 3, 224, 224)
        start_s = time.perf_counter()
        result = pad_channels(model, x, MULTIPLE)
        pass_s = time.perf_counter() - start_s
        before = count(model, resolution=224)
        padded = model if result.nothing_to_do else result.model
        after = count(padded, resolution=224) if not result.nothing_to_do else before
        flops, padded_flops = before.total.flops, after.total.flops
        reasons = collections.Counter(g.blocked_by for g in result.blocked)
        blocked = "; ".join(f"{reason} x{n}" for reason, n in reasons.most_common(3)) or "-"
        added = f"{result.added_params:,} ({result.added_params / sum(p.numel() for p in model.parameters()):+.1%})"
        shares = f"{unaligned_share(before, MULTIPLE, model):.1%} -> {unaligned_share(after, MULTIPLE, padded):.1%}"
        print(
            f"| {spec} | {sum(1 for g in result.groups if g.added_channels)} | {blocked} | {shares} | "
            f"{padded_flops / flops - 1:+.1%} | {added} | {verify(model, result.model, x, rtol=float('inf')):.1e} | "
            f"{pass_s:.1f} |"
        )


if __name__ == "__main__":
    main()
