"""Re-render saved `utilscope layers --json` results (JSON, roofline PNG, text) with the current analysis code.

The measurement (per-layer and per-region times) is read back unchanged; roofline, bounds and hints are
recomputed. Usage: python benchmarks/rerender_explain.py DIR  (rewrites every NAME.json, NAME.png, NAME.txt)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console

from utilscope.attribute.explain import explain
from utilscope.attribute.records import attribution_from_dict
from utilscope.present.layers_view import render_layers
from utilscope.present.roofline_plot import plot_roofline


def main(directory: str) -> None:
    for path in sorted(Path(directory).glob("*.json")):
        attribution = attribution_from_dict(json.loads(path.read_text()))
        explanation = explain(attribution)
        path.write_text(json.dumps(explanation.to_dict(), default=str))
        title = (
            f"{attribution.model} · batch {attribution.batch} · {attribution.precision} · {attribution.backend} · "
            f"{attribution.device_name}"
        )
        plot_roofline(attribution.points, attribution.roofs, attribution.ceiling_roofs, path.with_suffix(".png"), title)
        with path.with_suffix(".txt").open("w") as handle:
            render_layers(explanation, Console(file=handle, width=180, color_system=None), top=15)
        print(f"{path.stem}: {len(explanation.findings)} findings")


if __name__ == "__main__":
    main(*sys.argv[1:])
