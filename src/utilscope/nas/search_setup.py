"""What ``utilscope nas search`` puts together: the candidate pool, the objective, the predictor as an estimator,
and the oracle — a measured dataset (simulation) or the GPU itself."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.files import NAS_PROFILE_FILE, POOL_FILE, POOL_FOLDER, check_input_file, check_output_folder
from utilscope.limits import (
    ARCHITECTURES_WHY,
    MAX_ARCHITECTURES,
    check_batch,
    check_budget,
    check_count,
    check_positive,
    check_seed,
)
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import profile
from utilscope.nas.file_formats import OBJECTIVE_FILE, read_objective
from utilscope.nas.latency import LatencyTable
from utilscope.nas.sampler import load_jsonl, sample_architectures, save_jsonl
from utilscope.nas.search import (
    CandidatePool,
    EvolutionOptions,
    EvolutionResult,
    Objective,
    evolve,
    flops_objective,
    objective_from_table,
)
from utilscope.nas.simulate import MeasuredPool, compare
from utilscope.nas.space import Arch
from utilscope.nas.spaces import get_space
from utilscope.nas.strategies import Estimator, get_strategy
from utilscope.nas.table_predictor import (
    TablePredictor,
    covered,
    measured_dataset,
    screening_margins,
    select_table_predictor,
)


def objective_for(spec: str, space_name: str) -> Objective:
    """``flops`` (FLOPs per sample, a capacity proxy) or a JSON file mapping architecture id -> value (a finite
    number, ``file_formats.read_objective``)."""
    if spec == "flops":
        return flops_objective(get_space(space_name))
    return objective_from_table(read_objective(spec))


def predictor_estimator(predictor: TablePredictor, batch: int) -> Estimator:
    predictor.check_batch(batch)
    return lambda archs: predictor.predict_frame(list(archs), batch)["samples_per_s"].to_numpy()


def simulation_inputs(
    frame: pd.DataFrame,
    space_name: str,
    batch: int,
    records: dict[str, Arch],
) -> tuple[CandidatePool, MeasuredPool]:
    """The pool = the architectures of ``space_name`` measured at ``batch`` in the store; the oracle answers from
    their measured samples/s."""
    archs, measurements = measured_dataset(frame, space_name, records)
    at_batch = measurements[measurements["batch"] == batch]
    if at_batch.empty:
        raise UsageError(f"the store has no {space_name} measurements at batch {batch}")
    throughput = at_batch.groupby("id")["samples_per_s"].median()
    pool = CandidatePool(get_space(space_name), [archs[key] for key in throughput.index])
    return pool, MeasuredPool(throughput.to_dict())


def covered_pool(pool: CandidatePool, oracle: MeasuredPool, predictor: TablePredictor, batch: int):
    """The pool restricted to architectures whose layers the predictor's table holds (and the count dropped)."""
    keep = {arch["id"] for arch in pool.archs if covered(predictor.table, arch, batch)}
    if not keep:
        raise UsageError("the predictor's latency table covers none of the measured architectures")
    kept, kept_oracle = restrict_pool(pool, oracle, keep)
    return kept, kept_oracle, len(pool) - len(kept)


def restrict_pool(pool: CandidatePool, oracle: MeasuredPool, ids: set[str]) -> tuple[CandidatePool, MeasuredPool]:
    """The pool and oracle narrowed to ``ids`` (e.g. the predictor's held-out architectures)."""
    keep = [arch for arch in pool.archs if arch["id"] in ids]
    if not keep:
        raise UsageError("none of the pool's architectures is among the given ids")
    narrowed = CandidatePool(pool.space, keep)
    return narrowed, MeasuredPool({key: oracle.samples_per_s[key] for key in narrowed.ids})


def search_pool(space_name: str, pool_path: str | None, pool_size: int, seed: int, out_dir: Path) -> Path:
    """GPU mode's candidates: the given JSONL, or ``pool_size`` architectures sampled with ``seed`` and written
    under ``out_dir`` (measured models are named by file and id, so the pool must be a file); a pool file already
    there is reused (it is the same sample)."""
    if pool_path is not None:
        return Path(pool_path)
    path = out_dir / f"{space_name}_pool_seed{seed}_n{pool_size}.jsonl"
    if not path.exists():
        save_jsonl(path, sample_architectures(get_space(space_name), pool_size, seed))
    return path


def search_device(device: str | None) -> torch.device:
    """Where GPU mode measures: the GPU, or the CPU only when asked for by name (``--device cpu``). Without a GPU
    and without ``device`` it refuses, before anything is sampled, written or measured: minutes of CPU timing are
    not what a GPU search was asked for."""
    dev = hardware.resolve_device(device)
    if device is None and dev.type != "cuda":
        raise UsageError(
            "nas search measures candidates on a GPU and this machine has none: compare the strategies "
            "on a measured store with --simulate DB, or measure on the CPU with --device cpu (slow, and "
            "not a GPU's numbers)"
        )
    return dev


class GpuOracle:
    """Measures an architecture of a pool file on the device (``graph`` backend): its samples/s at one batch size.
    Counts distinct measurements like the simulated oracle. ``precision`` and ``cudnn`` should be those of the
    predictor's latency table (``oracle_for``), so that what is measured is what was predicted."""

    def __init__(
        self,
        pool_path: Path,
        batch: int,
        precision: str | None = None,
        device: str | None = None,
        cudnn: CudnnSettings | None = None,
    ):
        self.pool_path, self.batch, self.precision, self.device = pool_path, batch, precision, device
        self.cudnn = cudnn or CudnnSettings()
        self.measured: dict[str, float] = {}

    @property
    def measurements(self) -> int:
        return len(self.measured)

    def request(self, arch_id: str) -> MeasureRequest:
        return MeasureRequest(f"{self.pool_path}:{arch_id}", self.precision, device=self.device, cudnn=self.cudnn)

    def measure(self, arch_id: str) -> float:
        if arch_id not in self.measured:
            row = profile(self.request(arch_id), [self.batch]).rows[0]
            # a failed measurement is infeasible (0 samples/s), never an error that stops the search
            self.measured[arch_id] = row.samples_per_s if row.status == "ok" else 0.0
        return self.measured[arch_id]


def oracle_for(pool_path: Path, batch: int, table: LatencyTable, device: str | None) -> GpuOracle:
    """An oracle measuring as the predictor's table was timed (its precision and cuDNN settings); on a CPU (tests)
    in the CPU's default precision."""
    on_gpu = hardware.resolve_device(device).type == "cuda"
    return GpuOracle(pool_path, batch, table.precision if on_gpu else None, device, table.cudnn)


def load_pool(path: Path, space_name: str) -> CandidatePool:
    return CandidatePool(get_space(space_name), load_jsonl(path, space_name))


@dataclass(frozen=True)
class SearchRequest:
    """One ``nas search``: the space, the throughput floor (samples/s), the GPU-measurement budget, the objective
    (``flops`` or a JSON file of id -> value), the batch size, and the predictor (a shipped GPU's or a profile)."""

    space: str
    min_throughput: float
    budget: int = 100
    objective: str = "flops"
    batch: int = 256
    gpu: str | None = "h200"
    profile: str | None = None
    seed: int = 0
    strategy: str = "predictor"  # what GPU mode screens candidates with: measure-all | flops | predictor

    def __post_init__(self) -> None:
        get_space(self.space)  # an unknown space is the first thing to say
        check_positive(self.min_throughput, "--min-throughput", "samples/s")
        check_budget(self.budget)
        check_batch(self.batch)
        check_seed(self.seed, "--seed")
        get_strategy(self.strategy)
        if self.objective != "flops":
            check_input_file(self.objective, OBJECTIVE_FILE)
        if self.profile is not None:
            check_input_file(self.profile, NAS_PROFILE_FILE)


@dataclass(frozen=True)
class Simulation:
    pool_size: int
    dropped: int  # measured architectures the predictor's table does not cover
    margins: dict[str, float]  # screening margins (2 x held-out MAPE)
    comparison: pd.DataFrame  # one row per strategy


def simulate(
    request: SearchRequest,
    frame: pd.DataFrame,
    records: dict[str, Arch],
    holdout_only: bool = False,
) -> Simulation:
    """Compare the strategies on a measured store's architectures (``frame`` and ``records``: ``Store.frame()``
    and ``Store.model_records()``; answers come from the measurements)."""
    objective = objective_for(request.objective, request.space)
    predictor = select_table_predictor(request.profile, request.gpu, request.space)
    pool, oracle = simulation_inputs(frame, request.space, request.batch, records)
    pool, oracle, dropped = covered_pool(pool, oracle, predictor, request.batch)
    if holdout_only:
        pool, oracle = restrict_pool(pool, oracle, set(predictor.holdout_ids))
    margins = screening_margins(predictor, request.batch)
    estimator = predictor_estimator(predictor, request.batch)
    table = compare(pool, objective, request.min_throughput, oracle, estimator, request.budget, margin=margins)
    return Simulation(len(pool), dropped, margins, table)


@dataclass(frozen=True)
class DeviceSearch:
    """What GPU mode found: the pool it searched (its file, None when sampled into a temporary folder, removed
    since: ``utilscope nas sample -n pool_size --seed seed`` writes the same pool), and the evolution's result."""

    request: SearchRequest
    device: str
    pool: Path | None
    pool_size: int
    result: EvolutionResult

    def to_dict(self) -> dict:
        """The JSON of ``utilscope nas search --json`` in GPU mode (no answer: ``best_*`` are null)."""
        r = self.result
        return {
            "space": self.request.space,
            "device": self.device,
            "batch": self.request.batch,
            "min_throughput": self.request.min_throughput,
            "pool": str(self.pool) if self.pool else None,
            "pool_size": self.pool_size,
            "seed": self.request.seed,
            "strategy": r.strategy,
            "best_id": r.best_id,
            "best_objective": r.best_objective if r.best_id is not None else None,
            "best_samples_per_s": r.best_samples_per_s if r.best_id is not None else None,
            "measurements": r.measurements,
            "budget": self.request.budget,
            "steps": r.steps,
        }


def search_on_device(
    request: SearchRequest,
    pool: str | None,
    pool_size: int,
    work_dir: str | Path | None = None,
    device: str | None = None,
) -> DeviceSearch:
    """Search on the device (the GPU; the CPU only as ``device="cpu"``): candidates from ``pool``, or ``pool_size``
    sampled into ``work_dir`` (kept there) or, without one, into a temporary folder removed after the search;
    measured as the predictor's table was timed. Everything is checked before anything is sampled or measured."""
    dev = search_device(device)
    if pool is not None and work_dir is not None:
        raise UsageError("--work-dir is where a sampled pool is written; with --pool nothing is written")
    if pool is None:
        check_count(pool_size, "--pool-size", 1, MAX_ARCHITECTURES, ARCHITECTURES_WHY)
    if work_dir is not None:
        work_dir = check_output_folder(work_dir, POOL_FOLDER)
    if pool is not None:
        check_input_file(pool, POOL_FILE)
    objective = objective_for(request.objective, request.space)
    predictor = select_table_predictor(request.profile, request.gpu, request.space)
    estimator = predictor_estimator(predictor, request.batch)
    search = functools.partial(_search, request, predictor, objective, estimator, str(dev))
    if pool is not None:
        return search(Path(pool), kept=True)
    if work_dir is not None:
        return search(search_pool(request.space, None, pool_size, request.seed, work_dir), kept=True)
    with tempfile.TemporaryDirectory(prefix="utilscope-pool-") as folder:
        return search(search_pool(request.space, None, pool_size, request.seed, Path(folder)), kept=False)


def _search(
    request: SearchRequest,
    predictor: TablePredictor,
    objective: Objective,
    estimator: Estimator,
    device: str,
    pool_path: Path,
    kept: bool,
) -> DeviceSearch:
    candidates = load_pool(pool_path, request.space)
    oracle = oracle_for(pool_path, request.batch, predictor.table, device)
    options = EvolutionOptions(request.min_throughput, request.budget, request.strategy)
    result = evolve(candidates, objective, oracle, options, estimator, np.random.default_rng(request.seed))
    return DeviceSearch(request, device, pool_path if kept else None, len(candidates), result)


PREDICTED_CANDIDATES = 10  # the candidates a search on predictions reports, best objective first


@dataclass(frozen=True)
class PredictedSearch:
    """A search for a GPU without a NAS profile (none measured, nothing to measure on): every candidate of the pool
    predicted by ``predict``'s general model (``nas.population``), transferred by datasheet to the GPU; the feasible
    ones (predicted samples/s >= the floor) best objective first."""

    request: SearchRequest
    gpu: str
    transferred_from: str
    pool: Path | None
    pool_size: int
    feasible: int
    candidates: pd.DataFrame  # id, objective, gflops, latency_ms, samples_per_s, utilization

    def to_dict(self) -> dict:
        return {
            "space": self.request.space,
            "gpu": self.gpu,
            "predicted": True,
            "transferred_from": self.transferred_from or None,
            "batch": self.request.batch,
            "min_throughput": self.request.min_throughput,
            "pool": str(self.pool) if self.pool else None,
            "pool_size": self.pool_size,
            "seed": self.request.seed,
            "feasible": self.feasible,
            "candidates": self.candidates.to_dict(orient="records"),
        }


def searches_by_prediction(request: SearchRequest) -> bool:
    """Whether ``nas search`` (GPU mode) has no NAS profile for the request's GPU (given or shipped, fp16) and so
    searches on the general model's predictions alone."""
    from utilscope.nas.table_predictor import shipped_table_predictor

    return request.profile is None and shipped_table_predictor(request.gpu, request.space, "fp16") is None


def search_by_prediction(request: SearchRequest, pool: str | None, pool_size: int) -> PredictedSearch:
    """The pool (a JSONL file, or ``pool_size`` architectures sampled with the request's seed, not written) predicted
    on the request's GPU at its batch size in fp16 (``nas.population``); no measurement."""
    from utilscope.nas.population import population_predictor

    if pool is not None:
        archs = load_jsonl(check_input_file(pool, POOL_FILE), request.space)
    else:
        check_count(pool_size, "--pool-size", 1, MAX_ARCHITECTURES, ARCHITECTURES_WHY)
        archs = sample_architectures(get_space(request.space), pool_size, request.seed)
    objective = objective_for(request.objective, request.space)
    predictor = population_predictor(request.space, request.gpu, request.batch)
    frame = predictor.predict_frame(archs)
    frame.insert(1, "objective", [objective(arch) for arch in archs])
    feasible = frame[frame["samples_per_s"] >= request.min_throughput]
    best = feasible.sort_values("objective", ascending=False, kind="stable").head(PREDICTED_CANDIDATES)
    return PredictedSearch(
        request,
        predictor.gpu.name,
        predictor.transferred_from,
        Path(pool) if pool else None,
        len(archs),
        len(feasible),
        best.reset_index(drop=True),
    )
