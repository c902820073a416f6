"""The one rule of which condition a device profile predicts (its precision, layout and backend against the asked
ones), without torch: ``predictor.Predictor.check_condition`` and the profile registry (``profiles``) apply it, and
the command line through the registry's choice (``selection.select_profile``) before it imports the library."""

from __future__ import annotations

from utilscope.precision import parse_precision

# a profile of this backend also predicts these: by the fusion model (inference, compile), or with its own kernels
# timed as it timed them (eager: the same kernels, launched one by one by the host: ``predict.host``)
ALSO_PREDICTS = {"graph": ("inference", "compile", "eager")}
FUSED_BACKENDS = ("inference", "compile")


def backend_problem(own: str, backend: str) -> str | None:
    """Why a profile timed on ``own`` does not predict ``backend`` (None: it does; ``ALSO_PREDICTS``)."""
    others = ALSO_PREDICTS.get(own, ())
    if backend in (own, *others):
        return None
    also = f" and {', '.join(others)}" if others else ""
    return f"predicts the {own} backend{also}, not {backend}"


def precision_problem(own: str, precision: str) -> str | None:
    """Why a profile timed in ``own`` does not predict ``precision`` (None: its own, or autocast to its unit)."""
    if parse_precision(precision).unit is parse_precision(own).unit:
        return None
    return f"is in {own}: it predicts {own} and autocast to it, not {precision}"


def condition_problem(
    own_precision: str, own_layout: str, own_backend: str, precision: str, backend: str, channels_last: bool
) -> str | None:
    """The one rule of what a profile predicts, None when it does: on ``graph`` and ``eager`` its own precision and
    layout (never an answer labelled with the asked condition but computed for another); on the fused backends
    (``FUSED_BACKENDS``) its unit, whatever the layout. Else why not."""
    problem = backend_problem(own_backend, backend) or precision_problem(own_precision, precision)
    if problem or backend in FUSED_BACKENDS:
        return problem
    layout = "channels_last" if channels_last else "contiguous"
    if (precision, layout) != (own_precision, own_layout):
        return (
            f"was timed in {own_precision} on {own_layout} tensors: it does not predict {precision} on {layout} "
            f"tensors on the {backend} backend"
        )
    return None
