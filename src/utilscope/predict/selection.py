"""Which device profile predicts a request, and for which GPUs: the shipped profiles (``profiles/``, named
``<gpu>_<precision>[_nhwc|_nchw]_<backend>.json``), the one a GPU, precision and backend select, and the spec-table
GPUs a prediction is transferred to (``transfer``)."""

from __future__ import annotations

import functools
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import given_path
from utilscope.hardware.specs import gpu_matches, load_specs, lookup_gpu
from utilscope.measure.backends import BACKENDS
from utilscope.measure.precision import Precision, parse_precision
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile
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


@functools.lru_cache(maxsize=32)
def _recorded_memory_format(path: Path, mtime_ns: int) -> str:
    return DeviceProfile.load(path).memory_format


def profile_memory_format(path: Path) -> str:
    """The layout a shipped profile's configs were timed in: its name's token (``nhwc``: channels_last, ``nchw``:
    contiguous), else the one the profile records."""
    token = path.stem.rpartition("_")[0].rpartition("_")[2]
    if token in LAYOUT_TOKENS:
        return "channels_last" if token == "nhwc" else "contiguous"
    return _recorded_memory_format(path, path.stat().st_mtime_ns)


def expresses(path: Path, precision: str, backend: str, channels_last: bool) -> bool:
    """Whether a shipped profile predicts ``precision`` on ``backend`` with that layout: on ``graph`` and ``eager``
    it was timed in the precision and the layout itself; on the fused backends (``FUSED_BACKENDS``) it is the graph
    profile of the precision's unit timed channels_last (inductor's layout optimization runs a graph's convs
    channels_last and fuses autocast's casts into its kernels, whatever layout the input has)."""
    _, name_precision, name_backend = profile_name(path)
    if backend not in (name_backend, *ALSO_PREDICTS.get(name_backend, ())):
        return False
    layout = profile_memory_format(path)
    if backend in FUSED_BACKENDS:
        return name_precision == parse_precision(precision).unit.value and layout == "channels_last"
    return name_precision == precision and layout == ("channels_last" if channels_last else "contiguous")


def select_profile(
    gpu: str | None, profile: str | None, precision: str, backend: str, channels_last: bool = True
) -> Path:
    """The profile file given; else the shipped one for ``gpu`` that expresses the condition (``expresses``); else,
    for a GPU without one (``transfer_targets`` says which), a shipped profile of another GPU that does, to
    transfer from. UsageError naming the condition and the shipped profiles when none does."""
    parse_precision(precision)  # an unknown precision or backend is said as such
    BACKENDS.get(backend)
    if profile is not None:
        return given_path(profile, PROFILE_FILE)
    if gpu is None or not gpu.strip():
        raise UsageError("give --gpu (a GPU of the spec table, or all) or --profile FILE")
    fitting = [path for path in shipped_profiles() if expresses(path, precision, backend, channels_last)]
    own = [path for path in fitting if any(gpu_matches(name, profile_name(path)[0]) for name in gpu_names(gpu))]
    if own or fitting:
        return (own or fitting)[0]
    layout = "channels_last" if channels_last else "NCHW (contiguous)"
    shipped = ", ".join(p.stem for p in shipped_profiles()) or "none"
    raise UsageError(
        f"no device profile expresses {precision} on {layout} tensors on the {backend} backend (shipped: "
        f"{shipped}); time one on a GPU with `utilscope calibrate`"
    )


def gpu_names(gpu: str) -> list[str]:
    """The GPU names of ``--gpu``: one, ``all``, or a comma-separated list (``l4,a100_sxm4_80gb``)."""
    return [name.strip() for name in gpu.split(",") if name.strip()]


def transfer_targets(gpu: str, predictor: Predictor) -> list[Gpu | None] | None:
    """The GPUs to predict for (``gpu_names``): None for the profile's own GPU alone; ``all``: every GPU of the spec
    table with the figures ``transfer`` needs and a peak in the profile's precision; else each one named
    (``hardware.specs.lookup_gpu``), None standing for the profile's own."""
    names = gpu_names(gpu)
    if len(names) == 1 and gpu_matches(names[0], predictor.device):
        return None
    if len(names) == 1 and lookup_gpu(names[0], predictor.precision) is None:
        return [Gpu.from_spec(spec, predictor.precision) for spec in load_specs() if transferable(spec, predictor)]
    targets = []
    for name in dict.fromkeys(names):
        own = gpu_matches(name, predictor.device)
        targets.append(None if own else Gpu.from_spec(lookup_gpu(name, predictor.precision), predictor.precision))
    return targets


def transferable(spec, predictor: Predictor) -> bool:
    """A spec row ``transfer`` can predict for in the profile's precision."""
    figures = spec.sm_count and spec.boost_clock_mhz and spec.memory_bandwidth_gbs
    return bool(figures) and spec.unit_for(Precision(predictor.precision)) in spec.precisions
