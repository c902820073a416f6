"""Utilization-aware search, simulated on a synthetic measured dataset: closed-form cases, no GPU."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from utilscope.errors import UsageError
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.search import (
    CandidatePool,
    EvolutionOptions,
    evolve,
    flops_estimator,
    flops_objective,
    measurements_to_best,
    objective_from_table,
    pareto_layers,
)
from utilscope.nas.simulate import (
    COMPARE_COLUMNS,
    MeasuredPool,
    compare,
    measurements_to_front,
    true_best_feasible,
    true_front,
)
from utilscope.nas.spaces import get_space
from utilscope.nas.spaces.mbv3 import uniform_arch
from utilscope.nas.strategies import STRATEGIES

SPACE = get_space("mbv3")


def synthetic_throughput(arch) -> float:
    """samples/s = 1e12 / FLOPs, 30% slower per FLOP at kernel size 7 and 30% faster at 3: FLOPs alone mis-rank."""
    kernel_effect = (SPACE.features(arch)["kernel_size_mean"] - 5) / 2  # in [-1, 1]
    return 1e12 / SPACE.complexity(arch).flops * (1 - 0.3 * kernel_effect)


@pytest.fixture(scope="module")
def dataset():
    pool = CandidatePool(SPACE, sample_architectures(SPACE, 200, seed=0))
    truth = {arch["id"]: synthetic_throughput(arch) for arch in pool.archs}
    min_throughput = float(np.median(list(truth.values())))
    return pool, truth, min_throughput


def perfect_estimator(truth):
    return lambda archs: np.array([truth[arch["id"]] for arch in archs])


def noisy_estimator(truth, sigma=0.1, seed=1):
    """The truth times lognormal noise, fixed per architecture (order-independent)."""
    noise = dict(zip(sorted(truth), np.random.default_rng(seed).lognormal(0, sigma, len(truth)), strict=True))
    return lambda archs: np.array([truth[arch["id"]] * noise[arch["id"]] for arch in archs])


# --- pool, oracle, objectives, estimators ---------------------------------------------------------------------


def test_oracle_counts_distinct_measurements_and_rejects_unknown_ids():
    oracle = MeasuredPool({"a": 100.0, "b": 50.0})
    assert oracle.measure("a") == 100.0
    assert oracle.measure("a") == 100.0  # a repeat is free
    assert oracle.measure("b") == 50.0
    assert oracle.measurements == 2
    with pytest.raises(UsageError, match="'c'"):
        oracle.measure("c")
    oracle.reset()
    assert oracle.measurements == 0
    for bad in ({}, {"a": 0.0}, {"a": float("nan")}, {"a": "fast"}):
        with pytest.raises(UsageError):
            MeasuredPool(bad)


def test_pool_validates_ids_and_duplicates():
    small, large = uniform_arch(160, 2, 3, 3), uniform_arch(224, 4, 7, 6)
    pool = CandidatePool(SPACE, [small, large])
    assert len(pool) == 2 and all(arch["id"] == key for arch, key in zip(pool.archs, pool.ids, strict=True))
    assert pool.flops_per_sample[0] < pool.flops_per_sample[1]
    with pytest.raises(UsageError, match="twice"):
        CandidatePool(SPACE, [small, small])
    with pytest.raises(UsageError, match="does not match"):
        CandidatePool(SPACE, [{**small, "id": "not-its-id"}])
    with pytest.raises(UsageError, match="empty"):
        CandidatePool(SPACE, [])


def test_objectives():
    arch = CandidatePool(SPACE, [uniform_arch(160, 2, 3, 3)]).archs[0]
    assert flops_objective(SPACE)(arch) == SPACE.complexity(arch).flops
    assert objective_from_table({arch["id"]: 0.75})(arch) == 0.75
    with pytest.raises(UsageError, match=arch["id"]):
        objective_from_table({"other": 1.0})(arch)


def test_flops_estimator_is_the_median_constant_over_flops():
    archs = [uniform_arch(160, 2, 3, 3), uniform_arch(192, 3, 5, 4), uniform_arch(224, 4, 7, 6)]
    flops = np.array([SPACE.complexity(arch).flops for arch in archs], dtype=float)
    constants = [1e12, 2e12, 4e12]  # per architecture, samples/s x FLOPs
    estimate = flops_estimator(SPACE, [(arch, c / f) for arch, c, f in zip(archs, constants, flops, strict=True)])
    np.testing.assert_allclose(estimate(archs), 2e12 / flops)  # the median constant
    with pytest.raises(UsageError):
        flops_estimator(SPACE, [])


# --- the best feasible architecture ---------------------------------------------------------------------------


def tiny_case():
    """Five architectures, objective 5..1; the two best are too slow, so the best feasible is the third."""
    pool = CandidatePool(SPACE, [uniform_arch(160 + 16 * i, 2, 3, 3) for i in range(5)])
    objective = objective_from_table(dict(zip(pool.ids, [5.0, 4.0, 3.0, 2.0, 1.0], strict=True)))
    samples_per_s = dict(zip(pool.ids, [10.0, 50.0, 100.0, 200.0, 90.0], strict=True))
    return pool, objective, samples_per_s


def test_true_best_feasible_on_a_tiny_pool():
    pool, objective, samples_per_s = tiny_case()
    assert true_best_feasible(pool, objective, samples_per_s, min_throughput=80.0) == pool.ids[2]
    assert true_best_feasible(pool, objective, samples_per_s, min_throughput=5.0) == pool.ids[0]
    assert true_best_feasible(pool, objective, samples_per_s, min_throughput=150.0) == pool.ids[3]
    assert true_best_feasible(pool, objective, samples_per_s, min_throughput=500.0) is None
    result = measurements_to_best(pool, objective, 80.0, MeasuredPool(samples_per_s), "measure-all")
    assert (result.measurements, result.found, result.answer_id) == (3, True, pool.ids[2])  # objective order
    assert result.relative_objective == 1.0 and result.pool_size == 5


def test_a_live_oracle_drives_the_same_search_without_a_score():
    """An oracle that only measures (a GPU) gets the answer a simulation gets, with nothing to score it against."""
    pool, objective, samples_per_s = tiny_case()
    asked = []

    class Live:
        def measure(self, arch_id: str) -> float:
            asked.append(arch_id)
            return samples_per_s[arch_id]

    result = measurements_to_best(pool, objective, 80.0, Live(), "measure-all")
    assert (result.measurements, result.answer_id, asked) == (3, pool.ids[2], pool.ids[:3])  # objective order
    assert (result.found, result.true_best_id) == (None, None) and math.isnan(result.relative_objective)


def test_a_screen_that_excludes_the_best_reports_failure():
    pool, objective, samples_per_s = tiny_case()
    wrong = dict(zip(pool.ids, [10.0, 50.0, 1.0, 200.0, 90.0], strict=True))  # hides the best feasible
    predictor = lambda archs: np.array([wrong[arch["id"]] for arch in archs])  # noqa: E731
    result = measurements_to_best(pool, objective, 80.0, MeasuredPool(samples_per_s), "predictor", predictor)
    assert (result.found, result.answer_id, result.measurements) == (False, pool.ids[3], 1)
    assert result.relative_objective == pytest.approx(2.0 / 3.0)


def test_perfect_predictor_needs_one_measurement(dataset):
    pool, truth, min_throughput = dataset
    objective = flops_objective(SPACE)
    oracle = MeasuredPool(truth)
    perfect = measurements_to_best(
        pool, objective, min_throughput, oracle, "predictor", perfect_estimator(truth), margin=0.0
    )
    assert (perfect.measurements, perfect.found) == (1, True)
    assert perfect.answer_id == true_best_feasible(pool, objective, truth, min_throughput)
    everything = measurements_to_best(pool, objective, min_throughput, oracle, "measure-all")
    assert everything.found and everything.measurements >= perfect.measurements
    assert everything.pool_size == 200


@pytest.mark.parametrize("strategy", ["flops", "predictor"])
def test_screened_strategies_report_honestly(dataset, strategy):
    pool, truth, min_throughput = dataset
    objective, oracle = flops_objective(SPACE), MeasuredPool(truth)
    result = measurements_to_best(pool, objective, min_throughput, oracle, strategy, noisy_estimator(truth))
    assert 1 <= result.measurements <= len(pool)
    assert result.found == (result.answer_id == result.true_best_id)
    if result.answer_id is not None:
        assert truth[result.answer_id] >= min_throughput
        assert result.relative_objective == pytest.approx(1.0) if result.found else result.relative_objective < 1


# --- the Pareto front -----------------------------------------------------------------------------------------


def test_pareto_layers_closed_form():
    objective = np.array([3.0, 2.0, 1.0, 2.0, 1.0, 3.0])
    throughput = np.array([1.0, 2.0, 3.0, 1.0, 1.0, 1.0])
    # front: (3,1) twice (equal points do not dominate each other), (2,2), (1,3); then (2,1); then (1,1)
    assert pareto_layers(objective, throughput).tolist() == [0, 0, 0, 1, 2, 0]


def test_true_front_is_non_dominated(dataset):
    pool, truth, _ = dataset
    objective = flops_objective(SPACE)
    front = set(true_front(pool, objective, truth))
    values = {key: objective(arch) for key, arch in zip(pool.ids, pool.archs, strict=True)}
    for key in pool.ids:
        dominated = any(
            values[o] >= values[key] and truth[o] >= truth[key] and (values[o] > values[key] or truth[o] > truth[key])
            for o in pool.ids
        )
        assert (key in front) == (not dominated)


def test_front_recovery(dataset):
    pool, truth, _ = dataset
    objective = flops_objective(SPACE)
    front_size = len(true_front(pool, objective, truth))
    perfect = measurements_to_front(pool, objective, MeasuredPool(truth), "predictor", perfect_estimator(truth))
    assert perfect.front_size == front_size and perfect.target_count == math.ceil(0.95 * front_size)
    assert perfect.target_count <= perfect.measurements <= front_size + 2
    blind = measurements_to_front(pool, objective, MeasuredPool(truth), "measure-all", seed=3)
    assert blind.target_count <= blind.measurements <= len(pool)
    assert blind == measurements_to_front(pool, objective, MeasuredPool(truth), "measure-all", seed=3)
    flops = measurements_to_front(pool, objective, MeasuredPool(truth), "flops")
    assert flops.target_count <= flops.measurements <= len(pool)


# --- evolution ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_evolution_is_reproducible_and_within_budget(dataset, strategy):
    pool, truth, min_throughput = dataset
    objective, estimator = flops_objective(SPACE), noisy_estimator(truth)

    def run(seed):
        oracle = MeasuredPool(truth)
        options = EvolutionOptions(min_throughput, 30, strategy, max_steps=2000)
        result = evolve(pool, objective, oracle, options, estimator, np.random.default_rng(seed))
        assert result.measurements == oracle.measurements == len(result.history) <= 30
        return result

    first = run(0)
    assert run(0).history == first.history
    bests = [best for _, best in first.history]
    assert bests == sorted(bests)  # the best so far never decreases
    if first.best_id is not None:
        assert truth[first.best_id] >= min_throughput
        assert first.best_samples_per_s == truth[first.best_id] and first.best_objective == bests[-1]


def test_evolution_with_a_large_budget_finds_the_best(dataset):
    pool, truth, min_throughput = dataset
    objective = flops_objective(SPACE)
    options = EvolutionOptions(min_throughput, len(pool), "measure-all", max_steps=20_000)
    result = evolve(pool, objective, MeasuredPool(truth), options, rng=np.random.default_rng(0))
    best = true_best_feasible(pool, objective, truth, min_throughput)
    assert result.best_id == best
    assert result.measurements_to_reach(objective(pool.archs[pool.index(best)])) <= result.measurements


def test_evolution_with_a_perfect_predictor_measures_once(dataset):
    """The predictor judges feasibility while evolving (free), then the visited candidates are measured best
    objective first: with a perfect predictor and no margin, the first one measured is feasible."""
    pool, truth, min_throughput = dataset
    objective = flops_objective(SPACE)
    oracle = MeasuredPool(truth)
    options = EvolutionOptions(min_throughput, 50, "predictor", max_steps=5000, margin=0.0)
    result = evolve(pool, objective, oracle, options, perfect_estimator(truth), np.random.default_rng(0))
    assert result.measurements == oracle.measurements == 1
    assert truth[result.best_id] >= min_throughput


def test_compare_table(dataset):
    pool, truth, min_throughput = dataset
    table = compare(
        pool,
        flops_objective(SPACE),
        min_throughput,
        MeasuredPool(truth),
        noisy_estimator(truth),
        budget=40,
        seeds=(0, 1),
    )
    assert list(table.columns) == COMPARE_COLUMNS and len(table) == 9
    assert set(table["strategy"]) == set(STRATEGIES) and set(table["target"]) == {"best", "front", "evolve"}
    assert (table["pool_size"] == 200).all()
    best = table[table["target"] == "best"].set_index("strategy")
    assert best.loc["measure-all", "found"] and best.loc["measure-all", "measurements"] >= 1


# --- bad input ------------------------------------------------------------------------------------------------


def test_bad_input_is_a_usage_error(dataset):
    pool, truth, min_throughput = dataset
    objective, oracle = flops_objective(SPACE), MeasuredPool(truth)
    with pytest.raises(UsageError, match="minimum throughput"):
        measurements_to_best(pool, objective, 0.0, oracle, "measure-all")
    with pytest.raises(UsageError, match="minimum throughput"):
        EvolutionOptions(-1.0, 10, "measure-all")
    with pytest.raises(UsageError, match="budget"):
        EvolutionOptions(min_throughput, 0, "measure-all")
    with pytest.raises(UsageError, match="unknown search strategy"):
        EvolutionOptions(min_throughput, 10, "random")
    with pytest.raises(UsageError, match="sample size"):
        EvolutionOptions(min_throughput, 10, "flops", population=4, sample_size=5)
    with pytest.raises(UsageError, match="margin"):
        EvolutionOptions(min_throughput, 10, "flops", margin=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        EvolutionOptions(min_throughput, 10, "flops").budget = 11  # type: ignore[misc]
    with pytest.raises(UsageError, match="needs an estimator"):
        evolve(pool, objective, oracle, EvolutionOptions(min_throughput, 10, "predictor"))
    with pytest.raises(UsageError, match="unknown search strategy"):
        measurements_to_front(pool, objective, oracle, "random")
    with pytest.raises(UsageError, match="needs an estimator"):
        measurements_to_best(pool, objective, min_throughput, oracle, "predictor")
    with pytest.raises(UsageError, match="returned"):
        measurements_to_best(pool, objective, min_throughput, oracle, "predictor", lambda archs: np.ones(3))
    with pytest.raises(UsageError, match="no architecture of the pool reaches"):
        measurements_to_best(pool, objective, 1e12, oracle, "measure-all")
    with pytest.raises(UsageError, match="not in the measured dataset"):
        measurements_to_best(pool, objective, min_throughput, MeasuredPool({"a": 1.0}), "measure-all")


def test_gpu_mode_measures_as_the_predictors_table_was_timed():
    """The shipped tables were timed in fp16 without cuDNN autotuning: GPU-mode measurements must match (on a CPU,
    only the precision falls back to the CPU's default)."""
    from utilscope.measure.settings import CudnnSettings
    from utilscope.nas.search_setup import oracle_for
    from utilscope.nas.table_predictor import load_table_predictor, shipped_profile

    table = load_table_predictor(shipped_profile("h200", "mbv3")).table
    assert (table.precision, table.cudnn_benchmark) == ("fp16", False)
    request = oracle_for(Path("pool.jsonl"), 256, table, "cpu").request("abc")
    assert (request.model, request.precision, request.device) == ("pool.jsonl:abc", None, "cpu")
    assert request.cudnn == CudnnSettings(benchmark=False)
