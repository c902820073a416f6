"""Which device profile predicts a request, and for which GPUs: the shipped profiles (``profiles/``, named
``<gpu>_<precision>[_nhwc|_nchw]_<backend>.json``), the one a GPU, precision and backend select, and the spec-table
GPUs a prediction is transferred to (``transfer``)."""

from __future__ import annotations

from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import given_path
from utilscope.hardware.specs import gpu_matches, load_specs, lookup_gpu, normalize_precision
from utilscope.measure.backends import BACKENDS
from utilscope.measure.precision import Precision, parse_precision
from utilscope.predict.calibrate import PROFILE_FILE
from utilscope.predict.features import Gpu
from utilscope.predict.predictor import ALSO_PREDICTS, FUSED_BACKENDS, Predictor

PROFILES_DIR = Path(__file__).parent / "profiles"
LAYOUT_TOKENS = ("nhwc", "nchw")  # a profile name's optional layout; the profile's ``memory_format`` is the truth


def shipped_profiles() -> list[Path]:
    return sorted(PROFILES_DIR.glob("*.json"))


def profile_name(path: Path) -> tuple[str, str, str]:
    """A shipped profile's GPU, precision and backend, from its file name ``<gpu>_<precision>[_<layout>]_<backend>
    .json``; the precision may hold an underscore (``amp_bf16``), the layout is ``nhwc`` or ``nchw``. UsageError for
    a name not of that form."""
    rest, _, name_backend = path.stem.rpartition("_")
    head, _, layout = rest.rpartition("_")
    rest = head if layout in LAYOUT_TOKENS else rest
    for precision in sorted((p.value for p in Precision), key=len, reverse=True):  # amp_bf16 before bf16
        if rest.endswith(f"_{precision}") and len(rest) > len(precision) + 1:
            return rest.removesuffix(f"_{precision}"), precision, name_backend
    raise UsageError(f"{path.name}: a device profile's name is <gpu>_<precision>_<backend>.json")


def select_profile(gpu: str | None, profile: str | None, precision: str, backend: str) -> Path:
    """The profile file given; else the shipped one for ``gpu`` in the precision's unit that predicts the backend
    (``<gpu>_<precision>_<backend>`` in ``predict/profiles``; a graph profile predicts the others too); else, for a
    GPU without one (``transfer_targets`` says which), a shipped profile of another GPU to transfer from.
    UsageError listing the shipped ones when there is none."""
    unit = parse_precision(precision).unit.value  # an unknown precision or backend is said as such
    BACKENDS.get(backend)
    if profile is not None:
        return given_path(profile, PROFILE_FILE)
    if gpu is None or not gpu.strip():
        raise UsageError("give --gpu (a GPU of the spec table, or all) or --profile FILE")
    fitting = sorted(
        (path for path in shipped_profiles() if _predicts(path, unit, backend)),
        key=lambda path: profile_name(path)[1] != preferred_precision(precision, backend),
    )
    own = [path for path in fitting if gpu_matches(gpu, profile_name(path)[0])]
    if own or fitting:
        return (own or fitting)[0]
    shipped = ", ".join(p.stem for p in shipped_profiles()) or "none"
    raise UsageError(
        f"no device profile for {unit}, {backend} backend (shipped: {shipped}); "
        f"time one on a GPU with `utilscope calibrate`"
    )


def preferred_precision(precision: str, backend: str) -> str:
    """The precision of the profile to predict ``precision`` on ``backend`` from, among those of its unit: a
    profile timed in the precision itself (amp: fp32 weights under autocast, NCHW) for the kernels that run it, but
    for inductor's backends (``FUSED_BACKENDS``) the unit's own (fp16, channels_last): inductor's layout optimization
    runs a graph's convs channels_last and fuses autocast's casts into its kernels."""
    parsed = parse_precision(precision)
    return parsed.unit.value if backend in FUSED_BACKENDS else parsed.value


def _predicts(path: Path, unit: str, backend: str) -> bool:
    _, name_precision, name_backend = profile_name(path)
    same_unit = parse_precision(name_precision).unit.value == unit
    return same_unit and backend in (name_backend, *ALSO_PREDICTS.get(name_backend, ()))


def transfer_targets(gpu: str, predictor: Predictor) -> list[Gpu] | None:
    """The GPUs to predict for: None for the profile's own GPU; ``all``: every GPU of the spec table with the
    figures ``transfer`` needs and a peak in the profile's precision; else the one named
    (``hardware.specs.lookup_gpu``)."""
    if gpu_matches(gpu, predictor.device):
        return None
    spec = lookup_gpu(gpu, predictor.precision)
    if spec is None:
        return [Gpu.from_spec(spec, predictor.precision) for spec in load_specs() if transferable(spec, predictor)]
    return [Gpu.from_spec(spec, predictor.precision)]


def transferable(spec, predictor: Predictor) -> bool:
    """A spec row ``transfer`` can predict for in the profile's precision."""
    figures = spec.sm_count and spec.boost_clock_mhz and spec.memory_bandwidth_gbs
    return bool(figures) and normalize_precision(predictor.precision) in spec.precisions
