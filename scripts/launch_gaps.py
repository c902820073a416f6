"""Write the shipped launch gaps (``predict.fit_cache.launch_gaps``; docs/predict.md, "The launch gap, per GPU"):
per shipped profile, its own chains' gap and its GPU's, fitted over the chains of every shipped profile of that GPU
and backend, one scale per profile. `predict` composes a shipped profile's networks with its GPU's gap while the
file lists the profile at its current rows (a test fails when it does not: run this again after timing a profile
on, or after editing the code that derives its rows).

    python3 scripts/launch_gaps.py          # -> src/utilscope/predict/profiles/launch_gaps.csv, and the table
    python3 scripts/launch_gaps.py --check  # exit 1 when the shipped file is not what this would write

Fits each shipped profile's layer models where they are not cached (seconds each). ``--check`` writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from utilscope.predict import fit_cache, profiles
from utilscope.present.markdown import markdown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file; write nothing")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's solver notes
        gaps = fit_cache.launch_gaps(profiles.shipped())
    text = gaps.to_csv(index=False)
    out = fit_cache.LAUNCH_GAPS_FILE
    print(markdown(gaps.drop(columns="rows_key")))
    if args.check:
        same = out.is_file() and out.read_text() == text
        verdict = "the shipped profiles' gaps" if same else "not the shipped profiles' gaps: write it again"
        print(f"{out}: {verdict}")
        return 0 if same else 1
    out.write_text(text)
    print(f"{len(gaps)} profiles' launch gaps -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
