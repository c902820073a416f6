"""Predict a CNN's inference latency, throughput and FLOP utilization on a GPU from its device profile, without it.

The network is counted (``counting.count_traced``, the engine ``count`` uses, so every spec ``count`` takes works),
each op that launches work becomes a row (``features.op_row``; the ops inside a squeeze-excite module become one
gate row), the layer models (``predict.layers``) give each row's time, and the network's time is their sum plus
``gap_ms`` per row: the composition term, fitted on the profile's residual chains (which no layer model saw) as the
median of (measured - summed) / ops. The fit takes seconds, so a fitted predictor is cached per profile content
(``utilscope.cache.cache_dir("predict")``).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.cache import cache_dir
from utilscope.counting.counter import count_traced, fusion_savings
from utilscope.errors import UsageError
from utilscope.files import check_input_file, given_path, read_bytes, write_atomically
from utilscope.hardware.specs import gpu_matches
from utilscope.measure.backends import BACKENDS
from utilscope.measure.precision import parse_precision
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile
from utilscope.predict.features import Gpu, bias_add_row, config_events, kept_events, layout_copy_row, op_row
from utilscope.predict.layers import LayerModels, calibration_rows, fit_layer_models, se_row
from utilscope.predict.ops import OpConfig

PROFILES_DIR = Path(__file__).parent / "profiles"
FUSED_FROM = {"graph": ("inference",)}  # a profile of this backend also predicts these by the fusion model
FUSED_AWAY = 0.05  # an op left with less of its bytes than this launches no kernel of its own
CACHE_FORMAT = 1
FITTING_CODE = ("ops.py", "features.py", "layers.py", "predictor.py")  # a change to any refits a cached predictor


@dataclass
class Prediction:
    model: str
    gpu: str
    batch: int
    precision: str
    backend: str
    resolution: int
    flops: int  # per batch
    latency_ms: float
    samples_per_s: float
    utilization: float
    extrapolated: bool
    layers: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Predictor:
    profile_path: str
    device: str
    precision: str
    backend: str
    gpu: Gpu
    layer_models: LayerModels
    gap_ms: float

    def predict(self, model, batch: int, resolution: int | None = None, backend: str | None = None) -> Prediction:
        """One network at one batch size. ``model``: any spec ``count`` accepts, or a module. ``backend``
        ``inference`` (a graph profile only): the fused-execution model (``fused``)."""
        self.check_backend(backend)  # before the count: a bad backend costs nothing
        return self.predict_counted(*self.count(model, batch, resolution), backend)

    def count(self, model, batch: int, resolution: int | None = None):
        """``count_traced`` of a network as ``predict_counted`` takes it: in the profile's precision, channels_last
        as `profile` runs it."""
        dtype = parse_precision(self.precision).count_dtype
        return count_traced(model, batch, resolution, dtype, channels_last=True)

    def check_backend(self, backend: str | None) -> str:
        """``backend`` (None: the profile's) if this profile predicts it; UsageError otherwise."""
        backend = backend or self.backend
        if backend not in (self.backend, *FUSED_FROM.get(self.backend, ())):
            raise UsageError(f"the device profile {self.profile_path} predicts the {self.backend} backend"
                             f"{' and ' + ', '.join(FUSED_FROM[self.backend]) if self.backend in FUSED_FROM else ''},"
                             f" not {backend}")  # fmt: skip
        return backend

    def predict_counted(self, counted, recorded, backend: str | None = None, rows: pd.DataFrame | None = None):
        """``predict`` of a network already counted (``count_traced``'s result and trace); ``rows``: its
        ``network_rows``, when the caller has them (one trace predicted on several backends)."""
        backend = self.check_backend(backend)
        rows = network_rows(recorded, self.gpu) if rows is None else rows
        ms, reasons, latency_ms = self.compose(rows, backend)
        flops, batch = counted.total.flops, counted.batch
        layers = per_layer(rows, ms, reasons, counted)
        return Prediction(counted.model, self.device, batch, self.precision, backend, counted.resolution, flops,
                          latency_ms, batch / latency_ms * 1e3, flops / (latency_ms * 1e-3) / self.gpu.peak_flops,
                          any(reasons), layers)  # fmt: skip

    def compose(self, rows: pd.DataFrame, backend: str | None = None) -> tuple[np.ndarray, list[str], float]:
        """Each row's milliseconds and extrapolation reason, and their composition: the sum plus ``gap_ms`` per
        kernel launched (on a fused backend, one ``check_backend`` passed: ``fused``'s times and kernels)."""
        ms, reasons = self.layer_models.predict(rows)
        launches = len(rows)
        if (backend or self.backend) != self.backend:
            ms, launches = fused(rows, ms)
        return ms, reasons, float(ms.sum() + self.gap_ms * launches)

    def compose_many(self, networks: list[pd.DataFrame]) -> np.ndarray:
        """``compose``'s latency of each network (on the profile's backend), with one layer-model call for all of
        their rows: the trees' per-call cost dominates for small networks such as single blocks."""
        rows = pd.concat([frame.assign(network=i) for i, frame in enumerate(networks)], ignore_index=True)
        ms, _ = self.layer_models.predict(rows)
        per_network = pd.Series(ms).groupby(rows["network"]).agg(["sum", "size"])
        return (per_network["sum"] + self.gap_ms * per_network["size"]).to_numpy()


def fused(rows: pd.DataFrame, ms: np.ndarray) -> tuple[np.ndarray, int]:
    """A first model of fused execution (the ``inference`` backend: BN folded, elementwise ops fused by inductor):
    a memory-bound op becomes part of a generated kernel that streams what fusion leaves of its bytes
    (``fused_left``) at the roofline (its reference time scaled by that share; an op fused away entirely takes
    none and launches nothing); convs, GEMMs and gates keep the layer models' times. Returns the times and the
    number of kernels left."""
    memory = (rows["group"] == "memory").to_numpy()
    left = np.where(memory, rows["fused_left"].to_numpy(float), 1.0)
    return np.where(memory, rows["ref_ms"].to_numpy(float) * left, ms), int((left > FUSED_AWAY).sum())


def network_rows(recorded, gpu: Gpu) -> pd.DataFrame:
    """The rows of a traced network: one per op that launches work, one per squeeze-excite gate (its ops' run),
    each with the index of its layer (a gate's: its first op's), the indices of all its layers, and the share of
    its bytes left when elementwise and norm ops fuse into their producers (``counting.counter.fusion_savings``);
    before a conv whose NCHW input the GPU converts to channels_last, that copy's row (``layout_copy_row``); after a
    conv with a bias, the bias's add (``bias_add_row``)."""
    saved = dict(zip(map(id, recorded.events), fusion_savings(recorded.events, recorded.output_keys), strict=True))
    rows, gate = [], []
    for event in kept_events(recorded.events):
        if recorded.layers[event.layer].in_se:
            gate.append(event)
            continue
        if gate:
            rows.append(_gate(gate, gpu))
            gate = []
        left = 1 - saved[id(event)] / event.bytes if event.bytes else 1.0
        copy = layout_copy_row(event, gpu)
        if copy is not None:  # its conv's layer's, and not fused away
            rows.append({**copy, "layer": event.layer, "layers": (event.layer,), "fused_left": 1.0})
        rows.append({**op_row(event, gpu), "layer": event.layer, "layers": (event.layer,), "fused_left": left})
        bias = bias_add_row(event, gpu)
        if bias is not None:  # inductor fuses the peeled-off bias into the op that reads the conv's output
            rows.append({**bias, "layer": event.layer, "layers": (event.layer,), "fused_left": 0.0})
    if gate:
        rows.append(_gate(gate, gpu))
    return pd.DataFrame(rows)


def _gate(events, gpu: Gpu) -> dict:
    layers = tuple(dict.fromkeys(event.layer for event in events))
    return {
        **se_row([op_row(event, gpu) for event in events], gpu),
        "layer": layers[0],
        "layers": layers,
        "fused_left": 1.0,
    }


def per_layer(rows: pd.DataFrame, ms: np.ndarray, reasons: list[str], counted) -> list[dict]:
    """Predicted milliseconds per layer of the count (a gate's time split evenly over its layers), largest first."""
    per = {}
    for layers, row_ms, reason in zip(rows["layers"], ms, reasons, strict=True):
        for index in layers:
            entry = per.setdefault(index, {"predicted_ms": 0.0, "extrapolated": ""})
            entry["predicted_ms"] += row_ms / len(layers)
            entry["extrapolated"] = entry["extrapolated"] or reason
    total = float(ms.sum()) or 1.0
    out = []
    for index, entry in per.items():
        layer, layer_ms = counted.layers[index], float(entry["predicted_ms"])
        out.append({"name": layer.name, "type": layer.type, "op_class": layer.op_class, "flops": layer.flops,
                    "bytes": layer.bytes, "predicted_ms": layer_ms, "time_share": layer_ms / total,
                    "extrapolated": entry["extrapolated"]})  # fmt: skip
    return sorted(out, key=lambda layer: -layer["predicted_ms"])


def composition_gap_ms(profile: DeviceProfile, models: LayerModels) -> float:
    """The median over the profile's chains of (measured - summed layer predictions) / ops; 0 without chains."""
    residuals = []
    for key, measured_ms in profile.latency_ms.items():
        config = OpConfig(**profile.configs[key])
        if config.kind != "chain":
            continue
        rows = pd.DataFrame([op_row(event, models.gpu) for event in config_events(config)])
        residuals.append((measured_ms - models.predict(rows)[0].sum()) / len(rows))
    return float(np.median(residuals)) if residuals else 0.0


def fit_predictor(profile: DeviceProfile, path: str = "") -> Predictor:
    gpu = Gpu.of(profile.device, profile.precision)
    models = fit_layer_models(calibration_rows(profile, gpu), gpu)
    if not models.models:
        raise UsageError(f"the device profile {path} has too few timed configs to fit layer models")
    return Predictor(str(path), profile.device, profile.precision, profile.backend, gpu, models,
                     composition_gap_ms(profile, models))  # fmt: skip


def _cache_file(path: Path) -> Path:
    """The cache entry of a profile: keyed by its content, scikit-learn's version and the code that fits it."""
    versions = f"{CACHE_FORMAT}|{metadata.version('scikit-learn')}|{metadata.version('utilscope')}"
    code = b"".join((Path(__file__).parent / name).read_bytes() for name in FITTING_CODE)
    digest = hashlib.sha256(read_bytes(path, PROFILE_FILE) + versions.encode() + code).hexdigest()[:20]
    return cache_dir("predict") / f"{path.stem}-{digest}.pkl"


FIT_THREADS = 1  # OpenMP threads of the fit: more barely help (2 threads: 24.6 s against 21 s on one) and a busy
# machine's oversubscribed OpenMP took over 10 minutes


def load_predictor(path: str | Path, on_fit: Callable[[], None] | None = None) -> Predictor:
    """The predictor of a device profile file, fitted once (on ``FIT_THREADS`` OpenMP threads; about 20 s) and
    cached by the file's content; ``on_fit`` is called when a valid profile is about to be fitted."""
    from threadpoolctl import threadpool_limits

    path = check_input_file(path, PROFILE_FILE)
    cached = _cache_file(path)
    if cached.is_file():
        try:
            return pickle.loads(cached.read_bytes())
        except Exception:  # a stale or broken cache entry: fit again
            cached.unlink(missing_ok=True)
    profile = DeviceProfile.load(path)
    if on_fit is not None:
        on_fit()
    with threadpool_limits(limits=FIT_THREADS):
        predictor = fit_predictor(profile, str(path))
    write_atomically(cached, pickle.dumps(predictor))
    return predictor


def shipped_profiles() -> list[Path]:
    return sorted(PROFILES_DIR.glob("*.json"))


def profile_name(path: Path) -> tuple[str, str, str]:
    """A shipped profile's GPU, precision and backend, from its file name ``<gpu>_<precision>_<backend>.json``."""
    name_gpu, name_precision, name_backend = path.stem.rsplit("_", 2)
    return name_gpu, name_precision, name_backend


def check_gpu(predictor: Predictor, gpu: str | None) -> None:
    if gpu is not None and not gpu_matches(gpu, predictor.device):
        raise UsageError(f"the device profile {predictor.profile_path} is for {predictor.device}, not {gpu!r}")


def select_profile(gpu: str | None, profile: str | None, precision: str, backend: str) -> Path:
    """The profile file given, or the shipped one for ``gpu``, precision and backend (``<gpu>_<precision>_<backend>``
    in ``predict/profiles``; a graph profile predicts the inference backend too); UsageError listing the shipped ones
    otherwise."""
    parse_precision(precision)  # an unknown precision or backend is said as such, not as a missing profile
    BACKENDS.get(backend)
    if profile is not None:
        return given_path(profile, PROFILE_FILE)
    if gpu is None or not gpu.strip():
        raise UsageError("give --gpu (a shipped device profile, e.g. h200) or --profile FILE")
    for path in shipped_profiles():
        name_gpu, name_precision, name_backend = profile_name(path)
        predicts = (name_backend, *FUSED_FROM.get(name_backend, ()))
        if gpu_matches(gpu, name_gpu) and name_precision == precision and backend in predicts:
            return path
    shipped = ", ".join(p.stem for p in shipped_profiles()) or "none"
    raise UsageError(f"no device profile for GPU {gpu!r}, {precision}, {backend} backend (shipped: {shipped}); "
                     f"time one on that GPU with `utilscope calibrate`")  # fmt: skip
