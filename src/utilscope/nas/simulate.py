"""The search strategies simulated on an already measured dataset (``nas search --simulate``): the pool is a
measured dataset and :class:`MeasuredPool` answers "measure" from it, counting the distinct architectures asked for;
:func:`search.measurements_to_best`, :func:`measurements_to_front`, :func:`search.evolve` and :func:`compare` then
tell how many measurements each strategy needs, on CPU, against the truth the dataset holds (``true_best_feasible``,
``true_front``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pandas as pd

from utilscope.errors import UsageError
from utilscope.nas.search import (
    DEFAULT_MARGIN,
    CandidatePool,
    EvolutionOptions,
    Objective,
    best_feasible_index,
    evolve,
    front_order,
    measurements_to_best,
    objective_order,
    objective_values,
    pareto_layers,
)
from utilscope.nas.strategies import STRATEGIES, Estimator, get_strategy

FRONT_FRACTION = 0.95  # the front counts as recovered when 95% of its architectures have been measured
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
COMPARE_COLUMNS = [
    "strategy",
    "target",
    "measurements",
    "found",
    "pool_size",
    "relative_objective",
    "runs",
    "found_runs",
]


class MeasuredPool:
    """An oracle that answers ``measure(arch_id)`` from already measured throughputs (samples/s).

    ``measurements`` counts the distinct ids measured so far: asking again for a measured id is free."""

    def __init__(self, samples_per_s: Mapping[str, float]):
        if not samples_per_s:
            raise UsageError("the measured dataset is empty")
        checked = {}
        for key, value in samples_per_s.items():
            if not isinstance(value, int | float | np.number) or not math.isfinite(value) or value <= 0:
                raise UsageError(f"architecture {key}: measured samples/s must be a positive number, got {value!r}")
            checked[str(key)] = float(value)
        self.samples_per_s = MappingProxyType(checked)
        self.measured: dict[str, float] = {}  # in the order measured

    @property
    def measurements(self) -> int:
        return len(self.measured)

    def measure(self, arch_id: str) -> float:
        if arch_id not in self.samples_per_s:
            raise UsageError(f"architecture {arch_id!r} was not measured in the dataset")
        self.measured[arch_id] = self.samples_per_s[arch_id]
        return self.samples_per_s[arch_id]

    def reset(self) -> None:
        self.measured.clear()

    def truth(self, pool: CandidatePool) -> np.ndarray:
        """The dataset's samples/s of every candidate (nothing is counted as measured)."""
        missing = [key for key in pool.ids if key not in self.samples_per_s]
        if missing:
            raise UsageError(f"{len(missing)} pool architecture(s) are not in the measured dataset, e.g. {missing[0]}")
        return np.array([self.samples_per_s[key] for key in pool.ids])


def true_best_feasible(
    pool: CandidatePool, objective: Objective, samples_per_s: Mapping[str, float], min_throughput: float
) -> str | None:
    """The id of the candidate with the largest objective among those measured at >= ``min_throughput`` samples/s
    (ties: the smallest id); None when none is that fast."""
    truth = MeasuredPool(samples_per_s).truth(pool)
    best = best_feasible_index(pool, objective_values(pool, objective), truth, min_throughput)
    return None if best is None else pool.ids[best]


def true_front(pool: CandidatePool, objective: Objective, samples_per_s: Mapping[str, float]) -> list[str]:
    """Ids of the Pareto front of (objective, measured samples/s) over the pool, by decreasing objective."""
    values = objective_values(pool, objective)
    layers = pareto_layers(values, MeasuredPool(samples_per_s).truth(pool))
    return [pool.ids[i] for i in objective_order(pool, values) if layers[i] == 0]


@dataclass
class FrontResult:
    """How many measurements one strategy needs to recover the pool's Pareto front of (objective, samples/s)."""

    strategy: str
    measurements: int  # until >= fraction of the true front's ids were measured (pool size if never)
    front_size: int
    target_count: int  # ceil(fraction x front size)
    pool_size: int


def measurements_to_front(
    pool: CandidatePool,
    objective: Objective,
    oracle: MeasuredPool,
    strategy: str,
    estimator: Estimator | None = None,
    seed: int = 0,
    fraction: float = FRONT_FRACTION,
) -> FrontResult:
    """Measure the pool in the strategy's order until ``fraction`` of the true front has been measured.

    ``flops``/``predictor`` measure by estimated Pareto layer (non-dominated sorting of objective and estimated
    samples/s, front 0 first; ``flops`` measures the largest-objective candidate first to calibrate); ``measure-all``
    measures in a random order drawn with ``numpy.random.default_rng(seed)`` (the cost of measuring blindly)."""
    chosen = get_strategy(strategy)
    if not 0 < fraction <= 1:
        raise UsageError(f"the front fraction must be in (0, 1], got {fraction}")
    values = objective_values(pool, objective)
    in_front = pareto_layers(values, oracle.truth(pool)) == 0
    target = math.ceil(fraction * in_front.sum())
    order = front_order(pool, values, oracle, chosen, estimator, np.random.default_rng(seed))
    reached = np.flatnonzero(np.cumsum(in_front[order]) >= target)
    return FrontResult(
        strategy=strategy,
        measurements=int(reached[0]) + 1 if reached.size else len(pool),
        front_size=int(in_front.sum()),
        target_count=target,
        pool_size=len(pool),
    )


def _evolution_row(pool, objective, min_throughput, oracle, estimator, strategy, budget, seeds, margin) -> dict:
    """Mean measurements (over the seeds that got there) for evolution to measure the true best feasible."""
    values = objective_values(pool, objective)
    best = best_feasible_index(pool, values, oracle.truth(pool), min_throughput)
    target = values[best]
    reached, relative = [], []
    for seed in seeds:
        options = EvolutionOptions(min_throughput, budget, strategy, margin=margin)
        result = evolve(pool, objective, oracle, options, estimator, np.random.default_rng(seed))
        count = result.measurements_to_reach(target)
        if count is not None:
            reached.append(count)
        relative.append(result.best_objective / target if math.isfinite(result.best_objective) else 0.0)
    return {
        "strategy": strategy,
        "target": "evolve",
        "measurements": float(np.mean(reached)) if reached else math.nan,
        "found": len(reached) == len(seeds),
        "pool_size": len(pool),
        "relative_objective": float(np.mean(relative)),
        "runs": len(seeds),
        "found_runs": len(reached),
    }


def compare(
    pool: CandidatePool,
    objective: Objective,
    min_throughput: float,
    oracle: MeasuredPool,
    estimator: Estimator | None,
    budget: int,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    margin: float | Mapping[str, float] = DEFAULT_MARGIN,
    fraction: float = FRONT_FRACTION,
) -> pd.DataFrame:
    """Every strategy on three targets, one row each: ``best`` (:func:`measurements_to_best`), ``front``
    (:func:`measurements_to_front`; ``measure-all`` averaged over the seeds' random orders) and ``evolve`` (mean,
    over the seeds that got there, of the measurements :func:`evolve` needs to measure the true best feasible;
    ``found`` only if every seed did). ``relative_objective``: the answer's objective over the true best's.
    ``margin``: one screening margin for all, or one per strategy (e.g. each estimator's held-out error)."""
    if not seeds:
        raise UsageError("compare needs at least one seed")
    rows = []
    for strategy in STRATEGIES:
        strategy_margin = margin.get(strategy, DEFAULT_MARGIN) if isinstance(margin, Mapping) else margin
        found = measurements_to_best(pool, objective, min_throughput, oracle, strategy, estimator, strategy_margin)
        rows.append(
            {
                "strategy": strategy,
                "target": "best",
                "measurements": found.measurements,
                "found": found.found,
                "pool_size": len(pool),
                "relative_objective": found.relative_objective,
                "runs": 1,
                "found_runs": int(found.found),
            }
        )
        front_seeds = seeds if get_strategy(strategy).screen is None else seeds[:1]  # a random order: averaged
        fronts = [
            measurements_to_front(pool, objective, oracle, strategy, estimator, seed, fraction) for seed in front_seeds
        ]
        rows.append(
            {
                "strategy": strategy,
                "target": "front",
                "pool_size": len(pool),
                "relative_objective": math.nan,
                "measurements": float(np.mean([f.measurements for f in fronts])),
                "found": True,
                "runs": len(fronts),
                "found_runs": len(fronts),
            }
        )
        rows.append(
            _evolution_row(pool, objective, min_throughput, oracle, estimator, strategy, budget, seeds, strategy_margin)
        )
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)
