"""A device profile's predictor, complete, and the fits kept of it: a profile's fit (``fitting``: its layer models
and launch gap, seconds) is kept per profile content in utilscope's cache folder (``utilscope.cache.cache_dir
("predict")``), keyed by the profile's bytes, scikit-learn's and utilscope's versions, ``CACHE_FORMAT`` and the text
of the code that fits (``FITTING_CODE``: not this module, which keeps and reads fits, nor ``predictor.py``, whose
composition runs after the fit). A shipped profile's fit is shipped too (``<profile>.fit-<key>.pkl.xz`` beside it,
keyed by the profile's bytes and the fitting code alone: ``python -m utilscope.predict.fit_cache PROFILE...`` writes
it), so a cold ``predict`` reads it instead of fitting, and every machine predicts from the same trees whatever its
scikit-learn."""

from __future__ import annotations

import functools
import hashlib
import lzma
import pickle
import sys
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pandas as pd

from utilscope.cache import cache_dir, keep
from utilscope.files import check_input_file, read_bytes, write_atomically
from utilscope.hardware.specs import gpu_matches
from utilscope.measure.precision import parse_precision
from utilscope.predict import fitting, network_scales, profile_rows, profiles
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile
from utilscope.predict.features import Gpu
from utilscope.predict.layers import LayerModels
from utilscope.predict.predictor import Predictor

CACHE_FORMAT = 3  # 2: the fit moved out of predictor.py; 3: layer models kept as trees.Trees
# a change to any of these refits a cached predictor
FITTING_CODE = ("ops.py", "features.py", "layers.py", "trees.py", "profile_rows.py", "fitting.py")
LAUNCH_GAPS_FILE = profiles.PROFILES_DIR / "launch_gaps.csv"  # written by scripts/launch_gaps.py (``launch_gaps``)


def launch_gaps(entries: list[profiles.Profile]) -> pd.DataFrame:
    """Per profile: its own chains' launch gap and its GPU's, the gap fitted over the chains of every profile of
    ``entries`` timed on the same GPU and backend (``fitting.composition_gap_ms``, one scale per profile). The
    launch gap is the GPU's and the runtime's, not a precision's or a layout's, and a profile's chains (85 of six
    ops on a 1,200-config profile) tell it only through their intercept: alone, the H100's nine profiles gave
    0.43–1.43 µs; pooled, 0.66 µs (docs/predict.md, "The launch gap, per GPU")."""
    groups: dict[tuple[str, str], list[profiles.Profile]] = {}
    for entry in entries:
        groups.setdefault((entry.device, entry.backend), []).append(entry)
    rows = []
    for (device, backend), group in groups.items():
        parts = [(_chain_rows(entry.path), load_predictor(entry.path).layer_models) for entry in group]
        gap_ms = fitting.composition_gap_ms(parts)
        for entry, part in zip(group, parts, strict=True):
            rows.append(
                {
                    "profile": entry.path.name,
                    "rows_key": profile_rows.rows_key(entry.path),
                    "device": device,
                    "backend": backend,
                    "chains": part[0]["chain"].nunique(),
                    "profiles": len(parts),
                    "own_gap_us": round(fitting.composition_gap_ms([part]) * 1e3, 4),
                    "gap_us": round(gap_ms * 1e3, 4),
                }
            )
    return pd.DataFrame(rows).sort_values("profile", ignore_index=True)


def _chain_rows(path: Path) -> pd.DataFrame:
    """A profile's chain rows: kept beside it, else traced from its configs."""
    rows = profile_rows.load(path)
    if rows is None:
        profile = DeviceProfile.load(path)
        return profile_rows.chain_rows(profile, Gpu.of(profile.device, profile.precision))
    return rows[1]


def launch_gap_ms(path: Path, own_ms: float) -> float:
    """The launch gap a profile's predictor composes with: its GPU's and backend's (``launch_gaps``), where
    ``LAUNCH_GAPS_FILE`` lists the profile at its current rows; else ``own_ms``, its own chains' (a user's profile,
    or a shipped one timed on since the file was written)."""
    return _shipped_launch_gaps().get((path.name, profile_rows.rows_key(path)), own_ms)


@functools.cache
def _shipped_launch_gaps() -> dict[tuple[str, str], float]:
    if not LAUNCH_GAPS_FILE.is_file():
        return {}
    frame = pd.read_csv(LAUNCH_GAPS_FILE)
    return {(r.profile, r.rows_key): r.gap_us / 1e3 for r in frame.itertuples()}


def cache_file(path: Path, part: str = "") -> Path:
    """The cache entry of a profile's predictor (``part``: of a part of it, e.g. "conv"): keyed by the profile's
    content, scikit-learn's version and the code that fits it."""
    versions = f"{CACHE_FORMAT}|{metadata.version('scikit-learn')}|{metadata.version('utilscope')}|{part}"
    return cache_dir("predict") / f"{path.stem}{'-' + part if part else ''}-{_digest(path, versions)[:20]}.pkl"


def _digest(path: Path, versions: str) -> str:
    """The digest of a profile's content, ``versions`` and the text of the code that fits it (``FITTING_CODE``)."""
    code = b"".join((Path(__file__).parent / name).read_bytes() for name in FITTING_CODE)
    return hashlib.sha256(read_bytes(path, PROFILE_FILE) + versions.encode() + code).hexdigest()


def fit_key(path: Path) -> str:
    """The digest of a profile's content and of the code that fits it: a shipped fit's key (``shipped_fit_file``)."""
    return _digest(path, f"{CACHE_FORMAT}|")[:16]


SHIPPED_FIT_SUFFIX = ".pkl.xz"


def shipped_fit_file(path: Path) -> Path:
    """The fit kept beside a profile (``write_shipped_fit``), current for its content and the fitting code."""
    return path.with_name(f"{path.stem}.fit-{fit_key(path)}{SHIPPED_FIT_SUFFIX}")


def write_shipped_fit(path: Path) -> Path:
    """Fit the profile at ``path`` (``fitting.fit_profile``) and keep the fit beside it, xz-compressed: its layer
    models, launch gap and condition, and the scikit-learn version that fitted them; the profile's fits of other
    keys are removed."""
    predictor = fitting.fit_profile(path)
    kept = shipped_fit_file(path)
    for stale in path.parent.glob(f"{path.stem}.fit-*{SHIPPED_FIT_SUFFIX}"):
        if stale != kept:
            stale.unlink()
    fields = ("device", "precision", "backend", "gpu", "layer_models", "gap_ms", "memory_format")
    fit = {name: getattr(predictor, name) for name in fields} | {"scikit_learn": metadata.version("scikit-learn")}
    write_atomically(kept, lzma.compress(pickle.dumps(fit), preset=9))
    return kept


def _shipped_fit(path: Path) -> Predictor | None:
    """The predictor of the fit kept beside the profile, or None when there is no current one."""
    kept = shipped_fit_file(path)
    if not kept.is_file():
        return None
    fit = pickle.loads(lzma.decompress(kept.read_bytes()))
    fit.pop("scikit_learn")
    return Predictor(profile_path=str(path), **fit)


def _cached(file: Path):
    """What a cache entry holds, or None when there is none; a stale or broken entry is removed (fit again)."""
    if file.is_file():
        try:
            return pickle.loads(file.read_bytes())
        except Exception:
            file.unlink(missing_ok=True)
    return None


def _cached_fit(path: Path, on_fit: Callable[[], None] | None) -> Predictor:
    """The profile's fit in this machine's cache, else fitted now (``fitting.fit_profile``) and cached."""
    cached = cache_file(path)
    predictor = _cached(cached)
    if predictor is None:
        predictor = fitting.fit_profile(path, on_fit)
        keep(cached, pickle.dumps(predictor))
    return predictor


def load_predictor(path: str | Path, on_fit: Callable[[], None] | None = None) -> Predictor:
    """The predictor of a device profile file, complete: its fit (layer models and launch gap: the fit kept beside
    it when current, ``shipped_fit_file``; else the one this machine cached, else fitted once, seconds from the rows
    kept beside a shipped profile, and cached by the file's content), its GPU's launch gap where the shipped file has
    it (``launch_gap_ms``), the network scales kept beside the file, its GPU's channels_last conv models for an NCHW
    profile, and the host profile of its GPU's machine (``profiles.host_of``). ``on_fit`` is called when a valid
    profile is about to be fitted, by this call or by the predictor's own later fit of another (``profile_ms``)."""
    path = check_input_file(path, PROFILE_FILE)
    predictor = _shipped_fit(path) or _cached_fit(path, on_fit)  # the shipped fit first: the same trees everywhere
    return replace(  # built complete from the kept fit, never patched after
        predictor,
        profile_path=str(path),  # the file as found now: the cache is keyed by content, shared by every checkout
        gap_ms=launch_gap_ms(path, predictor.gap_ms),
        on_fit=on_fit,
        category_scales=network_scales.load(path),
        host=profiles.host_of(predictor.device),
        channels_last_models=functools.partial(
            channels_last_models, predictor.device, predictor.precision, predictor.backend, on_fit
        ),
    )


def load_conv_models(path: Path, on_fit: Callable[[], None] | None = None) -> tuple[LayerModels, str]:
    """A device profile's conv layer models and its configs' memory format: its whole predictor's when that is
    kept (shipped or cached), else the conv trees alone (``fitting.fit_conv_models``: 1.6 s on one core, against
    2.5 s for every group's), fitted once and cached."""
    fitted = _shipped_fit(path) or _cached(cache_file(path))  # the whole predictor's fit, each key computed once
    if fitted is not None:
        return fitted.layer_models, fitted.memory_format
    cached = cache_file(path, "conv")
    found = _cached(cached)
    if found is None:
        found = fitting.fit_conv_models(path, on_fit)
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


def main(argv: list[str]) -> int:
    for name in argv:
        print(f"{write_shipped_fit(check_input_file(name, PROFILE_FILE))} written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
