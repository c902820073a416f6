"""Utilization-aware search over a finite pool of architectures (its simulation on a measured dataset: ``simulate``).

The search maximizes an objective (by default FLOPs per sample, a capacity proxy) subject to a minimum measured
throughput (samples/s). Measuring an architecture on the GPU is the expensive step; the strategies differ in what
they measure:

* ``measure-all``: measure every candidate the search considers (the informed baseline).
* ``flops``: skip candidates whose FLOPs-estimated throughput (c / FLOPs, with c calibrated on what has been measured
  so far) is below ``min_throughput x (1 - margin)``.
* ``predictor``: the same screen with a caller-supplied estimator (e.g. a per-layer latency-table predictor).

Each strategy is a ``Strategy`` in the ``STRATEGIES`` registry (``nas.strategies``): a screen (one function,
registered with ``register_strategy``) that estimates every candidate's samples/s from what has been measured so far;
the searches below ask it, never a strategy's name.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from utilscope.errors import UsageError
from utilscope.nas.space import PASSED_THROUGH, Arch, SearchSpace, arch_id
from utilscope.nas.strategies import Estimator, Strategy, flops_constant, get_strategy

DEFAULT_MARGIN = 0.1  # screens keep candidates estimated at >= 90% of the throughput floor
NEIGHBOURS = 8  # a mutation picks one of the parent's 8 nearest pool neighbours in feature space
POPULATION = 20
SAMPLE_SIZE = 5  # tournament size of regularized evolution
MAX_STEPS = 10_000  # children proposed (measured or not) before evolution gives up

Objective = Callable[[Arch], float]  # to maximize


class Oracle(Protocol):
    def measure(self, arch_id: str) -> float:
        """The measured throughput of the architecture, in samples/s."""


@runtime_checkable
class KnownThroughputs(Protocol):
    """An oracle that knows every candidate's samples/s before measuring it (a simulation's measured dataset), so
    a search's answer can be scored against the true best."""

    def truth(self, pool: CandidatePool) -> np.ndarray:
        """The samples/s of every candidate of ``pool``, in its order, counting nothing as measured."""


# --- the pool -----------------------------------------------------------------------------------------------------


@dataclass
class CandidatePool:
    """The finite set of architectures a search picks from: validated records of one space, each with its "id"
    (= ``arch_id`` of the record), distinct. FLOPs per sample are computed once, analytically."""

    space: SearchSpace
    archs: list[Arch]
    ids: list[str] = field(init=False)
    flops_per_sample: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if not self.archs:
            raise UsageError("the candidate pool is empty")
        records = []
        for arch in self.archs:
            record = {**self.space.validate(arch), **{k: arch[k] for k in PASSED_THROUGH if k in arch}}
            key = arch_id(record)
            if record.get("id", key) != key:
                raise UsageError(f"architecture id {record['id']!r} does not match its record (its id is {key})")
            records.append({**record, "id": key})
        self.archs = records
        self.ids = [record["id"] for record in records]
        self._index = {key: i for i, key in enumerate(self.ids)}
        if len(self._index) < len(self.ids):
            duplicate = next(key for i, key in enumerate(self.ids) if self._index[key] != i)
            raise UsageError(f"architecture {duplicate} is in the candidate pool twice")
        self.flops_per_sample = np.array([self.space.complexity(r).flops for r in records], dtype=float)

    def __len__(self) -> int:
        return len(self.archs)

    def index(self, key: str) -> int:
        if key not in self._index:
            raise UsageError(f"architecture {key!r} is not in the candidate pool")
        return self._index[key]

    def standardized_features(self) -> np.ndarray:
        """``space.features`` of every candidate as a (candidates x features) matrix, each column z-scored
        (constant columns are only centred)."""
        rows = [self.space.features(arch) for arch in self.archs]
        names = sorted(rows[0])
        matrix = np.array([[row[name] for name in names] for row in rows], dtype=float)
        spread = matrix.std(axis=0)
        return (matrix - matrix.mean(axis=0)) / np.where(spread > 0, spread, 1.0)


# --- objectives and throughput estimators ---------------------------------------------------------------------


def flops_objective(space: SearchSpace) -> Objective:
    """FLOPs per sample (``space.complexity``): the capacity proxy to maximize."""

    def objective(arch: Arch) -> float:
        return float(space.complexity(arch).flops)

    return objective


def objective_from_table(table: Mapping[str, float]) -> Objective:
    """The objective of an architecture looked up by its id (e.g. a measured accuracy); UsageError when missing."""
    values = dict(table)

    def objective(arch: Arch) -> float:
        key = arch.get("id") or arch_id(arch)
        if key not in values:
            raise UsageError(f"the objective table has no value for architecture {key}")
        return float(values[key])

    return objective


def objective_values(pool: CandidatePool, objective: Objective) -> np.ndarray:
    """The objective of every candidate; UsageError when one is not a finite number."""
    values = np.array([objective(arch) for arch in pool.archs], dtype=float)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise UsageError(f"the objective of architecture {pool.ids[bad[0]]} is {values[bad[0]]}, not a finite number")
    return values


def flops_estimator(space: SearchSpace, calibration: Sequence[tuple[Arch, float]]) -> Estimator:
    """samples/s ~ c / FLOPs per sample, c fitted on (architecture, measured samples/s) pairs (at least one)."""
    if not calibration:
        raise UsageError("the FLOPs estimator needs at least one measured architecture to calibrate on")
    if any(not math.isfinite(value) or value <= 0 for _, value in calibration):
        raise UsageError("calibration throughputs must be positive samples/s")
    constant = flops_constant([space.complexity(arch).flops for arch, _ in calibration], [v for _, v in calibration])

    def estimate(archs: list[Arch]) -> np.ndarray:
        return constant / np.array([space.complexity(arch).flops for arch in archs], dtype=float)

    return estimate


def _check_floor(min_throughput: float, margin: float) -> None:
    if not math.isfinite(min_throughput) or min_throughput <= 0:
        raise UsageError(f"the minimum throughput must be positive samples/s, got {min_throughput}")
    if not 0 <= margin < 1:
        raise UsageError(f"the screening margin must be in [0, 1), got {margin}")


class _Screen:
    """Whether a candidate may be feasible, judged without measuring it: its estimated samples/s (its measured
    samples/s once known) >= min_throughput x (1 - margin); without an estimate (a strategy without a screen, or
    one not calibrated yet), it passes."""

    def __init__(
        self, strategy: str, pool: CandidatePool, estimator: Estimator | None, min_throughput: float, margin: float
    ):
        screen = get_strategy(strategy).screen
        _check_floor(min_throughput, margin)
        self.pool = pool
        self.threshold = min_throughput * (1 - margin)
        self._estimates = screen(pool, estimator) if screen is not None else lambda measured: None
        self._cached: tuple[tuple[int, int], np.ndarray | None] | None = None  # ((id, size) of measured, estimates)

    def passes(self, index: int, measured: Mapping[str, float]) -> bool:
        """``measured`` only grows during a search: the estimates are asked again when it has grown, not for every
        candidate."""
        key = self.pool.ids[index]
        if key in measured:
            return measured[key] >= self.threshold
        state = (id(measured), len(measured))
        if self._cached is None or self._cached[0] != state:
            self._cached = (state, self._estimates(measured))
        estimates = self._cached[1]
        return True if estimates is None else bool(estimates[index] >= self.threshold)


def objective_order(pool: CandidatePool, values: np.ndarray) -> np.ndarray:
    """Candidate indices by decreasing objective, ties by id."""
    return np.lexsort((np.array(pool.ids), -values))


def best_feasible_index(pool: CandidatePool, values: np.ndarray, samples_per_s: np.ndarray, min_throughput: float):
    order = objective_order(pool, values)
    feasible = order[samples_per_s[order] >= min_throughput]
    return int(feasible[0]) if feasible.size else None


def _id_or_none(pool: CandidatePool, index: int | None) -> str | None:
    return None if index is None else pool.ids[index]


@dataclass
class BestResult:
    """How one strategy fared at finding the best feasible architecture of the pool."""

    strategy: str
    measurements: int  # distinct architectures measured
    found: bool | None  # the answer is the true best feasible architecture (None: the oracle does not know it)
    answer_id: str | None  # the first feasible architecture measured in objective order; None if none was
    relative_objective: float  # answer's objective / true best's (nan without an answer or a known true best)
    true_best_id: str | None  # None where the oracle does not know every candidate's samples/s
    pool_size: int  # what measuring everything costs


def measurements_to_best(
    pool: CandidatePool,
    objective: Objective,
    min_throughput: float,
    oracle: Oracle,
    strategy: str,
    estimator: Estimator | None = None,
    margin: float = DEFAULT_MARGIN,
) -> BestResult:
    """Measure candidates in decreasing objective order, skipping those the strategy screens out, until one is
    measured at >= ``min_throughput`` samples/s: that one is the answer. The count is of this call's distinct
    measurements, whatever the oracle measured before. Any oracle drives it, a live one too; one that knows every
    candidate's samples/s (``KnownThroughputs``: the simulation's ``MeasuredPool``) scores the answer against the
    true best feasible (none is a UsageError, before anything is measured): a screen that wrongly excluded it gives
    ``found=False``."""
    screen = _Screen(strategy, pool, estimator, min_throughput, margin)
    values = objective_values(pool, objective)
    best = _true_best(pool, values, oracle, min_throughput)
    measured: dict[str, float] = {}
    answer = None
    for index in objective_order(pool, values):
        if not screen.passes(index, measured):
            continue
        measured[pool.ids[index]] = oracle.measure(pool.ids[index])
        if measured[pool.ids[index]] >= min_throughput:
            answer = int(index)
            break
    known = best is not None
    return BestResult(
        strategy=strategy,
        measurements=len(measured),
        found=answer == best if known else None,
        answer_id=_id_or_none(pool, answer),
        relative_objective=float(values[answer] / values[best]) if answer is not None and known else math.nan,
        true_best_id=_id_or_none(pool, best),
        pool_size=len(pool),
    )


def _true_best(pool: CandidatePool, values: np.ndarray, oracle: Oracle, min_throughput: float) -> int | None:
    """The index of the true best feasible candidate when the oracle knows every candidate's samples/s (a
    UsageError when none is feasible); None when it does not."""
    if not isinstance(oracle, KnownThroughputs):
        return None
    best = best_feasible_index(pool, values, oracle.truth(pool), min_throughput)
    if best is None:
        raise UsageError(f"no architecture of the pool reaches {min_throughput:g} samples/s")
    return best


# --- Pareto fronts --------------------------------------------------------------------------------------------


def _non_dominated(objective: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Mask of the points no other point dominates (>= in both, > in one); both maximized."""
    order = np.lexsort((-throughput, -objective))
    mask = np.zeros(len(order), dtype=bool)
    best_above = -np.inf  # the largest throughput among points of strictly larger objective
    start = 0
    while start < len(order):
        stop = start
        while stop < len(order) and objective[order[stop]] == objective[order[start]]:
            stop += 1
        group = order[start:stop]
        top = throughput[group[0]]  # the group's largest throughput (sorted)
        if top > best_above:
            mask[group[throughput[group] == top]] = True
        best_above = max(best_above, top)
        start = stop
    return mask


def pareto_layers(objective: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Non-dominated sorting (both maximized): 0 for the Pareto front, 1 for the front of the rest, and so on."""
    objective, throughput = np.asarray(objective, float), np.asarray(throughput, float)
    layers = np.full(len(objective), -1)
    remaining = np.arange(len(objective))
    layer = 0
    while remaining.size:
        front = _non_dominated(objective[remaining], throughput[remaining])
        layers[remaining[front]] = layer
        remaining = remaining[~front]
        layer += 1
    return layers


def _layer_order(pool: CandidatePool, values: np.ndarray, estimates: np.ndarray) -> np.ndarray:
    """Candidates by estimated Pareto layer of (objective, estimated samples/s), within a layer by objective."""
    return np.lexsort((np.array(pool.ids), -values, pareto_layers(values, estimates)))


def front_order(pool, values, oracle, strategy: Strategy, estimator, rng) -> np.ndarray:
    """The order in which ``strategy`` measures the pool when looking for the front: without a screen, a random
    one; else by its estimates, after the largest-objective candidate when it calibrates on that one."""
    if strategy.screen is None:
        return rng.permutation(len(pool))
    estimates = strategy.screen(pool, estimator)
    if not strategy.calibrates:
        return _layer_order(pool, values, estimates({}))
    first = int(objective_order(pool, values)[0])
    order = _layer_order(pool, values, estimates({pool.ids[first]: oracle.measure(pool.ids[first])}))
    return np.concatenate([[first], order[order != first]])


# --- regularized evolution ------------------------------------------------------------------------------------


class _Neighbours:
    """The k nearest other candidates of a candidate in standardized feature space (computed on demand)."""

    def __init__(self, pool: CandidatePool, k: int):
        self.features = pool.standardized_features()
        self.k = min(k, len(pool) - 1)
        self.cache: dict[int, np.ndarray] = {}

    def __call__(self, index: int) -> np.ndarray:
        if self.k < 1:
            return np.array([index])
        if index not in self.cache:
            distances = np.linalg.norm(self.features - self.features[index], axis=1)
            distances[index] = np.inf
            self.cache[index] = np.argsort(distances, kind="stable")[: self.k]
        return self.cache[index]


@dataclass
class EvolutionResult:
    """The best feasible architecture an evolutionary search measured, and what it cost."""

    strategy: str
    best_id: str | None  # None when no measured architecture reached the throughput floor
    best_objective: float  # -inf without one
    best_samples_per_s: float  # nan without one
    measurements: int  # distinct architectures measured (<= budget)
    steps: int  # children proposed, measured or not
    history: list[tuple[int, float]]  # after each measurement: (measurements so far, best objective so far)

    def measurements_to_reach(self, objective: float) -> int | None:
        """The measurements after which the best feasible objective was >= ``objective``; None if never."""
        return next((count for count, best in self.history if best >= objective), None)


@dataclass(frozen=True)
class EvolutionOptions:
    """How an evolution runs, checked when made (a ``UsageError`` before anything is measured): the throughput
    floor (``min_throughput``, samples/s), the GPU-measurement ``budget``, the screening ``strategy``
    (``STRATEGIES``), the population, the tournament's ``sample_size``, the children proposed before it gives up
    (``max_steps``), the screen's ``margin`` (keeps candidates estimated at >= floor x (1 - margin)) and the
    ``neighbours`` a mutation picks from."""

    min_throughput: float
    budget: int
    strategy: str
    population: int = POPULATION
    sample_size: int = SAMPLE_SIZE
    max_steps: int = MAX_STEPS
    margin: float = DEFAULT_MARGIN
    neighbours: int = NEIGHBOURS

    def __post_init__(self) -> None:
        get_strategy(self.strategy)
        _check_floor(self.min_throughput, self.margin)
        if self.budget < 1:
            raise UsageError(f"the measurement budget must be at least 1, got {self.budget}")
        if self.population < 1 or not 1 <= self.sample_size <= self.population:
            raise UsageError(
                f"need population >= 1 and 1 <= sample size <= population, got {self.population}, {self.sample_size}"
            )
        if self.max_steps < 1 or self.neighbours < 1:
            raise UsageError(f"max steps and neighbours must be at least 1, got {self.max_steps}, {self.neighbours}")


def _propose(members: deque, population: int, sample_size: int, rng, neighbours: _Neighbours, size: int) -> int:
    """A random candidate while the population fills; then a random neighbour of a tournament's winner."""
    if len(members) < population:
        return int(rng.integers(size))
    contestants = rng.choice(len(members), size=sample_size, replace=False)
    parent = max(contestants, key=lambda i: members[i][1])
    return int(rng.choice(neighbours(members[parent][0])))


def evolve(
    pool: CandidatePool,
    objective: Objective,
    oracle: Oracle,
    options: EvolutionOptions,
    estimator: Estimator | None = None,
    rng: np.random.Generator | None = None,
) -> EvolutionResult:
    """Regularized (aging) evolution (Real et al., AAAI 2019) over the pool: tournament of ``sample_size``, a child
    is a random one of the parent's ``neighbours`` nearest candidates, the oldest member dies; fitness = objective if
    feasible, else -inf. A strategy without a screen (``measure-all``) measures every child (feasible = measured
    samples/s >= ``min_throughput``) and stops after ``budget`` measurements or ``max_steps`` children. One with a
    screen (``flops``, ``predictor``) judges feasibility by its estimate, so the evolution itself is free; it then
    measures the visited candidates the estimate passes, best objective first, until one is feasible (one that
    calibrates, ``flops``, first measures one random candidate). ``options``: those numbers and the strategy;
    ``rng`` defaults to default_rng(0)."""
    min_throughput, budget = options.min_throughput, options.budget
    screen = _Screen(options.strategy, pool, estimator, min_throughput, options.margin)
    strategy = get_strategy(options.strategy)
    values, rng = objective_values(pool, objective), rng if rng is not None else np.random.default_rng(0)
    run = _Run(pool, values, min_throughput, oracle)
    nearest = _Neighbours(pool, options.neighbours)
    members: deque[tuple[int, float]] = deque()  # (candidate, fitness), oldest first
    visited: set[int] = set()
    if strategy.calibrates:
        run.measure(int(rng.integers(len(pool))))
    while run.count < budget and run.steps < options.max_steps:
        run.steps += 1
        child = _propose(members, options.population, options.sample_size, rng, nearest, len(pool))
        if strategy.screen is None:
            feasible = run.measure(child) >= min_throughput
        else:
            visited.add(child)
            feasible = screen.passes(child, run.measured)
        members.append((child, float(values[child]) if feasible else -math.inf))
        if len(members) > options.population:
            members.popleft()
    for index in objective_order(pool, values) if strategy.screen is not None else ():
        if run.count >= budget or (run.best is not None and values[index] <= values[run.best]):
            break
        if index in visited and screen.passes(index, run.measured) and run.measure(index) >= min_throughput:
            break
    return run.result(options.strategy)


class _Run:
    """The measurements of one evolution: distinct ids measured, the best feasible so far, and the history."""

    def __init__(self, pool: CandidatePool, values: np.ndarray, min_throughput: float, oracle: Oracle):
        self.pool, self.values, self.min_throughput, self.oracle = pool, values, min_throughput, oracle
        self.measured: dict[str, float] = {}
        self.history: list[tuple[int, float]] = []
        self.best: int | None = None
        self.steps = 0

    @property
    def count(self) -> int:
        return len(self.measured)

    def measure(self, index: int) -> float:
        key = self.pool.ids[index]
        if key not in self.measured:
            self.measured[key] = self.oracle.measure(key)
            feasible = self.measured[key] >= self.min_throughput
            if feasible and (self.best is None or self.values[index] > self.values[self.best]):
                self.best = index
            self.history.append((self.count, float(self.values[self.best]) if self.best is not None else -math.inf))
        return self.measured[key]

    def result(self, strategy: str) -> EvolutionResult:
        best = self.best
        return EvolutionResult(
            strategy=strategy,
            best_id=_id_or_none(self.pool, best),
            best_objective=float(self.values[best]) if best is not None else -math.inf,
            best_samples_per_s=self.measured[self.pool.ids[best]] if best is not None else math.nan,
            measurements=self.count,
            steps=self.steps,
            history=self.history,
        )
