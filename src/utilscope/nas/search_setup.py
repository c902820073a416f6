"""What ``utilscope nas search`` puts together: the candidate pool, the objective, the predictor as an estimator,
and the oracle — a measured dataset (simulation) or the GPU itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.files import read_json
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import profile
from utilscope.nas.latency import LatencyTable
from utilscope.nas.predictor import Predictor, covered, measured_dataset, screening_margins, select_predictor
from utilscope.nas.sampler import load_jsonl, sample_architectures, save_jsonl
from utilscope.nas.search import (
    CandidatePool,
    Estimator,
    EvolutionResult,
    MeasuredPool,
    Objective,
    check_strategy,
    compare,
    evolve,
    flops_objective,
    objective_from_table,
)
from utilscope.nas.space import Arch
from utilscope.nas.spaces import get_space


def objective_for(spec: str, space_name: str) -> Objective:
    """``flops`` (FLOPs per sample, a capacity proxy) or a JSON file mapping architecture id -> value."""
    if spec == "flops":
        return flops_objective(get_space(space_name))
    table = read_json(spec, "objective table (--objective is 'flops' or a JSON file of id -> value)")
    if not isinstance(table, dict):
        raise UsageError(f"{spec} must be a JSON object mapping architecture id -> value")
    return objective_from_table({str(k): float(v) for k, v in table.items()})


def predictor_estimator(predictor: Predictor, batch: int) -> Estimator:
    predictor.check_batch(batch)
    return lambda archs: predictor.predict(list(archs), batch)["samples_per_s"].to_numpy()


def simulation_inputs(frame: pd.DataFrame, space_name: str, batch: int, records: dict[str, Arch],
                      ) -> tuple[CandidatePool, MeasuredPool]:  # fmt: skip
    """The pool = the architectures of ``space_name`` measured at ``batch`` in the store; the oracle answers from
    their measured samples/s."""
    archs, measurements = measured_dataset(frame, space_name, records)
    at_batch = measurements[measurements["batch"] == batch]
    if at_batch.empty:
        raise UsageError(f"the store has no {space_name} measurements at batch {batch}")
    throughput = at_batch.groupby("id")["samples_per_s"].median()
    pool = CandidatePool(get_space(space_name), [archs[key] for key in throughput.index])
    return pool, MeasuredPool(throughput.to_dict())


def covered_pool(pool: CandidatePool, oracle: MeasuredPool, predictor: Predictor, batch: int):
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
    under ``out_dir`` (measured models are named by file and id, so the pool must be a file)."""
    if pool_path is not None:
        return Path(pool_path)
    path = out_dir / f"{space_name}_pool_seed{seed}_n{pool_size}.jsonl"
    if not path.exists():
        save_jsonl(path, sample_architectures(get_space(space_name), pool_size, seed))
    return path


class GpuOracle:
    """Measures an architecture of a pool file on the device (``graph`` backend): its samples/s at one batch size.
    Counts distinct measurements like the simulated oracle. ``precision`` and ``cudnn`` should be those of the
    predictor's latency table (``oracle_for``), so that what is measured is what was predicted."""

    def __init__(self, pool_path: Path, batch: int, precision: str | None = None, device: str | None = None,
                 cudnn: CudnnSettings | None = None):  # fmt: skip
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
        if not self.min_throughput > 0 or self.budget < 1:
            raise UsageError("--min-throughput must be positive and --budget at least 1")
        check_strategy(self.strategy)


@dataclass(frozen=True)
class Simulation:
    pool_size: int
    dropped: int  # measured architectures the predictor's table does not cover
    margins: dict[str, float]  # screening margins (2 x held-out MAPE)
    comparison: pd.DataFrame  # one row per strategy


def simulate(request: SearchRequest, frame: pd.DataFrame, records: dict[str, Arch], holdout_only: bool = False,
             ) -> Simulation:  # fmt: skip
    """Compare the strategies on a measured store's architectures (``frame`` and ``records``: ``Store.frame()``
    and ``Store.model_records()``; answers come from the measurements)."""
    predictor = select_predictor(request.profile, request.gpu, request.space)
    pool, oracle = simulation_inputs(frame, request.space, request.batch, records)
    pool, oracle, dropped = covered_pool(pool, oracle, predictor, request.batch)
    if holdout_only:
        pool, oracle = restrict_pool(pool, oracle, set(predictor.holdout_ids))
    margins = screening_margins(predictor, request.batch)
    objective = objective_for(request.objective, request.space)
    estimator = predictor_estimator(predictor, request.batch)
    table = compare(pool, objective, request.min_throughput, oracle, estimator, request.budget, margin=margins)
    return Simulation(len(pool), dropped, margins, table)


def search_on_device(request: SearchRequest, pool: str | None, pool_size: int, out_dir: Path,
                     device: str | None = None) -> tuple[Path, EvolutionResult]:  # fmt: skip
    """Search on the device: candidates from ``pool`` (or ``pool_size`` sampled into ``out_dir``), measured as the
    predictor's table was timed. Returns the pool file and the result."""
    predictor = select_predictor(request.profile, request.gpu, request.space)
    objective = objective_for(request.objective, request.space)
    estimator = predictor_estimator(predictor, request.batch)
    pool_path = search_pool(request.space, pool, pool_size, request.seed, out_dir)
    candidates = load_pool(pool_path, request.space)
    oracle = oracle_for(pool_path, request.batch, predictor.table, device)
    screen = estimator if request.strategy == "predictor" else None
    result = evolve(candidates, objective, request.min_throughput, request.budget, request.strategy, oracle, screen,
                    np.random.default_rng(request.seed))  # fmt: skip
    return pool_path, result
