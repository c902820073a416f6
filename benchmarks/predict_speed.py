"""Prediction speed of the shipped H200 mbv3 predictor on this machine (target: >= 10,000 architectures/s).

Samples architectures (seed 1), keeps those the shipped latency table covers, and times ``Predictor.predict`` over
them, three times; prints architectures per second. Run: python3 benchmarks/predict_speed.py
"""

import platform
import time

from utilscope.nas.predictor import covered, load_predictor, shipped_profile
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.space import get_space

ARCHITECTURES = 10_000
BATCH = 256


def main() -> None:
    predictor = load_predictor(shipped_profile("h200", "mbv3"))
    sampled = sample_architectures(get_space("mbv3"), 4 * ARCHITECTURES, seed=1)
    archs = [arch for arch in sampled if covered(predictor.table, arch, BATCH)][:ARCHITECTURES]
    print(f"{platform.processor() or platform.machine()}; {len(archs)} architectures, batch {BATCH}")
    for run in range(3):
        start_s = time.perf_counter()
        predictor.predict(archs, BATCH)
        elapsed_s = time.perf_counter() - start_s
        print(f"run {run + 1}: {elapsed_s:.3f} s, {len(archs) / elapsed_s:,.0f} architectures/s")


if __name__ == "__main__":
    main()
