"""Wall time of every usage error the bad-input suite knows (issue 65: each at most 1 s on the 2-core machine): the
exit-2 cases of ``tests/bad_inputs/`` (those that run as the current user), each once as ``python3 -m utilscope.cli
...`` in a fresh process with ``OMP_NUM_THREADS=1``, in the suite's sandbox (its placeholders filled, its caches in a
temporary folder). Prints how many took over 1 s, the median and every case over the limit, slowest first.

Usage: PYTHONPATH=src python3 benchmarks/usage_errors.py [--sample N] [--seed 0] [--match TEXT] [--limit-s 1.0]
``--sample N`` times N cases drawn at random (seed ``--seed``); without it, every case; ``--match TEXT`` only those
whose command line (placeholders unfilled) holds TEXT. The machine's cores, its load
average before and after, and the torch version (read from its metadata, not imported) are printed with the table.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
CACHE_VARIABLES = ("UTILSCOPE_CACHE_DIR", "XDG_CACHE_HOME", "MPLCONFIGDIR", "TORCHINDUCTOR_CACHE_DIR")


def usage_cases() -> list:
    """The bad-input suite's exit-2 cases that need no unprivileged user."""
    sys.path.insert(0, str(TESTS))
    import test_bad_inputs

    return [case for case in test_bad_inputs.PRIVILEGED if case.code == 2]


def timed(argv: list[str], folder: Path, env: dict) -> tuple[float, int]:
    """Wall seconds and exit code of one ``utilscope ARGV`` in a fresh process."""
    begin = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "utilscope.cli", *argv], capture_output=True, cwd=folder, env=env, check=False
    )
    return time.perf_counter() - begin, done.returncode


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, help="time this many cases drawn at random (default: every case)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--match", default="", help="time only the cases whose command line holds this text")
    parser.add_argument("--limit-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    cases = [case for case in usage_cases() if args.match in case.argv]
    if args.sample:
        cases = random.Random(args.seed).sample(cases, min(args.sample, len(cases)))
    from bad_inputs import sandbox

    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "sandbox"
        folder.mkdir()
        paths = sandbox.build(folder)
        path = os.pathsep.join(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
        env.update({name: str(Path(root) / name.lower()) for name in CACHE_VARIABLES})
        env.pop("RAY_ADDRESS", None)
        print(
            f"{datetime.date.today()}, {os.cpu_count()} cores, torch {metadata.version('torch')}, Python "
            f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f} before; {len(cases)} usage errors"
        )
        results = [(*timed(shlex.split(case.argv.format(**paths)), folder, env), case.argv) for case in cases]
    slow = sorted((r for r in results if r[0] > args.limit_s), reverse=True)
    print(
        f"over {args.limit_s:g} s: {len(slow)} of {len(results)}; median "
        f"{statistics.median(r[0] for r in results):.2f} s; load average {os.getloadavg()[0]:.2f} after"
    )
    for seconds, code, case in slow:
        print(f"  {seconds:5.2f} s  exit {code}  {case}")
    wrong = [r for r in results if r[1] != 2]
    for _, code, case in wrong:
        print(f"  not exit 2: exit {code}  {case}")


if __name__ == "__main__":
    main()
