"""Others' published measurements as rows of their own, in any registered table format (``survey.formats``:
timm's benchmark tables, NVIDIA DeepLearningExamples' inference tables).

Every row keeps where it came from: the file's name, its row number and SHA-256, and the repository, path and
commit its format knows (a ``provenance.csv`` beside timm's tables, the columns of the DeepLearningExamples file).
Rows are checked whole before anything is written; ingesting a file again adds nothing, and a file of the same name
with other content is refused (a changed table is never mixed with its earlier version). Each row's model is then
counted by utilscope's engine (``count_published``), and its utilization computed against its GPU's peak.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from utilscope.errors import UsageError
from utilscope.hardware import get_spec
from utilscope.hardware.utilization import utilization
from utilscope.limits import check_jobs
from utilscope.precision import Precision
from utilscope.survey.count_cache import UNCHECKED, count_in_worker, count_row
from utilscope.survey.formats import formats, read_tables
from utilscope.survey.formats.timm_benchmark import FORMAT as TIMM_FORMAT

JOBS_WHY = "this machine's cores"  # --jobs: counting processes at a time, one core each (``limits.check_jobs``)


@dataclass(frozen=True)
class IngestResult:
    """Per file: its name, the rows it has, the rows this ingest added (0: it was ingested before). With counting
    (``ingest_and_count``): the store, how many (model, resolution, precision) were counted and how many of those
    could not be, how many rows' ``reparam`` was decided from their GMACs, and where the tables' GMACs and our
    counts disagree (``gmacs_disagreements``). ``left_out``: (file, "row N: why") of each source row its format
    kept out of the store (a GPU the spec table lacks, a unit it does not read)."""

    files: list[tuple[str, int, int]]
    db: str = ""
    counted: int | None = None  # None: not counted
    failed: int = 0
    decided: int = 0
    disagreements: Any = None  # a DataFrame when counted
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def added(self) -> int:
        return sum(added for _, _, added in self.files)

    def to_frame(self):
        """One row per table: file, rows, added."""
        import pandas as pd

        return pd.DataFrame(self.files, columns=["file", "rows", "added"])

    def to_dict(self) -> dict:
        apart = self.disagreements
        return {
            "db": self.db,
            "files": self.to_frame().to_dict(orient="records"),
            "added": self.added,
            "counted": self.counted,
            "failed": self.failed,
            "decided": self.decided,
            "disagreements": None if apart is None else apart.to_dict(orient="records"),
            "left_out": [{"file": name, "row": why} for name, why in self.left_out],
        }


def ingest(paths, db, format_name: str = TIMM_FORMAT) -> IngestResult:
    """Ingest tables of a format (``survey.formats``) into the store ``db`` (created if missing): every file is read
    and checked before the store is opened, and all rows are written in one transaction. A file ingested before
    (same name, same content) adds nothing; the same name with other content is a UsageError, and nothing is
    written."""
    from utilscope.survey.store import Store
    from utilscope.survey.store_files import check_store

    formats().get(format_name)  # an unknown format is said before any file is read
    check_store(db, writable=True)
    tables = read_tables(format_name, paths)
    names = [table.path.name for table in tables]
    with Store(db) as store:
        known = store.published_sources()
        for table in tables:
            earlier = known.get(table.path.name)
            if earlier is not None and earlier != table.sha256:
                raise UsageError(
                    f"{table.path.name} was ingested into {db} with other content (SHA-256 "
                    f"{earlier[:12]}…, now {table.sha256[:12]}…): a changed table is never mixed with "
                    "its earlier rows; ingest it into another store"
                )
        new = [table for table in tables if table.path.name not in known]
        store.add_published([record for table in new for record in table.records()])
    added = {table.path.name for table in new}
    return IngestResult(
        [
            (name, len(table.rows), len(table.rows) if name in added else 0)
            for name, table in zip(names, tables, strict=True)
        ],
        left_out=tuple((table.path.name, why) for table in tables for why in table.left_out),
    )


def ingest_and_count(
    paths,
    db,
    count: bool = True,
    jobs: int = 1,
    on_ingested: Callable[[IngestResult], None] | None = None,
    on_model: Callable[[int, int, str], None] | None = None,
    format_name: str = TIMM_FORMAT,
) -> IngestResult:
    """``ingest`` the tables, then (``count``) count every row's model by our engine at its resolution on ``jobs``
    processes (``count_published``; ``on_model(done, total, model)`` after each), decide the ``reparam`` of the rows
    of reparameterizable models (``infer_reparam``) and find where the tables' GMACs and our counts disagree.
    ``on_ingested`` sees the rows added before counting starts."""
    from utilscope.survey.store import Store

    check_jobs(jobs, JOBS_WHY)
    result = replace(ingest(paths, db, format_name), db=str(db))
    if on_ingested is not None:
        on_ingested(result)
    if not count:
        return result
    counted, failed = count_published(db, on_model, jobs)
    decided = infer_reparam(db)  # rows counted now, or by an earlier run stopped before this
    with Store(db, create=False) as store:
        apart = gmacs_disagreements(store.published_frame())
    return replace(result, counted=counted, failed=failed, decided=decided, disagreements=apart)


def count_published(db, on_model=None, jobs: int = 1) -> tuple[int, int]:
    """Count every published row of ``db`` not counted yet: one count per model, resolution and value size (amp,
    fp16 and bf16 rows share one), read from the count cache (``survey.count_cache``) or made by ``jobs`` worker
    processes (1: in this process) and cached when it succeeds, each stored as soon as it is had, so that an
    interrupted run resumes. ``on_model(done, total, model)`` after each. Returns (counted, failed)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from utilscope.survey import count_cache
    from utilscope.survey.store import Store

    with Store(db) as store:
        todo = store.published_uncounted()
    by_size: dict[tuple, list[tuple[str, int, str]]] = {}
    for model, resolution, precision in todo:
        by_size.setdefault((model, resolution, Precision(precision).unit.bytes_per_element), []).append(
            (model, resolution, precision)
        )
    failed, done = 0, 0

    def store_counts(counted_cells: list[tuple[tuple[str, int, str], dict]]) -> None:
        """Each cell's counts, in one transaction, then told to ``on_model``."""
        nonlocal failed, done
        with Store(db) as store:
            store.set_published_counts([(*cell, counts) for cell, counts in counted_cells])
        for (model, _, _), counts in counted_cells:
            failed, done = failed + (counts["count_status"] != "ok"), done + 1
            if on_model is not None:
                on_model(done, len(todo), model)

    keys = {size: count_cache.key_of("row", *size) for size in by_size}
    known = count_cache.cached(list(keys.values()))
    store_counts([(cell, known[keys[size]]) for size in by_size if keys[size] in known for cell in by_size[size]])
    by_size = {size: cells for size, cells in by_size.items() if keys[size] not in known}

    def counted(size, counts: dict) -> None:
        store_counts([(cell, counts) for cell in by_size[size]])
        if counts["count_status"] == "ok":
            count_cache.keep({keys[size]: counts})

    if jobs <= 1 or len(by_size) <= 1:
        for size, cells in list(by_size.items()):
            counted(size, count_row(*cells[0]))
        return len(todo), failed
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(count_in_worker, *cells[0]): size for size, cells in by_size.items()}
        for future in as_completed(futures):
            counted(futures[future], future.result())
    return len(todo), failed


GMACS_DECIMALS = 2  # timm's tables round GMACs to two decimals
AGREEMENT = 0.05  # our FLOPs / 2 and timm's GMACs agree within 5% (or within timm's rounding)


def with_utilization(frame):
    """Published rows (``Store.published_frame``) with what they achieved against their GPU's datasheet: the peak
    of the precision's math unit (``amp``: fp16 tensor cores with fp32 accumulate, ``bf16``/``amp_bf16``: bf16;
    ``peak_tflops``), ``achieved_tflops`` and ``utilization`` from our counted FLOPs, ``achieved_gbs`` and
    ``bandwidth_utilization`` from our counted bytes (NaN where the row is not counted)."""

    frame = frame.copy()
    specs = {key: get_spec(key) for key in frame["gpu"].unique()}
    frame["peak_tflops"] = [
        specs[g].peak_tflops(Precision(p)) for g, p in zip(frame["gpu"], frame["precision"], strict=True)
    ]
    bandwidth_gbs = frame["gpu"].map(lambda key: specs[key].memory_bandwidth_gbs)
    frame["achieved_tflops"] = frame["flops_per_sample"].astype("float64") * frame["samples_per_s"] / 1e12
    frame["utilization"] = utilization(frame["achieved_tflops"], frame["peak_tflops"])
    frame["achieved_gbs"] = frame["bytes_per_sample"].astype("float64") * frame["samples_per_s"] / 1e9
    frame["bandwidth_utilization"] = utilization(frame["achieved_gbs"], bandwidth_gbs)
    return frame


def agrees(ours_gmacs, published_gmacs):
    """Our FLOPs / 2 (in GMACs) and a table's GMACs agree: within ``AGREEMENT`` or within the table's rounding.
    Numbers give a bool, Series a Series of them."""
    gap = abs(ours_gmacs - published_gmacs)
    return (gap <= AGREEMENT * ours_gmacs) | (gap <= 0.5 * 10**-GMACS_DECIMALS)


def reparam_verdict(published_gmacs, plain_gmacs: float, merged_gmacs: float) -> str:
    """Whether a table's run reparameterized a model, from the GMACs it printed (fvcore's count of the model it ran):
    "yes" when they agree with our count of the reparameterized model and not the plain one, "no" the other way
    round, "unknown" otherwise (no GMACs, both agree, or neither)."""
    if published_gmacs is None or published_gmacs != published_gmacs:  # NaN
        return "unknown"
    plain, merged = agrees(plain_gmacs, published_gmacs), agrees(merged_gmacs, published_gmacs)
    return "yes" if merged and not plain else "no" if plain and not merged else "unknown"


def infer_reparam(db) -> int:
    """Decide ``reparam`` of each counted published row whose model timm can reparameterize and that is not decided
    yet ("unchecked"), by ``reparam_verdict``: "yes", "no", or "unknown" (also when the reparameterized model
    cannot be counted); the reparameterized model is counted once per model, resolution and dtype. Returns how many
    rows were decided "yes" or "no"."""
    from utilscope.counting import count
    from utilscope.models.zoo import REPARAM
    from utilscope.survey import count_cache
    from utilscope.survey.store import Store

    with Store(db) as store:
        frame = store.published_frame()
    rows = frame[(frame["count_status"] == "ok") & (frame["reparam"] == UNCHECKED)]
    keys = {(r.model, r.resolution, Precision(r.precision).count_dtype) for r in rows.itertuples()}
    known = count_cache.cached([count_cache.key_of("reparam", *key) for key in keys])
    merged = {key: known[name]["gmacs"] for key in keys if (name := count_cache.key_of("reparam", *key)) in known}
    verdicts = []
    for row in rows.itertuples():
        key = (row.model, row.resolution, Precision(row.precision).count_dtype)
        if key not in merged:
            try:
                merged[key] = count(row.model + REPARAM, 1, row.resolution, key[2]).total.flops / 2e9
                count_cache.keep({count_cache.key_of("reparam", *key): {"gmacs": merged[key]}})
            except Exception:  # noqa: BLE001 - a conversion this timm cannot make: the row stays undecided
                merged[key] = None
        gmacs = None if row.gmacs is None else float(row.gmacs)
        plain = row.flops_per_sample / 2e9
        verdict = "unknown" if merged[key] is None else reparam_verdict(gmacs, plain, merged[key])
        verdicts.append((row.source_file, row.source_row, verdict))
    with Store(db) as store:
        store.set_published_reparam(verdicts)
    return sum(verdict != "unknown" for _, _, verdict in verdicts)


def gmacs_disagreements(frame):
    """The counted (model, resolution) pairs whose FLOPs / 2 differ from the table's GMACs by more than
    ``AGREEMENT`` and by more than the table's rounding (rows of a reparameterized run left out: their GMACs are the
    merged model's): model, resolution, gmacs, ours_gmacs, ratio (ours/theirs),
    largest difference first."""
    counted = frame[(frame["count_status"] == "ok") & frame["gmacs"].notna() & (frame["reparam"] != "yes")]
    pairs = counted.drop_duplicates(["model", "resolution"])[["model", "resolution", "gmacs", "flops_per_sample"]]
    ours = pairs["flops_per_sample"].astype("float64") / 2e9
    apart = ~agrees(ours, pairs["gmacs"])
    result = pairs[apart].assign(ours_gmacs=ours[apart], ratio=ours[apart] / pairs["gmacs"][apart])
    order = (result["ratio"].apply(lambda r: abs(math.log(r)) if r > 0 else math.inf)).sort_values(ascending=False)
    return result.loc[order.index, ["model", "resolution", "gmacs", "ours_gmacs", "ratio"]].reset_index(drop=True)
