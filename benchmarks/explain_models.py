"""Explain several models on one device: per-layer attribution, op-class summary, roofline PNG, hints.

Usage: python benchmarks/explain_models.py --models torchvision:resnet50,... --backends graph,inference
           --batch 256 --precision fp16 --out DIR
Writes per (model, backend): NAME.json (everything `utilscope layers --json` prints), NAME.png (roofline),
NAME.txt (the tables `utilscope layers` prints); prints the op-class sentences and bounds last.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

from rich.console import Console

from utilscope.attribute.attribution import attribute
from utilscope.attribute.explain import explain
from utilscope.attribute.summary import class_sentences
from utilscope.present.layers_view import render_layers
from utilscope.present.roofline_plot import plot_roofline


def explain_one(model: str, backend: str, batch: int, precision: str, out_dir: Path) -> list[str]:
    start_s = time.perf_counter()
    attribution = attribute(model, batch=batch, precision=precision, backend=backend)
    explanation = explain(attribution)
    stem = f"{model.split(':')[-1]}_{backend}_b{batch}_{precision}"
    (out_dir / f"{stem}.json").write_text(json.dumps(explanation.to_dict(), default=str))
    title = f"{model} · batch {batch} · {precision} · {backend} · {attribution.device_name}"
    plot_roofline(attribution.points, attribution.roofs, attribution.ceiling_roofs, out_dir / f"{stem}.png", title)
    with (out_dir / f"{stem}.txt").open("w") as handle:
        render_layers(explanation, Console(file=handle, width=180, color_system=None), top=15)
    gap = explanation.gap or {}
    idle = "not measurable" if attribution.idle_share is None else f"{attribution.idle_share:.1%}"
    lines = [f"== {stem} ({time.perf_counter() - start_s:.0f} s)"] + class_sentences(attribution, limit=6)
    lines.append(
        f"measured {gap.get('measured_utilization', 0):.2%}, bound unfused {gap.get('unfused_utilization', 0):.2%}, "
        f"fused {gap.get('fused_utilization', 0):.2%}; idle {idle}; "
        f"rules: {sorted({f.rule for f in explanation.findings})}; notes: {attribution.notes}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="torchvision:resnet50")
    parser.add_argument("--backends", default="graph,inference")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--out", default="explain-results")
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = []
    for model in args.models.split(","):
        for backend in args.backends.split(","):
            try:
                summary += explain_one(model, backend, args.batch, args.precision, out_dir)
            except Exception:  # a benchmark run: report the failure and go on with the next model
                summary.append(f"== {model} {backend} FAILED\n{traceback.format_exc()}")
            print(summary[-1], flush=True)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
