"""Fitting a device profile's predictor: its layer models (``layers``) and the launch gap of its composition, fitted
on the profile's op and chain rows (``profile_rows``; seconds). What this module and the modules that make the rows
compute is the fit: their text keys every kept fit (``fit_cache.FITTING_CODE``), while keeping and reading fits is
``fit_cache``'s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from utilscope.errors import UsageError
from utilscope.predict import profile_rows
from utilscope.predict.calibrate import DeviceProfile
from utilscope.predict.features import Gpu
from utilscope.predict.layers import LayerModels, fit_layer_models
from utilscope.predict.predictor import Predictor

FIT_THREADS = 1  # OpenMP threads of the fit: more barely help (2 threads: 24.6 s against 21 s on one) and a busy
# machine's oversubscribed OpenMP took over 10 minutes


def composition_gap_ms(parts: list[tuple[pd.DataFrame, LayerModels]]) -> float:
    """The launch gap per op of one or more profiles' chains (``parts``: each profile's chain rows,
    ``profile_rows.chain_rows``, with its layer models): the ``gap`` of the median (least absolute deviation) fit,
    without intercept, of measured ≈ scale_p × summed layer predictions + gap × ops over every chain, one scale per
    profile and one gap for all; 0 with fewer than two chains. A chain runs faster than its ops alone (the fitted
    scale is 0.87–0.97 on the shipped profiles: their inputs partly in L2), and each op adds about a microsecond; one
    median of (measured - summed) / ops mixed the two and went negative where the chains were large. The scale is
    fitted to keep it out of the gap, not applied (docs/predict.md, "The H100's whole networks, per precision")."""
    summed = pd.concat([_chain_sums(chains, models).assign(part=n) for n, (chains, models) in enumerate(parts)])
    if len(summed) < 2:
        return 0.0
    from sklearn.linear_model import QuantileRegressor

    columns = pd.get_dummies(summed["part"], prefix="scale", dtype=float).mul(summed["summed"], axis=0)
    columns.insert(0, "ops", summed["ops"])
    fit = QuantileRegressor(quantile=0.5, alpha=0.0, fit_intercept=False, solver="highs")
    return float(fit.fit(columns, summed["measured"]).coef_[0])


def _chain_sums(chains: pd.DataFrame, models: LayerModels) -> pd.DataFrame:
    """Per chain of a profile: its ops, their summed predicted ms and the chain's measured ms."""
    if chains.empty:
        return pd.DataFrame(columns=["ops", "summed", "measured"], dtype=float)
    ms, _ = models.times_ms(chains)
    per_chain = pd.DataFrame({"chain": chains["chain"], "ms": ms, "measured": chains["chain_ms"]}).groupby("chain")
    return per_chain.agg(ops=("ms", "size"), summed=("ms", "sum"), measured=("measured", "first"))


def fit_predictor(profile: DeviceProfile, path: str = "", rows: tuple[pd.DataFrame, pd.DataFrame] | None = None):
    """The predictor of a profile, fitted on its op and chain rows (``rows``: ``profile_rows.load``'s, else traced
    from the profile's configs)."""
    gpu = Gpu.of(profile.device, profile.precision)
    ops, chains = rows if rows is not None else profile_rows.derive(profile, gpu)
    models = fit_layer_models(ops, gpu)
    if not models.models:
        raise UsageError(f"the device profile {path} has too few timed configs to fit layer models")
    gap_ms = composition_gap_ms([(chains, models)])
    return Predictor(
        str(path), profile.device, profile.precision, profile.backend, gpu, models, gap_ms, profile.memory_format
    )


def fit_profile(path: Path, on_fit: Callable[[], None] | None = None) -> Predictor:
    """The predictor of the profile file at ``path``, fitted on ``FIT_THREADS`` OpenMP threads from the rows kept
    beside it (else traced from its configs); ``on_fit`` is called once the file reads as a profile, before the
    fit."""
    from threadpoolctl import threadpool_limits

    profile = DeviceProfile.load(path)
    if on_fit is not None:
        on_fit()
    with threadpool_limits(limits=FIT_THREADS):
        return fit_predictor(profile, str(path), profile_rows.load(path))


def fit_conv_models(path: Path, on_fit: Callable[[], None] | None = None) -> tuple[LayerModels, str]:
    """The conv layer models of the profile file at ``path`` alone (the trees of a group are fitted on its rows
    alone, so they are its whole predictor's), and its configs' memory format; ``on_fit`` as ``fit_profile``'s."""
    from threadpoolctl import threadpool_limits

    profile = DeviceProfile.load(path)
    if on_fit is not None:
        on_fit()
    gpu = Gpu.of(profile.device, profile.precision)
    ops, _ = profile_rows.load(path) or profile_rows.derive(profile, gpu)
    with threadpool_limits(limits=FIT_THREADS):
        return fit_layer_models(ops[ops["group"] == "conv"], gpu), profile.memory_format
