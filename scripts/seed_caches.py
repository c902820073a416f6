"""Write the cache seeds utilscope ships (``utilscope.cache.write_seed``): kind ``counts``, what ``utilscope ingest``
counts of every shipped published table, timm's and NVIDIA's (``survey/counts_seed.json.xz``), and kind
``networks``, what ``utilscope report`` counts of the shipped atlas's models to predict them
(``predict/networks_seed.json.xz``). Each is computed by the same code as ingest and report, in an empty cache of a
temporary folder, then kept with the version (the versions and code digest) it was computed under: a seed is read
only while the code is that version, so run this after a change to the counting, model or predictor code, or to
timm, torch or torchvision (a few minutes on 2 cores). The values a seed of the same version already has are kept.

Usage: PYTHONPATH=src python3 scripts/seed_caches.py [--jobs N] [--only counts|networks]
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time
from pathlib import Path

from utilscope.cache import CACHE_ENV

TABLES = {  # every shipped published table, by its format
    "timm-benchmark": "data/public/timm-benchmark/benchmark-infer-*.csv",
    "deeplearningexamples": "data/public/deeplearningexamples/*.csv",
    "mlperf": "data/public/mlperf/*.csv",
}
ATLAS = "data/public/atlas.sqlite"


def seed_counts(jobs: int) -> Path:
    """Ingest every shipped table into a temporary store (counting each model), then freeze the counts cache."""
    from utilscope.cache import seed_values, write_seed
    from utilscope.survey import count_cache
    from utilscope.survey.published import ingest_and_count

    store = Path(tempfile.mkdtemp(prefix="seed-counts-")) / "tables.sqlite"
    for format_name, tables in TABLES.items():
        ingest_and_count(sorted(glob.glob(tables)), store, jobs=jobs, format_name=format_name)
    cache = count_cache.counts_cache()
    values = {**seed_values(count_cache.COUNTS_SEED, cache.version), **cache.items()}
    return write_seed(count_cache.COUNTS_SEED, cache.version, values)


def seed_networks() -> Path:
    """Predict the shipped atlas's models as its report does (counting each network), then freeze the networks
    cache."""
    from utilscope.cache import seed_values, write_seed
    from utilscope.predict import batched
    from utilscope.report import atlas, families, model_view
    from utilscope.survey.store import Store

    with Store(ATLAS, create=False) as store:
        rows = atlas.atlas_rows(families.with_current_families(store.frame()), store.published_frame())
    _, failures = model_view.predicted_rows(rows)
    if failures:
        print(f"{len(failures)} models not predicted, e.g. {failures[0]}")
    cache = batched.networks_cache()
    values = {**seed_values(batched.NETWORKS_SEED, cache.version), **cache.items()}
    return write_seed(batched.NETWORKS_SEED, cache.version, values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes counting the tables")
    parser.add_argument("--only", choices=("counts", "networks"))
    args = parser.parse_args(argv)
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="seed-cache-")  # an empty cache, nothing of the user's
    for kind, write in (("counts", lambda: seed_counts(args.jobs)), ("networks", seed_networks)):
        if args.only in (None, kind):
            begin = time.perf_counter()
            path = write()
            print(f"{kind}: {path} ({path.stat().st_size / 1e3:.0f} kB, {time.perf_counter() - begin:.0f} s)")


if __name__ == "__main__":
    main()
