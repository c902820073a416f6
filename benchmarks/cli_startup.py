"""Wall time of a usage error, ``--help`` and ``--version`` (issue 65: each at most 1 s on the 2-core machine): every
command line is run ``--runs`` times as ``python3 -m utilscope.cli ...`` in a fresh process, and its exit code, the
median and the range of its wall times, and the first line it printed on stderr are printed.

Usage: python3 benchmarks/cli_startup.py [--runs 5]
The utilscope timed is the one the child processes import: this checkout's with ``PYTHONPATH=src``, another's with
PYTHONPATH naming its ``src`` (how the numbers before a change are taken). The machine's cores, its load average
before and after, and the torch version (read from its metadata, not imported) are printed with the table.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time
from importlib import metadata

COMMANDS = (
    "predict --batch 0 timm:resnet50",
    "count --bogus",
    "survey --precision nope",
    "predict timm:resnet50 --gpu nope",
    "predict timm:resnet50 --gpu h100_sxm --backend eager --host-profile missing.json",
    "nas predict missing.jsonl --gpu h100_sxm",
    "nas search --gpu nope",
    "count timm:nope",
    "predict timm:resnet5 --gpu h100_sxm",
    "predict torchvision:resnet5 --gpu h100_sxm",
    "predict resnet5 --gpu h100_sxm",
    "predict foo:bar --gpu h100_sxm",
    "survey --models torchvision:resnet5 --dry-run",
    "--help",
    "--version",
)


def timed(command: str) -> tuple[float, int, str]:
    """Wall seconds, exit code and first stderr line of one ``utilscope COMMAND`` in a fresh process."""
    begin = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "utilscope.cli", *command.split()], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - begin
    return seconds, done.returncode, (done.stderr.splitlines() or [""])[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(
        f"{datetime.date.today()}, {os.cpu_count()} cores, torch {metadata.version('torch')}, Python "
        f"{sys.version.split()[0]}, load average {load:.2f} before"
    )
    print("| command | exit | median | range | stderr |\n|---|---:|---:|---:|---|")
    for command in COMMANDS:
        runs = [timed(command) for _ in range(args.runs)]
        seconds = [s for s, _, _ in runs]
        _, code, line = runs[-1]
        print(
            f"| `utilscope {command}` | {code} | {statistics.median(seconds):.2f} s | "
            f"{min(seconds):.2f}–{max(seconds):.2f} s | {line[:100]} |"
        )
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
