"""FLOP utilization is defined once (``hardware.utilization``): a closed-form value, its missing-peak rule, its
elementwise use on a column, and a tripwire that no other module divides by a peak into a ``utilization``."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from utilscope.hardware.utilization import achieved_tflops, utilization

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "utilscope"
HOME = PACKAGE / "hardware" / "utilization.py"
UTILIZATION_NAME = re.compile(r"(?<!bandwidth_)utilization")  # a bandwidth utilization is bytes/s over bandwidth
PEAK_WORDS = ("peak", "ceiling", "tflops")


def test_a_resnet50_batch_at_a_known_rate_uses_a_known_share_of_the_peak():
    # 8.2e9 flops per sample x 256 samples = 2.0992e12 flops in 10 ms -> 2.0992e12 / 0.010 s = 209.92 TFLOP/s;
    # against a 989.4 TFLOP/s dense fp16 peak: 209.92 / 989.4 = 0.21216899...
    tflops = achieved_tflops(8.2e9 * 256, 10.0)
    assert tflops == pytest.approx(209.92, rel=1e-12)
    assert utilization(tflops, 989.4) == pytest.approx(209.92 / 989.4, rel=1e-12)
    assert utilization(tflops, 989.4) == pytest.approx(0.2121689913, rel=1e-9)


def test_an_unknown_peak_gives_the_callers_missing_value():
    assert utilization(1.0, None) is None
    assert utilization(1.0, 0) is None
    assert math.isnan(utilization(1.0, 0.0, missing=float("nan")))


def test_it_works_on_columns():
    # 1e12 flops in 1000 ms and 500 ms: 1 and 2 TFLOP/s; against peaks 4 and 8: 0.25 each
    tflops = achieved_tflops(pd.Series([1e12, 1e12]), pd.Series([1000.0, 500.0]))
    np.testing.assert_allclose(tflops, [1.0, 2.0])
    np.testing.assert_allclose(utilization(tflops, pd.Series([4.0, 8.0])), [0.25, 0.25])


def _named(node: ast.AST) -> str:
    return ast.unparse(node) if not isinstance(node, ast.Constant) else str(node.value)


def peak_divisions(source: str) -> list[str]:
    """Divisions by a peak (a denominator naming a peak, a ceiling or TFLOP/s) whose result is named a utilization:
    assigned to it, passed as its keyword, stored under its key, or returned by a function named for it."""
    found = []

    def check(name: str, value: ast.AST | None) -> None:
        if value is None or not UTILIZATION_NAME.search(name):
            return
        for node in ast.walk(value):
            divides = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            if divides and any(word in ast.unparse(node.right) for word in PEAK_WORDS):
                found.append(f"{name} = {ast.unparse(node)}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                check(_named(target), node.value)
        elif isinstance(node, ast.keyword) and node.arg:
            check(node.arg, node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                check(_named(key) if key is not None else "", value)
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("utilization"):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return):
                    check(node.name, inner.value)
    return found


def test_the_tripwire_sees_a_hand_made_utilization():
    assert peak_divisions("row = Row(utilization=achieved_tflops / peaks.peak_tflops)")
    assert peak_divisions('frame["utilization"] = frame["achieved_tflops"] / frame["peak_tflops"]')
    assert peak_divisions("def _utilization(flops, ms, roofs):\n    return flops / ms / (roofs.tensor_tflops * 1e12)")
    assert not peak_divisions('ratio_utilization = part["utilization", big] / part["utilization", small]')
    assert not peak_divisions("bandwidth_utilization = achieved_gbs / peaks.bandwidth_gbs")


@pytest.mark.parametrize(
    "path", sorted(p for p in PACKAGE.rglob("*.py") if p != HOME), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_divides_by_a_peak_into_a_utilization(path):
    """Utilization is ``hardware.utilization.utilization``, imported: not a division written again."""
    assert not peak_divisions(path.read_text()), peak_divisions(path.read_text())
