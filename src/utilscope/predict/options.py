"""What a ``predict`` request's options must agree on, and the forms of its prices and anchors, checked without
torch: ``run.PredictRequest`` and ``anchors.Anchor`` check themselves with these when made, and the command line
before it imports the library (a usage error in a fraction of a second)."""

from __future__ import annotations

import math

from utilscope.errors import UsageError
from utilscope.hardware.specs import DeviceSpec, find_spec, gpu_names, lookup_gpu
from utilscope.limits import check_batch, check_positive


def check_prices(prices: dict[str, float] | None) -> dict[str, float]:
    """``{GPU: USD per hour}`` keyed by spec key; UsageError naming an unknown GPU or a price that is not positive."""
    checked = {}
    for gpu, usd in (prices or {}).items():
        spec = find_spec(str(gpu).strip())
        value = usd if isinstance(usd, (int, float)) and not isinstance(usd, bool) else math.nan
        if spec is None or not 0 < value < math.inf:
            raise UsageError(
                f"price {gpu!r}: {usd!r}: give a GPU of the spec table and a positive price in USD per hour"
            )
        checked[spec.key] = float(value)
    return checked


def parse_prices(text: str | None) -> dict[str, float]:
    """``GPU=USD_per_hour,...`` (``predict --price``) as {spec key: USD per hour}, each entry checked by
    ``check_prices``; UsageError naming a bad entry."""
    prices = {}
    for entry in filter(None, (part.strip() for part in (text or "").split(","))):
        gpu, _, usd = entry.partition("=")
        try:
            prices.update(check_prices({gpu: float(usd)}))
        except (ValueError, UsageError):
            raise UsageError(
                f"--price {entry!r}: give GPU=USD_per_hour with a GPU of the spec table and a positive price"
            ) from None
    return prices


def check_anchor_numbers(model: str, batch: int, samples_per_s: float) -> None:
    """An anchor's throughput (positive, finite) and batch size (``limits.check_batch``); its model is the zoo's to
    check."""
    check_positive(samples_per_s, f"anchor {model}@{batch}'s throughput", "samples/s")
    check_batch(batch)


def split_anchor(text: str) -> tuple[str, int, float]:
    """``SPEC@BATCH=SAMPLES_PER_S`` (``predict --anchor``) as (spec, batch, samples/s), its numbers checked
    (``check_anchor_numbers``); UsageError saying the form when it is not of it."""
    head, equals, value = text.strip().rpartition("=")
    model, at, batch = head.rpartition("@")
    try:
        if not (equals and at and model.strip()):
            raise ValueError
        numbers = int(batch), float(value)
    except ValueError:
        raise UsageError(f"--anchor {text!r}: give SPEC@BATCH=SAMPLES_PER_S, e.g. timm:resnet50@256=3100") from None
    check_anchor_numbers(model.strip(), *numbers)
    return model.strip(), *numbers


def check_host_backend(host_profile: str | None, backend: str) -> None:
    """A host profile models eager's calls: with another backend it is a UsageError."""
    if host_profile is not None and backend != "eager":
        raise UsageError(
            f"a host profile models eager's calls; the {backend} backend launches without them: give --backend eager"
        )


def check_target(gpu: str | None, profile: str | None, precision: str, anchored: bool) -> list[DeviceSpec | None]:
    """The GPUs a request predicts (``--gpu``: a GPU of the spec table that has the precision's units, a list, or
    ``all``: None), checked to agree with ``profile`` (one of the two is given) and with anchors (``anchored``:
    measurements of one GPU); [] for a profile's own GPU."""
    if gpu is not None and gpu.strip():
        specs = [lookup_gpu(name, precision) for name in gpu_names(gpu)]
        if "all" in map(str.casefold, gpu_names(gpu)) and len(specs) > 1:
            raise UsageError(f"--gpu {gpu!r}: give all, one GPU or a list of GPUs, not all in a list")
        if anchored and (len(specs) != 1 or specs[0] is None):
            raise UsageError("anchors are measurements of one GPU: give --gpu GPU, not all or a list")
        return specs
    if profile is None:
        raise UsageError("give --gpu (a GPU of the spec table, or all) or --profile FILE")
    if anchored:
        raise UsageError("anchors are measurements of one GPU: give --gpu GPU")
    return []
