"""Option values: argparse ``type`` functions that parse a value and check it with the library's own check while
parsing (``checked``): a bad batch size, precision or GPU is one line before any file is read, model built or heavy
module imported (a fraction of a second). ``SEED`` is every ``--seed``, ``BATCH`` / ``BATCHES`` every ``--batch``,
``PRECISION`` / ``precisions`` every ``--precision``, ``BACKEND`` every ``--backend`` of one, ``DTYPE`` ``count``'s
``--dtype``, ``GPUS`` ``predict``'s ``--gpu``, ``GPU`` ``nas``'s (a spec-table GPU here; against its ``--profile``
later), ``input_file`` an input file's path (it exists and can be read); the library checks the same values again
when its objects are made.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from utilscope.errors import UsageError
from utilscope.files import check_input_file
from utilscope.hardware.specs import gpu_names, lookup_gpu
from utilscope.limits import check_batch, check_batches, check_count, check_seed
from utilscope.models import sets, timm_sets
from utilscope.models.sources import REPARAM, unknown_model
from utilscope.precision import check_counted, parse_precision


def parse_batches(text: str | None) -> list[int] | None:
    """``"1,8,32"`` -> [1, 8, 32]; None -> None (the command's default); ``""`` -> [] (the library says it needs
    one). Strict: an empty element (``"1,,2"``, ``"8,"``) or a non-integer is a UsageError; the library checks the
    sizes themselves."""
    if text is None:
        return None
    if not text:
        return []
    parts = _elements(text, "batch sizes", "1,8,32")
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise UsageError(f"batch sizes must be comma-separated integers, got {text!r}") from None


def parse_list(text: str | None, option: str) -> tuple[str, ...]:
    """``"fp16,bf16"`` -> ("fp16", "bf16"); None -> () (the command's default). An empty list (``--precision ''``,
    which used to mean the default) or an empty element (``"fp16,,bf16"``) is a UsageError naming ``option``."""
    if text is None:
        return ()
    if not text.strip():
        raise UsageError(f"{option} is empty: give at least one value, or leave {option} out for its default")
    return _elements(text, "lists", "fp16,bf16")


def _elements(text: str, what: str, example: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in text.split(","))
    if not all(parts):
        raise UsageError(f"{what} must be comma-separated without empty elements (e.g. {example}), got {text!r}")
    return parts


def checked(parse: Callable[[str], object], check: Callable, name: str) -> Callable[[str], object]:
    """An argparse ``type``: ``check(parse(text))``, whose UsageError is argparse's one-line error for the option
    (checked while parsing: before any file is read or model built). ``name`` is the type argparse names in "invalid
    NAME value" when ``parse`` fails."""

    def convert(text: str):
        value = parse(text)
        try:
            return check(value)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def whole(name: str, low: int = 1, high: int | None = None, why: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number ``low <= n <= high`` (``limits.check_count``)."""
    return checked(int, lambda value: check_count(value, name, low, high, why), "int")


SEED = checked(int, lambda seed: check_seed(seed, "--seed"), "int")  # 0 <= seed <= 2**32 - 1, every --seed
BATCH = checked(int, check_batch, "int")  # every --batch of one size: 1 to MAX_BATCH
BATCHES = checked(str, lambda text: check_batches(parse_batches(text)), "batches")  # every --batch list: "1,8,32"


def _precision(text: str) -> str:
    parse_precision(text)
    return text


def _gpus(text: str) -> str:
    for name in gpu_names(text):
        lookup_gpu(name)  # "all" is None
    return text


def _gpu(text: str) -> str:
    lookup_gpu(text)
    return text


def input_file(what: str) -> Callable[[str], str]:
    """An argparse ``type``: the path of a file to read ``what`` from, checked to exist and be readable while parsing
    (``files.check_input_file``); the text as given."""

    def check(text: str) -> str:
        check_input_file(text, what)
        return text

    return checked(str, check, "file")


def _model(text: str) -> str:
    """A ``timm:NAME`` the installed timm lacks is a UsageError while parsing (``timm_sets.installed_names``: the
    shipped table of timm's names, when it is the installed timm's, model_sets.toml's [timm] version); every other
    model is checked when it is built."""
    prefix, sep, name = text.strip().partition(":")
    name = name.removesuffix(REPARAM)
    checkable = prefix == "timm" and sep and name and not any(c in name for c in "*?[")
    known = timm_sets.installed_names(sets.timm_version()) if checkable else None
    if known is not None and name not in known:
        raise unknown_model(text.strip(), {"timm": sorted(known)}, name)
    return text


def _backend(text: str) -> str:
    from utilscope.measure.backends import get_backend  # its registry imports nothing heavy

    get_backend(text)
    return text


PRECISION = checked(str, _precision, "precision")  # every --precision of one: a measured precision's name
BACKEND = checked(str, _backend, "backend")  # every --backend of one: a backend's name
DTYPE = checked(str, check_counted, "dtype")  # count's --dtype: one the counting engine traces in
GPUS = checked(str, _gpus, "gpu")  # predict's --gpu: GPUs of the spec table (one, a list, or all), the text as given
GPU = checked(str, _gpu, "gpu")  # nas's --gpu: one GPU of the spec table, the text as given
MODEL = checked(str, _model, "model")  # a model argument: a timm:NAME the installed timm lacks refused here


def precisions(option: str) -> Callable[[str], tuple[str, ...]]:
    """An argparse ``type``: a comma-separated list of measured precisions (``parse_list``, whose messages name
    ``option``)."""
    return checked(str, lambda text: tuple(_precision(name) for name in parse_list(text, option)), "precisions")


__all__ = [
    "BATCH",
    "BATCHES",
    "BACKEND",
    "DTYPE",
    "GPU",
    "GPUS",
    "MODEL",
    "PRECISION",
    "SEED",
    "checked",
    "input_file",
    "parse_batches",
    "parse_list",
    "precisions",
    "whole",
]
