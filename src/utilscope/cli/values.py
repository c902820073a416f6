"""Option values: argparse ``type`` functions that parse a value and check it with the library's own check while parsing
(``checked``): a bad batch size, precision, number or path is one line before any file is read, model built or heavy
module imported (a fraction of a second). ``SEED`` is every ``--seed``, ``BATCH`` / ``BATCHES`` every ``--batch``,
``PRECISION`` / ``precisions`` every ``--precision``, ``BACKEND`` every ``--backend`` of one, ``DTYPE`` ``count``'s
``--dtype``, ``GPUS`` ``predict``'s ``--gpu``, ``GPU`` ``nas``'s (a spec-table GPU here; against its ``--profile``
later), ``input_file`` an input file's path (it exists and can be read; ``text_file`` a text file's, its start
checked too), ``output_file`` / ``output_folder`` a path to write (``files.check_output_file`` /
``check_output_folder``), ``store`` a results store's (``survey.store_files.check_store``), ``MODEL`` every model
argument (``one_model`` a verb's that takes one, refusing a glob; ``count``, ``predict``, ``profile``, ``layers``,
``advise``; ``MODEL_AT`` ``survey``'s ``--models``: a model's name no source has, or an unknown source, from the
shipped tables of names). The numbers' rules are ``limits``' (``PEAK`` every ``--peak``, ``THREADS`` every
``--threads``, ``JOBS`` / ``TIMEOUT`` / ``TIMED_MS`` a grid's ``--jobs``, ``--timeout`` and ``--min-time-ms``, ...).
The library checks the same values again when its objects are made.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable, Collection
from importlib import metadata
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import check_input_file, check_output_file, check_output_folder, check_text_start, is_folder
from utilscope.hardware.devices import check_device
from utilscope.hardware.specs import check_peak_tflops, gpu_names, lookup_gpu
from utilscope.limits import (
    check_batch,
    check_batches,
    check_benchmark_limit,
    check_budget,
    check_count,
    check_flops,
    check_jobs,
    check_multiple,
    check_positive,
    check_resolution,
    check_seed,
    check_threads,
    check_timed_ms,
    check_timeout,
)
from utilscope.models import file_formats, sets, timm_sets, torchvision_names
from utilscope.models.sources import (
    ENTRY_POINT_GROUP,
    FACTORY_FILE,
    FILE_DIGEST_CHARS,
    MODEL_FILE,
    REPARAM,
    a_folder,
    check_factory_file,
    empty_name,
    glob_of_shaped,
    is_glob,
    matching,
    no_match,
    not_of_source,
    unknown_glob_source,
    unknown_model,
    unknown_source,
)
from utilscope.nas.arch_files import check_architecture, read_lines
from utilscope.nas.file_formats import OBJECTIVE_FILE, read_objective
from utilscope.nas.strategies import get_strategy
from utilscope.precision import check_counted, parse_precision
from utilscope.predict.options import parse_prices, split_anchor
from utilscope.present import check_top
from utilscope.survey.ray_cluster import check_address
from utilscope.survey.shards import parse_shard
from utilscope.survey.store_files import check_store


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


def as_given(check: Callable[[str], object], name: str) -> Callable[[str], str]:
    """An argparse ``type`` (``checked``) that only checks: ``check(text)``, then the text as given."""

    def check_text(text: str) -> str:
        check(text)
        return text

    return checked(str, check_text, name)


def whole(name: str, low: int = 1, high: int | None = None, why: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number ``low <= n <= high`` (``limits.check_count``)."""
    return checked(int, lambda value: check_count(value, name, low, high, why), "int")


def positive(name: str, unit: str) -> Callable[[str], float]:
    """An argparse ``type``: a positive, finite number of ``unit`` (``limits.check_positive``)."""
    return checked(float, lambda value: check_positive(value, name, unit), "float")


def flops(name: str) -> Callable[[str], float]:
    """An argparse ``type``: a bound in FLOPs per sample, finite and not negative (``limits.check_flops``)."""
    return checked(float, lambda value: check_flops(value, name), "float")


SEED = checked(int, lambda seed: check_seed(seed, "--seed"), "int")  # 0 <= seed <= 2**32 - 1, every --seed
BATCH = checked(int, check_batch, "int")  # every --batch of one size: 1 to MAX_BATCH
BATCHES = checked(str, lambda text: check_batches(parse_batches(text)), "batches")  # every --batch list: "1,8,32"
RES = checked(int, check_resolution, "int")  # every --res: 8 to 4096 pixels
PEAK = checked(float, check_peak_tflops, "float")  # every --peak: positive, finite TFLOP/s
THREADS = checked(int, check_threads, "int")  # every --threads: a positive thread count
BENCHMARK_LIMIT = checked(int, check_benchmark_limit, "int")  # every --cudnn-benchmark-limit: 0 (all) or more
JOBS = checked(int, check_jobs, "int")  # a grid's --jobs: 1 to this machine's cores
TIMEOUT = checked(float, check_timeout, "float")  # a grid's --timeout: positive seconds, at most a week
TIMED_MS = checked(float, check_timed_ms, "float")  # a grid's --min-time-ms: positive, at most a minute
BUDGET = checked(int, check_budget, "int")  # nas search's --budget
MULTIPLE = checked(int, check_multiple, "int")  # advise's --multiple: 1 to 128
TOP = checked(int, check_top, "int")  # every --top: at least 1


def _precision(text: str) -> str:
    parse_precision(text)
    return text


def output_file(what: str, suffixes: tuple[str, ...] = ()) -> Callable[[str], str]:
    """An argparse ``type``: the path of a file to write ``what`` to (one of ``suffixes`` when given), checked while
    parsing and nothing created (``files.check_output_file``); the text as given."""
    return as_given(lambda text: check_output_file(text, what, suffixes), "file")


def output_folder(what: str) -> Callable[[str], str]:
    """An argparse ``type``: the path of a folder to write ``what`` into, checked while parsing and nothing created
    (``files.check_output_folder``); the text as given."""
    return as_given(lambda text: check_output_folder(text, what), "folder")


def store(writable: bool) -> Callable[[str], str]:
    """An argparse ``type``: a results store's path, to read or to write (created when missing), checked while
    parsing with the store's own file rules (``survey.store_files.check_store``); the text as given."""
    return as_given(lambda text: check_store(text, writable), "store")


def _gpus(text: str) -> str:
    for name in gpu_names(text):
        lookup_gpu(name)  # "all" is None
    return text


def input_file(what: str) -> Callable[[str], str]:
    """An argparse ``type``: the path of a file to read ``what`` from, checked to exist and be readable while parsing
    (``files.check_input_file``); the text as given."""
    return as_given(lambda text: check_input_file(text, what), "file")


def text_file(what: str) -> Callable[[str], str]:
    """An argparse ``type``: ``input_file`` of a text file, its first 64 KiB checked too (not empty, not a SQLite
    database, not binary: ``files.check_text_start``), as the library checks the whole file when it reads it."""

    def check(text: str) -> None:
        check_input_file(text, what)
        check_text_start(text, what)

    return as_given(check, "file")


def read_by(what: str, read: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse ``type``: the path of a file of ``what`` (``files.check_input_file``), read whole while parsing by
    ``read``, the library's own reader of that file (a device profile's ``profile_format.read_profile``, a latency
    table's or predictor profile's ``nas.file_formats``', an architecture file's ``arch_files.read_lines``); the
    text as given."""

    def check(text: str) -> None:
        check_input_file(text, what)
        read(text)

    return as_given(check, "file")


def _objective(text: str) -> str:
    """``nas search``'s ``--objective``: ``flops``, or a JSON file mapping architecture id -> value, read while parsing
    by ``file_formats.read_objective`` (the search reads it with)."""
    if text != "flops":
        check_input_file(text, OBJECTIVE_FILE)
        read_objective(text)
    return text


OBJECTIVE = checked(str, _objective, "objective")  # nas search's --objective


# A model named by its source's name (``timm:resnet50``, ``torchvision:resnet50.x``) or bare (``resnet50``,
# ``resnet50.a1_in1k``), ``+reparam`` aside: the only texts ``_model`` checks. A glob, a path, a digest
# (``...#<hex>``) or a factory file's ``X.py:FN`` has other characters and is left to the library.
_NAMED = re.compile(r"(?:(?P<prefix>[A-Za-z0-9_-]+):)?(?P<name>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)?)")
# A model file's suffixes (``models.file_formats``, which imports no torch).
_MODEL_FILE_SUFFIXES = tuple(file_formats.SUFFIXES)
# The suffixes of the files a spec of that shape names (``zoo.parse_spec`` tries them before any name): a factory
# file, an architecture file (``archs.jsonl:ID``), a model file.
_FILE_SUFFIXES = (".py", ".jsonl", *_MODEL_FILE_SUFFIXES)
_ARCHITECTURE = re.compile(r"[0-9a-f]{16}")  # a NAS architecture's id (``mbv3:<ID>``), known once its file is read
# The sources besides torchvision and timm, which take only specs of their shape (registered when models.model_files
# and the nas package are imported, with torch), in registration order, and the hint each gives in messages
# (``ModelSource.hint``: the unknown-source message lists them; tests/test_zoo.py checks both against the registry).
_SHAPED = {
    "file": "a .py file",
    "onnx": "a model file (.onnx, .pt2, .pt)",
    "pt2": "",
    "torchscript": "",
    "pickle": "",
    "nas": "archs.jsonl:ID (an architecture of a file from `utilscope nas sample`)",
}
_SHAPED_SOURCES = tuple(_SHAPED)
_SHAPED_HINTS = tuple(hint for hint in _SHAPED.values() if hint)
_NAMED_SOURCES = ("torchvision", "timm")  # the sources addressed as ``source:NAME``, with a list of names
# A model file's id's ``#digest``.
_DIGEST = re.compile(rf"#[0-9a-f]{{{FILE_DIGEST_CHARS}}}$")
# What follows a shaped source's prefix and is of no source's shape: no path, suffix or digest (``nas:mbv3``,
# ``nas:mbv3:``, ``file:resnet``).
_SHAPELESS = re.compile(r"[A-Za-z0-9_-]*(?::[A-Za-z0-9_-]*)?")


@functools.cache
def _plugged_sources() -> bool:
    """Whether a third-party package declares model sources (``sources.ENTRY_POINT_GROUP``): their names are not
    known until their modules are imported."""
    return bool(metadata.entry_points(group=ENTRY_POINT_GROUP))


def _known_names(source: str) -> Collection[str] | None:
    """The model names of ``source`` (torchvision or timm) from its shipped table, when the installed package is the
    table's version; None otherwise."""
    if source == "timm":
        return timm_sets.installed_names(sets.timm_version())
    return torchvision_names.installed_names()


def _has(source: str, names: Collection[str], name: str) -> bool:
    """Whether ``name`` is a model of ``source``, as its ``exists`` says: timm takes a pretrained tag after the
    architecture (``resnet50.a1_in1k``, ``timm.is_model``), torchvision the name alone."""
    return (name.partition(".")[0] if source == "timm" else name) in names


def _model_file(spec: str) -> None:
    """A model file (``path.onnx``, ``onnx:path.onnx#digest``) or a factory file (``path.py:factory``) that is not
    there, is a folder or cannot be read, and a path to a folder (``exports/``), is a UsageError while parsing, with
    the message building the model gives (``files.check_input_file``'s, ``sources.a_folder``); then what the file
    holds that can be told without torch or running it (``sources.check_factory_file``, ``file_formats.check_file``).
    A glob's files are checked when it is expanded."""
    if is_glob(spec):
        return
    prefix, sep, rest = spec.partition(":")
    body = rest if sep and prefix in _SHAPED_SOURCES else spec
    if ".py:" in body:
        check_input_file(body.rpartition(":")[0], FACTORY_FILE)
        check_factory_file(body)
        return
    path = _DIGEST.sub("", body)
    if path.lower().endswith(_MODEL_FILE_SUFFIXES):
        check_input_file(path, MODEL_FILE)
        file_formats.check_file(path)
    elif os.sep in path and is_folder(path):
        raise a_folder(path)


def _architecture(spec: str) -> None:
    """An architecture of a file (``archs.jsonl:ID``, ``nas:archs.jsonl:ID``): its file read as ``nas.source`` reads
    it and its id looked up, without the spaces (``arch_files.check_architecture``); the spaces validate the record
    when it is built."""
    prefix, sep, rest = spec.partition(":")
    body = rest if sep and prefix in _SHAPED_SOURCES else spec
    if ".jsonl:" in body and ".py:" not in body and not body.lower().endswith(_MODEL_FILE_SUFFIXES):
        path, _, arch = body.rpartition(":")
        check_architecture(path, arch)


def arch_file(what: str) -> Callable[[str], str]:
    """An argparse ``type``: the path of an architecture file (``nas sample``'s JSON lines) to read as ``what``,
    checked while parsing by ``sampler.load_jsonl``'s reading rule (``read_by`` with ``arch_files.read_lines``: text,
    each line a JSON object naming its space); the spaces validate the records when the command runs."""
    return read_by(what, read_lines)


def _file_glob(pattern: str) -> bool:
    """Whether a glob names model files (``exports/*.onnx``, ``onnx:x/*.pt``): ``zoo._expand_files``' shape, a model
    file's suffix once the shaped sources' prefixes are left off."""
    text = pattern.strip()
    for source in _SHAPED:
        text = text.removeprefix(f"{source}:")
    return Path(text).suffix.lower() in _MODEL_FILE_SUFFIXES


def _glob(pattern: str) -> None:
    """A glob of model names (and ``models``' pattern) that ``zoo.list_models`` would refuse, refused while parsing
    with its message: one of a source without names (``nas:*``, ``sources.glob_of_shaped``) or of no source
    (``nope:*``), or one that matches none of the shipped tables' names (``sources.matching``, ``no_match``), each
    table read only when the installed package is its version. A glob of files, one whose table is not the installed
    package's, and any while a third-party package declares sources are left to the library."""
    if _plugged_sources() or _file_glob(pattern):
        return
    prefix, sep, glob = pattern.partition(":")
    if not sep:
        prefix, glob = "", pattern
    if prefix in _SHAPED:
        raise glob_of_shaped(prefix, _NAMED_SOURCES, _SHAPED[prefix])
    if prefix and prefix not in _NAMED_SOURCES:
        raise unknown_glob_source(prefix, _NAMED_SOURCES)
    tables = [_known_names(source) for source in ((prefix,) if prefix else _NAMED_SOURCES)]
    if all(names is not None for names in tables) and not any(matching(names, glob) for names in tables):
        raise no_match(pattern)


def _shaped(spec: str) -> None:
    """A shaped source's prefix before a text of none of the shapes (``nas:mbv3``, ``file:resnet``):
    ``zoo.parse_spec``'s error (``sources.not_of_source``) while parsing. A text that may be of a shape (a path, a
    suffix, another shaped source's prefix, an architecture's ``SPACE:ID``) is left to the library, as is any while
    a third-party package declares sources."""
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix not in _SHAPED or not _SHAPELESS.fullmatch(rest) or _plugged_sources():
        return
    head, _, tail = rest.partition(":")
    if head not in _SHAPED and not _ARCHITECTURE.fullmatch(tail):
        raise not_of_source(prefix, rest, _SHAPED[prefix])


def _model(text: str) -> str:
    """A model's name that no source has is a UsageError while parsing, with ``zoo.parse_spec``'s message, from the
    shipped tables of names (no torch, torchvision or timm imported): ``torchvision:NAME`` against torchvision's
    (``torchvision_names.installed_names``), ``timm:NAME`` against timm's (``timm_sets.installed_names``), a bare
    NAME against both (torchvision's first: the order its suggestions are listed in), each only when the installed
    package is its table's version; an unknown source's prefix (``foo:bar``) too, a glob (``_glob``) and a shaped
    source's prefix before no spec of its shape (``_shaped``). Every other model (a file, an architecture, a name
    whose table is not the installed package's, a third-party source's) is checked when it is built, but for a model
    or factory file that is not there, or a folder (``_model_file``)."""
    spec = text.strip().removesuffix(REPARAM)
    prefix, _, name = spec.rpartition(":")
    if not name and prefix in ("", "torchvision", "timm"):
        raise empty_name(text)
    if is_glob(text):
        _glob(text)
        return text
    _model_file(spec)
    _architecture(spec)
    _shaped(spec)
    found = _NAMED.fullmatch(spec)
    if found is None or found["name"].lower().endswith(_FILE_SUFFIXES) or _ARCHITECTURE.fullmatch(found["name"]):
        return text
    prefix, name = found["prefix"], found["name"]
    if prefix in _SHAPED_SOURCES or (prefix not in _NAMED_SOURCES and _plugged_sources()):
        return text
    if prefix is not None and prefix not in _NAMED_SOURCES:
        raise unknown_source(prefix, spec, _NAMED_SOURCES, _SHAPED_HINTS)
    tables = {source: _known_names(source) for source in ((prefix,) if prefix else _NAMED_SOURCES)}
    if any(names is None for names in tables.values()):
        return text
    if any(_has(source, names, name) for source, names in tables.items()):
        return text
    if is_folder(spec):  # a folder of model files, named without a path separator
        raise a_folder(spec)
    raise unknown_model(spec, tables, name)


def one_model(verb: str) -> Callable[[str], str]:
    """An argparse ``type``: the model of a verb that takes one (``profile``, ``layers``, ``advise``), a ``MODEL``;
    a glob is a UsageError that points to ``survey``."""

    def check(text: str) -> str:
        if is_glob(text):
            raise UsageError(
                f"`utilscope {verb}` takes one model and '{text}' is a glob: for many models use "
                f"`utilscope survey --models '{text}'`"
            )
        return _model(text)

    return checked(str, check, "model")


def _model_at(text: str) -> str:
    """A MODEL, or ``MODEL@RES`` (survey's ``--models``), its resolution checked as ``--res`` (``RES``)."""
    head, sep, tail = text.rpartition("@")
    if sep and tail.isdigit():
        check_resolution(int(tail))
        _model(head)
    else:
        _model(text)
    return text


def _anchor(text: str) -> str:
    """``predict``'s ``--anchor SPEC@BATCH=SAMPLES_PER_S``: its form and numbers (``predict.options.split_anchor``,
    as ``anchors.parse_anchor`` reads it) and its model, checked as a ``MODEL``; the text as given."""
    model, _, _ = split_anchor(text)
    _model(model)
    return text


def _backend(text: str) -> str:
    from utilscope.measure.backends import get_backend  # its registry imports nothing heavy

    get_backend(text)
    return text


def _model_set(text: str) -> str:
    if text not in sets.set_names():
        sets.set_members(text)  # an unknown set's UsageError, listing them
    return text


def _family(text: str) -> str:
    sets.models_of_family(text, [])  # an unknown family's UsageError, listing them
    return text


SHARD = as_given(parse_shard, "shard")  # survey's --shard K/N (``survey.shards``), the text as given
RAY_ADDRESS = as_given(check_address, "address")  # every --ray-address: HOST:PORT, auto or local (its format)
MODEL_SET = checked(str, _model_set, "set")  # every --set: a named model set
FAMILY = checked(str, _family, "family")  # survey's --family: a model family
STRATEGY = as_given(get_strategy, "strategy")  # nas search's --strategy: a registered search strategy
PRECISION = checked(str, _precision, "precision")  # every --precision of one: a measured precision's name
BACKEND = checked(str, _backend, "backend")  # every --backend of one: a backend's name
DTYPE = checked(str, check_counted, "dtype")  # count's --dtype: one the counting engine traces in
GPUS = checked(str, _gpus, "gpu")  # predict's --gpu: GPUs of the spec table (one, a list, or all), the text as given
GPU = as_given(lookup_gpu, "gpu")  # nas's --gpu: one GPU of the spec table, the text as given
MODEL = checked(str, _model, "model")  # a model argument: a name no source has, or an unknown source, refused here
MODEL_AT = checked(str, _model_at, "model")  # survey's --models: MODEL or MODEL@RES, its model checked as MODEL's
DEVICE = as_given(check_device, "device")  # every --device: cpu, cuda or cuda:N (``hardware.devices``)
ANCHOR = checked(str, _anchor, "anchor")  # predict's --anchor: SPEC@BATCH=SAMPLES_PER_S, its model a MODEL
PRICES = checked(str, parse_prices, "prices")  # predict's --price: GPU=USD_per_hour,... as {spec key: USD per hour}
MODEL_PATTERN = as_given(_glob, "pattern")  # models' pattern: a glob (or name), checked as a glob MODEL is


def backends(option: str) -> Callable[[str], str]:
    """An argparse ``type``: a comma-separated list of backends (``parse_list``, whose messages name ``option``),
    each a registered backend's name; the text as given."""

    def check(text: str) -> str:
        for name in parse_list(text, option):
            _backend(name)
        return text

    return checked(str, check, "backends")


def precisions(option: str) -> Callable[[str], tuple[str, ...]]:
    """An argparse ``type``: a comma-separated list of measured precisions (``parse_list``, whose messages name
    ``option``)."""
    return checked(str, lambda text: tuple(_precision(name) for name in parse_list(text, option)), "precisions")


__all__ = [
    "ANCHOR",
    "BATCH",
    "BATCHES",
    "BACKEND",
    "BENCHMARK_LIMIT",
    "BUDGET",
    "DEVICE",
    "DTYPE",
    "FAMILY",
    "GPU",
    "GPUS",
    "JOBS",
    "MODEL",
    "MODEL_AT",
    "MODEL_PATTERN",
    "MODEL_SET",
    "MULTIPLE",
    "OBJECTIVE",
    "PEAK",
    "PRECISION",
    "PRICES",
    "RAY_ADDRESS",
    "RES",
    "SEED",
    "SHARD",
    "STRATEGY",
    "THREADS",
    "TIMED_MS",
    "TIMEOUT",
    "TOP",
    "arch_file",
    "backends",
    "checked",
    "flops",
    "input_file",
    "output_file",
    "output_folder",
    "parse_batches",
    "parse_list",
    "positive",
    "precisions",
    "read_by",
    "store",
    "whole",
]
