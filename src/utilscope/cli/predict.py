"""``calibrate``: time a seeded sample of layer configurations on a device into a device profile."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from utilscope.cli.common import add_cudnn_options, cudnn_settings
from utilscope.errors import UsageError
from utilscope.files import check_output_file
from utilscope.predict.calibrate import DeviceProfile, calibrate, open_profile

DEFAULT_COUNT = 2000


def add_parsers(sub) -> None:
    p = sub.add_parser("calibrate", help="time a seeded sample of CNN layer configurations into a device profile")
    p.add_argument("--out", required=True, help="the device profile (.json), resumed when it exists")
    p.add_argument("--count", type=int, default=DEFAULT_COUNT,
                   help="configurations in the sample (default: %(default)s)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default: %(default)s)")
    p.add_argument("--precision", default=None, help="fp16, bf16, tf32 or fp32 (default: fp16 on a GPU, else fp32)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    add_cudnn_options(p)
    p.set_defaults(run=cmd_calibrate)


def cmd_calibrate(args, console: Console) -> int:
    if args.count < 1:
        raise UsageError(f"--count must be at least 1, got {args.count}")
    out = check_output_file(args.out, "the device profile", (".json",))
    existing = DeviceProfile.load(out) if Path(out).exists() else None
    profile = open_profile(args.device, args.precision, cudnn_settings(args), args.seed, existing)
    start_s = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            console.print(f"{done}/{total} configurations timed in {time.perf_counter() - start_s:.0f} s")

    try:
        calibrate(profile, args.count, out, args.device, progress)
    except KeyboardInterrupt:
        kept = f"{len(profile.latency_ms)} configurations timed and {len(profile.failed)} failed are kept in {out}"
        raise KeyboardInterrupt(f"interrupted: {kept}; rerun to resume") from None
    console.print(f"{len(profile.latency_ms)} configurations timed, {len(profile.failed)} failed, on "
                  f"{profile.describe()}: {out}")  # fmt: skip
    return 0
