"""Which device profile predicts a request, and for which GPUs: the one the registry (``predict.profiles``) picks
for a GPU, precision, layout and backend, and the spec-table GPUs a prediction is transferred to (``transfer``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from utilscope.errors import UsageError
from utilscope.files import DEVICE_PROFILE_FILE, given_path
from utilscope.hardware.specs import gpu_matches, gpu_names, load_specs, lookup_gpu
from utilscope.measure.backends import BACKENDS
from utilscope.precision import Precision, parse_precision
from utilscope.predict import profiles

if TYPE_CHECKING:  # the profile's choice (``select_profile``) imports neither: the command line makes it while parsing
    from utilscope.predict.features import Gpu
    from utilscope.predict.predictor import Predictor

PROFILES_DIR = profiles.PROFILES_DIR


def shipped_profiles() -> list[Path]:
    return [entry.path for entry in profiles.shipped()]


def select_profile(
    gpu: str | None, profile: str | None, precision: str, backend: str, channels_last: bool = True
) -> Path:
    """The profile file given; else, of the shipped profiles that express the condition (``Profile.expresses``;
    on a GPU without TF32 units an fp32 or tf32 request is fp32_strict's, ``profiles.stand_ins``), the one
    ``profiles.nearest`` picks for ``gpu`` (its own, else one to transfer from). UsageError naming the condition
    and the shipped profiles when none does."""
    parse_precision(precision)  # an unknown precision or backend is said as such
    BACKENDS.get(backend)
    if profile is not None:
        return given_path(profile, DEVICE_PROFILE_FILE)
    if gpu is None or not gpu.strip():
        raise UsageError("give --gpu (a GPU of the spec table, or all) or --profile FILE")
    spec = one_gpu(gpu)
    shipped = profiles.shipped()
    for wanted in profiles.stand_ins(precision, spec):
        fitting = [entry for entry in shipped if entry.expresses(wanted, backend, channels_last)]
        if fitting:
            return profiles.nearest(fitting, spec).path
    layout = "channels_last" if channels_last else "NCHW (contiguous)"
    names = ", ".join(entry.path.stem for entry in shipped) or "none"
    raise UsageError(
        f"no device profile expresses {precision} on {layout} tensors on the {backend} backend (shipped: "
        f"{names}); time one on a GPU with `utilscope calibrate`"
    )


def one_gpu(gpu: str | None):
    """The spec row of ``--gpu`` when it names one GPU of the table (None: all, a list, or none)."""
    names = gpu_names(gpu) if gpu else []
    return lookup_gpu(names[0]) if len(names) == 1 else None


def transfer_targets(gpu: str, predictor: Predictor) -> list[Gpu | None] | None:
    """The GPUs to predict for (``gpu_names``): None for the profile's own GPU alone; ``all``: every GPU of the spec
    table with the figures ``transfer`` needs and a peak in the profile's precision; else each one named
    (``hardware.specs.lookup_gpu``), None standing for the profile's own."""
    from utilscope.predict.features import Gpu

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
