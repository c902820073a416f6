"""The bounds of user-given numbers (``utilscope.limits``) and the sizes they protect: closed-form cases, and the
largest calibration and architecture samples drawn for real (a bound that could not be reached would hang)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from utilscope.errors import UsageError
from utilscope.limits import (
    MAX_ARCHITECTURES,
    MAX_CONFIGS,
    MAX_SEED,
    check_batch,
    check_count,
    check_positive,
    check_seed,
)


@pytest.mark.parametrize("seed", [0, 1, MAX_SEED])
def test_a_seed_from_0_to_2_to_the_32_minus_1_is_taken(seed):
    assert check_seed(seed) == seed


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**64, 1.0, True, "3", None])
def test_any_other_seed_is_refused_with_the_range(seed):
    with pytest.raises(UsageError, match=r"the seed must be a whole number from 0 to 4294967295 \(2\*\*32 - 1\)"):
        check_seed(seed)


def test_a_count_says_its_bound_and_why():
    assert check_count(5, "--n", 1, 5) == 5
    with pytest.raises(UsageError, match=r"^--n must be at least 1 and at most 5 \(five is enough\), got 6$"):
        check_count(6, "--n", 1, 5, "five is enough")
    with pytest.raises(UsageError, match=r"^--n must be at least 0, a whole number, got 2.5$"):
        check_count(2.5, "--n", 0)
    with pytest.raises(UsageError, match=r"^--n must be at least 1, got 0$"):
        check_count(0, "--n")


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), -float("inf"), True, 11])
def test_a_positive_number_is_finite_above_zero_and_within_its_bound(value):
    with pytest.raises(UsageError, match=r"^--t must be positive and at most 10 s \(ten\), got "):
        check_positive(value, "--t", "s", 10, "ten")


def test_a_positive_number_without_a_bound():
    assert check_positive(1e300, "--t", "s") == 1e300
    with pytest.raises(UsageError, match=r"^--t must be positive and finite \(s\), got inf$"):
        check_positive(float("inf"), "--t", "s")


def test_the_largest_calibration_sample_is_drawn_quickly():
    """Every kind fills its quota at MAX_CONFIGS (at about 17,700 the classifier heads, 315 distinct configs, run
    out and drawing would never end)."""
    from utilscope.predict.ops import quotas, sample_configs

    start_s = time.perf_counter()
    configs = sample_configs(MAX_CONFIGS, seed=1)
    assert len({c.key for c in configs}) == MAX_CONFIGS == sum(quotas(MAX_CONFIGS).values())
    assert time.perf_counter() - start_s < 20
    with pytest.raises(UsageError, match="at most 15000"):
        sample_configs(MAX_CONFIGS + 1)


def test_sampling_architectures_checks_its_size_and_seed_before_drawing():
    from utilscope.nas.sampler import sample_architectures
    from utilscope.nas.spaces import get_space

    space = get_space("mbv3")
    with pytest.raises(UsageError, match=f"at most {MAX_ARCHITECTURES}"):
        sample_architectures(space, MAX_ARCHITECTURES + 1, seed=0)
    with pytest.raises(UsageError, match="the seed must be"):
        sample_architectures(space, 2, seed=-1)


@pytest.mark.parametrize("batch", [1, 256, np.int64(256), np.int32(7)])
def test_a_batch_size_of_any_integer_type_comes_back_a_python_int(batch):
    taken = check_batch(batch)
    assert taken == int(batch) and type(taken) is int


@pytest.mark.parametrize("batch", [0, 65537, True, 2.0, "8", np.float64(8)])
def test_a_batch_size_that_is_no_integer_in_range_is_refused(batch):
    with pytest.raises(UsageError, match="batch size must be an integer between 1 and 65536"):
        check_batch(batch)
