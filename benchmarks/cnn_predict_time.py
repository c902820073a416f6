"""Time `utilscope predict` per network on this machine: the shipped H200 profile's predictor (fitted and cached
first, that time printed on its own); then, like the CLI, the objects alive are frozen (``gc.freeze``: full
collections skip them; ``--no-freeze`` leaves them); then the process's first predictions (a small model of each
library: lazy imports and first calls, printed on their own), and every model of a set at each batch size, counting
included.

    python3 benchmarks/cnn_predict_time.py [--set survey] [--batch 1,256] [--no-freeze]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings

from utilscope.models import sets
from utilscope.predict import fitting, selection
from utilscope.predict.calibrate import DeviceProfile

WARM_UP = ("torchvision:resnet18", "timm:resnet18")  # the first call of each library's path (timm's registry ...)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="survey", help="a model set (default: %(default)s, the 61 torchvision CNNs)")
    parser.add_argument("--batch", default="1,256")
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the process's objects to the cyclic collector (the library's default; the CLI freezes them)",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    path = selection.select_profile("h200", None, "fp16", "graph")
    start_s = time.perf_counter()
    predictor = fitting.fit_predictor(DeviceProfile.load(path), str(path))
    print(f"fitting the layer models from {path.name}: {time.perf_counter() - start_s:.1f} s (once per profile)")
    if not args.no_freeze:
        gc.freeze()  # as `utilscope predict` does once its predictor is loaded (utilscope/cli/predict.py)
    for model in WARM_UP:
        start_s = time.perf_counter()
        predictor.predict(model, 1)
        print(
            f"the process's first prediction of {model} at batch 1: {time.perf_counter() - start_s:.2f} s (once "
            "per process: lazy imports and first calls)"
        )
    timed = []
    for model in sets.set_members(args.set):
        for batch in (int(b) for b in args.batch.split(",")):
            start_s = time.perf_counter()
            predictor.predict(model, batch)
            timed.append((time.perf_counter() - start_s, model, batch))
    seconds = [s for s, *_ in timed]
    slowest_s, slowest, at = max(timed)
    print(
        f"{len(seconds)} predictions ({args.set}, batch {args.batch}): median {statistics.median(seconds):.2f} s, "
        f"mean {statistics.mean(seconds):.2f} s, max {slowest_s:.2f} s ({slowest} at batch {at}); "
        f"{sum(s <= 1.0 for s in seconds)} of {len(seconds)} within 1 s"
    )


if __name__ == "__main__":
    main()
