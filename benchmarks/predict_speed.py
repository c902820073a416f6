"""Prediction speed of the shipped H200 predictors on this machine (target: >= 10,000 architectures/s).

For each space, three runs, each on 10,000 newly sampled architectures (seeds 1, 2, 3; regnet within the dataset's
FLOPs band), timing ``TablePredictor.predict`` at batch 256 on one predictor; prints architectures per second. The mbv3
table covers the whole space, so every layer is a table lookup. Most regnet layers are new (widths are continuous):
the layer models estimate those. They are fitted from the table once per process, before the runs, and that time
is printed on its own. Run: python3 benchmarks/predict_speed.py
"""

import platform
import time

from utilscope.nas.sampler import sample_architectures
from utilscope.nas.spaces import get_space
from utilscope.nas.table_predictor import load_table_predictor, shipped_profile

ARCHITECTURES = 10_000
BATCH = 256
FLOPS_BAND = {"mbv3": (None, None), "regnet": (4e8, 3.2e9)}  # as data/h200/*_archs.jsonl were sampled


def sample(space: str, n: int, seed: int) -> list[dict]:
    low, high = FLOPS_BAND[space]
    return sample_architectures(get_space(space), n, seed=seed, flops_min=low, flops_max=high)


def main() -> None:
    print(f"{platform.processor() or platform.machine()}; {ARCHITECTURES} architectures per run, batch {BATCH}")
    for space in ("mbv3", "regnet"):
        predictor = load_table_predictor(shipped_profile("h200", space))
        start_s = time.perf_counter()
        predictor.predict_frame(sample(space, 100, seed=99), BATCH)  # fits the layer models a missing layer needs
        first_s = time.perf_counter() - start_s
        print(f"{space}: first 100 architectures, with any layer model they need fitted: {first_s:.2f} s")
        for seed in (1, 2, 3):
            archs = sample(space, ARCHITECTURES, seed)
            start_s = time.perf_counter()
            predicted = predictor.predict_frame(archs, BATCH)
            elapsed_s = time.perf_counter() - start_s
            print(
                f"{space} seed {seed}: {elapsed_s:.3f} s, {len(archs) / elapsed_s:,.0f} architectures/s, "
                f"{predicted['estimated_layers'].mean():.1f} layers per architecture estimated"
            )


if __name__ == "__main__":
    main()
