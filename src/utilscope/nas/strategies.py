"""The search strategies (``search``), in the ``STRATEGIES`` registry: what screens the candidates a search considers
before it measures them. Each is a ``Strategy``: a screen (one function, registered with ``register_strategy``) that
estimates every candidate's samples/s from what has been measured so far, or none (``measure-all``). This module
imports no numpy (a command line's help lists the strategies): the screens import it when a search runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from utilscope.errors import UsageError
from utilscope.nas.space import Arch
from utilscope.registry import Registry

if TYPE_CHECKING:
    import numpy as np

Estimator = Callable[[list[Arch]], "np.ndarray"]  # estimated samples/s, one per architecture
Estimates = Callable[[Mapping[str, float]], "np.ndarray | None"]  # measured so far -> every candidate's estimate


class Pool(Protocol):
    """What a screen reads of a search's candidates (``search.CandidatePool``)."""

    archs: list[Arch]
    flops_per_sample: np.ndarray  # per candidate, in the pool's order

    def __len__(self) -> int:
        """The number of candidates."""

    def index(self, key: str) -> int:
        """The position of the candidate whose id is ``key``."""


def flops_constant(flops_per_sample: Iterable[float], samples_per_s: Iterable[float]) -> float:
    """c of samples/s ~ c / FLOPs: the median of measured samples/s x FLOPs per sample (in FLOP/s)."""
    import numpy as np

    return float(np.median(np.asarray(list(samples_per_s), float) * np.asarray(list(flops_per_sample), float)))


def estimated(pool: Pool, estimator: Estimator | None) -> np.ndarray:
    """The estimator's samples/s of every candidate; UsageError without an estimator, or when one is not a positive
    number."""
    import numpy as np

    if estimator is None:
        raise UsageError("strategy 'predictor' needs an estimator (e.g. a latency-table predictor)")
    estimates = np.asarray(estimator(list(pool.archs)), dtype=float)
    if estimates.shape != (len(pool),):
        raise UsageError(f"the estimator returned {estimates.shape} values for {len(pool)} architectures")
    if not np.all(np.isfinite(estimates) & (estimates > 0)):
        raise UsageError("the estimator returned a throughput that is not a positive number")
    return estimates


@dataclass(frozen=True)
class Strategy:
    """A search strategy. ``screen(pool, estimator)`` gives, once per search, the ``Estimates`` the strategy judges
    unmeasured candidates by: from the samples/s measured so far (architecture id -> samples/s), every candidate's
    estimated samples/s, or None while it has no estimate (then every candidate passes). A strategy without a
    screen (None) measures every candidate the search considers. ``calibrates``: its estimate needs a measurement
    first, so a search measures one candidate to start."""

    name: str
    screen: Callable[[Pool, Estimator | None], Estimates] | None
    calibrates: bool = False


STRATEGIES: Registry[Strategy] = Registry("search strategy")
STRATEGIES.add("measure-all", Strategy("measure-all", None))  # the informed baseline: no screen


def register_strategy(name: str, calibrates: bool = False):
    """Register the decorated screen (``Strategy.screen``) as the strategy ``name``; a name taken is a ValueError."""

    def register(screen: Callable[[Pool, Estimator | None], Estimates]):
        STRATEGIES.add(name, Strategy(name, screen, calibrates))
        return screen

    return register


@register_strategy("flops", calibrates=True)
def _flops_screen(pool: Pool, estimator: Estimator | None) -> Estimates:
    """samples/s ~ c / FLOPs per sample, c fitted on what has been measured (``flops_constant``)."""

    def estimates(measured: Mapping[str, float]) -> np.ndarray | None:
        if not measured:
            return None
        flops = [pool.flops_per_sample[pool.index(key)] for key in measured]
        return flops_constant(flops, measured.values()) / pool.flops_per_sample

    return estimates


@register_strategy("predictor")
def _predictor_screen(pool: Pool, estimator: Estimator | None) -> Estimates:
    """The caller's estimator (e.g. a latency-table predictor) over the pool, once."""
    predicted = estimated(pool, estimator)
    return lambda measured: predicted


def get_strategy(name: str) -> Strategy:
    """The registered strategy ``name``; a UsageError listing them for another name."""
    return STRATEGIES.get(name)
