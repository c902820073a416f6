"""What ``utilscope nas search`` puts together: the candidate pool, the objective, the predictor as an estimator,
and the oracle — a measured dataset (simulation) or the GPU itself."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from utilscope.errors import UsageError
from utilscope.files import read_json
from utilscope.nas.predictor import Predictor, measured_dataset
from utilscope.nas.sampler import load_jsonl, sample_architectures, save_jsonl
from utilscope.nas.search import (
    CandidatePool,
    Estimator,
    MeasuredPool,
    Objective,
    flops_objective,
    objective_from_table,
)
from utilscope.nas.space import get_space


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


def simulation_inputs(frame: pd.DataFrame, space_name: str, batch: int) -> tuple[CandidatePool, MeasuredPool]:
    """The pool = the architectures of ``space_name`` measured at ``batch`` in the store; the oracle answers from
    their measured samples/s."""
    archs, measurements = measured_dataset(frame, space_name)
    at_batch = measurements[measurements["batch"] == batch]
    if at_batch.empty:
        raise UsageError(f"the store has no {space_name} measurements at batch {batch}")
    throughput = at_batch.groupby("id")["samples_per_s"].median()
    pool = CandidatePool(get_space(space_name), [archs[key] for key in throughput.index])
    return pool, MeasuredPool(throughput.to_dict())


def covered_pool(pool: CandidatePool, oracle: MeasuredPool, predictor: Predictor, batch: int):
    """The pool restricted to architectures whose layers the predictor's table holds (and the count dropped)."""
    from utilscope.nas.predictor import covered

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
    Counts distinct measurements like the simulated oracle. ``precision`` and ``cudnn_benchmark`` should be those
    of the predictor's latency table, so that what is measured is what was predicted."""

    def __init__(self, pool_path: Path, batch: int, precision: str | None = None, device: str | None = None,
                 cudnn_benchmark: bool = True):  # fmt: skip
        self.pool_path, self.batch, self.precision, self.device = pool_path, batch, precision, device
        self.cudnn_benchmark = cudnn_benchmark
        self.measured: dict[str, float] = {}

    @property
    def measurements(self) -> int:
        return len(self.measured)

    def measure(self, arch_id: str) -> float:
        from utilscope.measure.profile import profile

        if arch_id not in self.measured:
            result = profile(f"{self.pool_path}:{arch_id}", [self.batch], self.precision, device=self.device,
                             cudnn_benchmark=self.cudnn_benchmark)  # fmt: skip
            row = result.rows[0]
            # a failed measurement is infeasible (0 samples/s), never an error that stops the search
            self.measured[arch_id] = row.samples_per_s if row.status == "ok" else 0.0
        return self.measured[arch_id]


def load_pool(path: Path, space_name: str) -> CandidatePool:
    return CandidatePool(get_space(space_name), load_jsonl(path, space_name))
