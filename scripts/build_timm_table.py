"""Classify every timm architecture (utilscope.counting.architecture) into src/utilscope/models/timm_models.csv.

    python3 scripts/build_timm_table.py [--processes 2] [--only 'resnet*']

Resumable: rows already in the CSV are kept and their models skipped. The timm version the table was built with
is printed; write it into model_sets.toml ([timm] version) when you rebuild the table.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import sys
import time
from dataclasses import fields
from pathlib import Path

import pandas as pd
import timm
import torch
from timm.models import get_arch_pretrained_cfgs

from utilscope.counting import architecture
from utilscope.models import timm_sets

TABLE = Path(__file__).resolve().parents[1] / "src" / "utilscope" / "models" / timm_sets.TABLE_FILE
COLUMNS = [f.name for f in fields(architecture.Verdict)]


def done_models() -> set[str]:
    if not TABLE.exists():
        return set()
    with TABLE.open() as handle:
        return {row["model"] for row in csv.DictReader(handle)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--finish", action="store_true", help="only sort the table and add the registry columns")
    parser.add_argument("--only", default="*", help="a glob over timm names (default: every architecture)")
    args = parser.parse_args()
    if args.finish:
        finish()
        return 0
    done = done_models()
    names = [n for n in timm.list_models() if fnmatch.fnmatchcase(n, args.only) and f"timm:{n}" not in done]
    print(f"timm {timm.__version__}, torch {torch.__version__}: {len(names)} to classify, {len(done)} done")
    new_file = not TABLE.exists()
    header = COLUMNS if new_file else TABLE.read_text().splitlines()[0].split(",")
    start = time.perf_counter()
    with TABLE.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, header, restval="")
        if new_file:
            writer.writeheader()
        for i, row in enumerate(architecture.classify_all(names, args.processes), 1):
            writer.writerow(row)
            handle.flush()
            print(f"[{i}/{len(names)} {time.perf_counter() - start:.0f}s] {row['model']} {row['kind']}", flush=True)
    finish()
    return 0


def finish() -> None:
    """Sort the table by model and add what timm's registry says of each: its pretrained weights (a proxy for how
    much it is used) and the module that defines it (a fallback family)."""
    frame = pd.read_csv(TABLE, keep_default_na=False)[COLUMNS]
    names = frame["model"].str.removeprefix("timm:")
    frame["pretrained_tags"] = [len(get_arch_pretrained_cfgs(name)) for name in names]
    modules = {name: module for module in timm.list_modules() for name in timm.list_models(module=module)}
    frame["timm_module"] = [modules.get(name, "") for name in names]
    frame.sort_values("model").to_csv(TABLE, index=False, float_format="%.6g")
    print(frame["kind"].value_counts().to_string())


if __name__ == "__main__":
    sys.exit(main())
