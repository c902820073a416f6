"""Cold and warm `utilscope predict` on this machine: the whole command in a fresh process, wall time.

Cold: an empty predictor cache (``UTILSCOPE_CACHE_DIR`` a new folder), so the command fits the shipped profile's
layer models (from the rows kept beside it, ``predict/profile_rows.py``; two profiles for a network whose convs
take channels_last inputs under the amp profile) before it predicts; warm: the same command
again, the fitted predictor read from the cache. Each command counts its network, so counting is included; Python's
and torch's start are included too. Three rounds; prints each time and the medians.

    python3 benchmarks/predict_cold.py
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

# timm's benchmark condition (docs/predict.md): amp, NCHW, eager, batch 1024
TIMM_CONDITION = ["--precision", "amp", "--no-channels-last", "--backend", "eager", "--batch", "1024", "--json"]
COMMANDS = {
    "h200 graph": ["timm:resnet50", "--gpu", "h200", "--batch", "256"],
    "rtx_5090 in timm's condition": ["timm:resnet50", "--gpu", "rtx_5090", *TIMM_CONDITION],
    "every GPU": ["timm:resnet50", "--gpu", "all", "--batch", "256"],
    # its convs fed channels_last inputs take the fp16 profile's layer models: cold fits both profiles
    "convnext_tiny in timm's condition, rtx_4090": ["timm:convnext_tiny", "--gpu", "rtx_4090", *TIMM_CONDITION],
    # issue 63's: eager's host side, four batch sizes, one network counted four times
    "efficientnet_b0 eager on v100_sxm2, batch 1-256": [
        *("timm:efficientnet_b0", "--gpu", "v100_sxm2", "--precision", "amp", "--backend", "eager"),
        *("--batch", "1,8,64,256"),
    ],
}
ROUNDS = 3


def run_s(args: list[str], cache: str) -> float:
    env = {**os.environ, "UTILSCOPE_CACHE_DIR": cache}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "utilscope.cli", "predict", *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; {ROUNDS} rounds")
    for name, args in COMMANDS.items():
        cold, warm = [], []
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as cache:
                cold.append(run_s(args, cache))
                warm.append(run_s(args, cache))
        print(
            f"{name}: cold {', '.join(f'{s:.1f}' for s in cold)} s (median {statistics.median(cold):.1f}); "
            f"warm {', '.join(f'{s:.1f}' for s in warm)} s (median {statistics.median(warm):.1f})"
        )


if __name__ == "__main__":
    main()
