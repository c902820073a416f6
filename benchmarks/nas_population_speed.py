"""`nas predict --gpu v100_sxm2`'s speed: a population of new mbv3 architectures (all 25 resolutions, 128-224) on a
GPU predicted by transfer from the H200's device profile, at batch 32 on `graph` (``--batch``, ``--backend``: eager
adds the host side, the shipped host profile's calls).

Three populations of 5,000 architectures (seeds 1, 2, 3), each predicted by a fresh ``PopulationPredictor`` (cold:
every distinct layer of the population built, traced and timed), then the same population again (warm: the layers
known, as in a search that asks again). The device profile's predictor is loaded first (cached by `predict`).
Prints architectures per second per run.

    OMP_NUM_THREADS=1 python3 benchmarks/nas_population_speed.py [--batch 32] [--backend graph|eager]
"""

import argparse
import platform
import time

import torch

from utilscope.nas.population import population_predictor
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.spaces import get_space

ARCHITECTURES = 5_000
GPU = "v100_sxm2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--backend", default="graph", choices=("graph", "eager"))
    args = parser.parse_args()
    space = get_space("mbv3")
    population_predictor("mbv3", GPU, args.batch, backend=args.backend)  # loads (or fits and caches) the profile
    print(
        f"{platform.processor() or platform.machine()}; torch {torch.__version__}; mbv3 on {GPU}, batch {args.batch}, "
        f"{args.backend}"
    )
    for seed in (1, 2, 3):
        archs = sample_architectures(space, ARCHITECTURES, seed)
        predictor = population_predictor("mbv3", GPU, args.batch, backend=args.backend)
        for run in ("cold", "warm"):
            start_s = time.perf_counter()
            predictor.predict_frame(archs)
            elapsed_s = time.perf_counter() - start_s
            print(
                f"seed {seed}, {run}: {ARCHITECTURES} architectures ({len(predictor.layers)} distinct layers) in "
                f"{elapsed_s:.2f} s: {ARCHITECTURES / elapsed_s:,.0f} architectures/s"
            )


if __name__ == "__main__":
    main()
