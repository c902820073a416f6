"""Fitting a device profile's predictor, and its cache: the layer models and the composition gap fitted on the
profile's op and chain rows (seconds), kept per profile content in utilscope's cache folder
(``utilscope.cache.cache_dir("predict")``), keyed by the profile's bytes, scikit-learn's and utilscope's versions,
``CACHE_FORMAT`` and the text of the code that fits (``FITTING_CODE``: not ``predictor.py``, whose composition runs
after the fit)."""

from __future__ import annotations

import functools
import hashlib
import pickle
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pandas as pd

from utilscope.cache import cache_dir, keep
from utilscope.errors import UsageError
from utilscope.files import check_input_file, read_bytes
from utilscope.hardware.specs import gpu_matches
from utilscope.measure.precision import parse_precision
from utilscope.predict import network_scales, profile_rows, profiles
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile
from utilscope.predict.features import Gpu
from utilscope.predict.layers import LayerModels, fit_layer_models
from utilscope.predict.predictor import Predictor

CACHE_FORMAT = 3  # 2: the fit moved out of predictor.py; 3: layer models kept as trees.Trees
# a change to any of these refits a cached predictor
FITTING_CODE = ("ops.py", "features.py", "layers.py", "trees.py", "profile_rows.py", "fit_cache.py")


def composition_gap_ms(chains: pd.DataFrame, models: LayerModels) -> float:
    """The launch gap per op of a profile's chains (``profile_rows.chain_rows``): the ``gap`` of the median (least
    absolute deviation) fit, without intercept, of measured ≈ scale × summed layer predictions + gap × ops over the
    chains; 0 with fewer than two chains. A chain runs faster than its ops alone (the fitted scale is 0.87–0.97 on
    the shipped profiles: their inputs partly in L2), and each op adds about a microsecond; one median of
    (measured - summed) / ops mixed the two and went negative where the chains were large. The scale is fitted to
    keep it out of the gap, not applied (docs/predict.md, "The H100's whole networks, per precision")."""
    if chains.empty or chains["chain"].nunique() < 2:
        return 0.0
    from sklearn.linear_model import QuantileRegressor

    ms, _ = models.times_ms(chains)
    per_chain = pd.DataFrame({"chain": chains["chain"], "ms": ms, "measured": chains["chain_ms"]}).groupby("chain")
    summed = per_chain.agg(ops=("ms", "size"), summed=("ms", "sum"), measured=("measured", "first"))
    fit = QuantileRegressor(quantile=0.5, alpha=0.0, fit_intercept=False, solver="highs")
    gap_ms, _scale = fit.fit(summed[["ops", "summed"]], summed["measured"]).coef_
    return float(gap_ms)


def fit_predictor(profile: DeviceProfile, path: str = "", rows: tuple[pd.DataFrame, pd.DataFrame] | None = None):
    """The predictor of a profile, fitted on its op and chain rows (``rows``: ``profile_rows.load``'s, else traced
    from the profile's configs)."""
    gpu = Gpu.of(profile.device, profile.precision)
    ops, chains = rows if rows is not None else profile_rows.derive(profile, gpu)
    models = fit_layer_models(ops, gpu)
    if not models.models:
        raise UsageError(f"the device profile {path} has too few timed configs to fit layer models")
    gap_ms = composition_gap_ms(chains, models)
    return Predictor(
        str(path), profile.device, profile.precision, profile.backend, gpu, models, gap_ms, profile.memory_format
    )


def cache_file(path: Path, part: str = "") -> Path:
    """The cache entry of a profile's predictor (``part``: of a part of it, e.g. "conv"): keyed by the profile's
    content, scikit-learn's version and the code that fits it."""
    versions = f"{CACHE_FORMAT}|{metadata.version('scikit-learn')}|{metadata.version('utilscope')}|{part}"
    code = b"".join((Path(__file__).parent / name).read_bytes() for name in FITTING_CODE)
    digest = hashlib.sha256(read_bytes(path, PROFILE_FILE) + versions.encode() + code).hexdigest()[:20]
    return cache_dir("predict") / f"{path.stem}{'-' + part if part else ''}-{digest}.pkl"


def _cached(file: Path):
    """What a cache entry holds, or None when there is none; a stale or broken entry is removed (fit again)."""
    if file.is_file():
        try:
            return pickle.loads(file.read_bytes())
        except Exception:
            file.unlink(missing_ok=True)
    return None


FIT_THREADS = 1  # OpenMP threads of the fit: more barely help (2 threads: 24.6 s against 21 s on one) and a busy
# machine's oversubscribed OpenMP took over 10 minutes


def load_predictor(path: str | Path, on_fit: Callable[[], None] | None = None) -> Predictor:
    """The predictor of a device profile file, complete: its fit (layer models and launch gap; fitted once on
    ``FIT_THREADS`` OpenMP threads, seconds from the rows kept beside a shipped profile, and cached by the file's
    content), the network scales kept beside the file, its GPU's channels_last conv models for an NCHW profile, and
    the host profile of its GPU's machine (``profiles.host_of``). ``on_fit`` is called when a valid profile is about
    to be fitted, by this call or by the predictor's own later fit of another (``profile_ms``)."""
    from threadpoolctl import threadpool_limits

    path = check_input_file(path, PROFILE_FILE)
    cached = cache_file(path)
    predictor = _cached(cached)
    if predictor is None:
        profile = DeviceProfile.load(path)
        if on_fit is not None:
            on_fit()
        with threadpool_limits(limits=FIT_THREADS):
            predictor = fit_predictor(profile, str(path), profile_rows.load(path))
        keep(cached, pickle.dumps(predictor))
    return replace(  # built complete from the cached fit, never patched after
        predictor,
        profile_path=str(path),  # the file as found now: the cache is keyed by content, shared by every checkout
        on_fit=on_fit,
        category_scales=network_scales.load(path),
        host=profiles.host_of(predictor.device),
        channels_last_models=functools.partial(
            channels_last_models, predictor.device, predictor.precision, predictor.backend, on_fit
        ),
    )


def load_conv_models(path: Path, on_fit: Callable[[], None] | None = None) -> tuple[LayerModels, str]:
    """A device profile's conv layer models and its configs' memory format: its whole predictor's when that is
    cached, else the conv trees alone, fitted once from its rows (1.6 s on one core, against 2.5 s for every group's;
    the trees of a group are fitted on its rows alone, so they are the same) and cached."""
    from threadpoolctl import threadpool_limits

    if cache_file(path).is_file():
        predictor = load_predictor(path, on_fit)
        return predictor.layer_models, predictor.memory_format
    cached = cache_file(path, "conv")
    found = _cached(cached)
    if found is None:
        profile = DeviceProfile.load(path)
        if on_fit is not None:
            on_fit()
        gpu = Gpu.of(profile.device, profile.precision)
        ops, _ = profile_rows.load(path) or profile_rows.derive(profile, gpu)
        with threadpool_limits(limits=FIT_THREADS):
            found = fit_layer_models(ops[ops["group"] == "conv"], gpu), profile.memory_format
        keep(cached, pickle.dumps(found))
    return found


_CHANNELS_LAST_MODELS: dict[tuple[str, str, str], LayerModels | None] = {}


def channels_last_models(
    device: str, precision: str, backend: str, on_fit: Callable[[], None] | None = None
) -> LayerModels | None:
    """The conv layer models of the shipped profile of ``device`` and ``backend`` whose configs were timed
    channels_last, in ``precision`` itself if one is shipped (beside the NCHW amp profile, the channels_last amp
    one), else in its unit (the fp16 one); loaded once per process (``load_conv_models``, ``on_fit`` told before a
    fit); None when none is shipped."""
    key = (device, precision, backend)
    if key not in _CHANNELS_LAST_MODELS:
        _CHANNELS_LAST_MODELS[key] = None
        wanted = [precision, parse_precision(precision).unit.value]
        candidates = [
            entry
            for entry in profiles.shipped()
            if (entry.precision, entry.backend) in [(p, backend) for p in wanted]
            and gpu_matches(entry.device, device)
            and entry.memory_format == "channels_last"
        ]
        candidates.sort(key=lambda entry: wanted.index(entry.precision))
        if candidates:
            _CHANNELS_LAST_MODELS[key] = load_conv_models(candidates[0].path, on_fit)[0]
    return _CHANNELS_LAST_MODELS[key]
