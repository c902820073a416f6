"""`nas predict`'s speed with and without the general model's prior, interleaved on one machine.

The shipped regnet profile is loaded twice: as shipped (block models on the general model's prior) and with its
prior removed (block models on the table alone, as before the prior). Both predict the same three sets of 10,000
newly sampled architectures (seeds 1, 2, 3, in the dataset's 0.4-3.2 GFLOPs band) at batch 256, three rounds,
alternating, so that the machine's noise falls on both alike. Prints architectures per second: median and range.
Run: python3 benchmarks/nas_prior_speed.py
"""

import dataclasses
import platform
import statistics
import time

from predict_speed import ARCHITECTURES, BATCH, sample  # the sibling benchmark's architectures and batch

from utilscope.nas.table_predictor import load_table_predictor, shipped_profile

ROUNDS = 3


def main() -> None:
    shipped = load_table_predictor(shipped_profile("h200", "regnet"))
    predictors = {"with the prior": shipped, "without it": dataclasses.replace(shipped, prior_ms={}, layer_models={})}
    warm = sample("regnet", 100, seed=9)
    for predictor in predictors.values():
        predictor.predict_frame(warm, BATCH)  # fits the layer models
    sets = [sample("regnet", ARCHITECTURES, seed) for seed in (1, 2, 3)]
    rates = {name: [] for name in predictors}
    for _ in range(ROUNDS):
        for archs in sets:
            for name, predictor in predictors.items():
                start_s = time.perf_counter()
                predictor.predict_frame(archs, BATCH)
                rates[name].append(ARCHITECTURES / (time.perf_counter() - start_s))
    print(f"{platform.processor() or platform.machine()}; regnet, {ARCHITECTURES} architectures x 3 seeds x {ROUNDS}")
    for name, values in rates.items():
        print(
            f"{name}: median {statistics.median(values):,.0f} architectures/s "
            f"(range {min(values):,.0f}-{max(values):,.0f})"
        )


if __name__ == "__main__":
    main()
