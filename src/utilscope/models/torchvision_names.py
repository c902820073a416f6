"""The ``torchvision_models.csv`` table: every model name of the ``torchvision`` source (its ``list_names``,
``torchvision.models.list_models(module=torchvision.models)``: the image classifiers), one row per model in the
order the source lists them, under a comment line naming the torchvision version they were listed from.
``write_table`` (``scripts/build_torchvision_table.py``) writes it from the installed torchvision; ``installed_names``
reads it without importing torchvision or torch, for the command line's check of a model name while it parses
(``cli.values``), as ``timm_sets.installed_names`` does for timm's names.
"""

from __future__ import annotations

import csv
import functools
from importlib import metadata, resources
from pathlib import Path

TABLE_FILE = "torchvision_models.csv"
VERSION_LINE = "# torchvision "  # the table's first line: this, then the version, then what the table is
PREFIX = "torchvision:"


def public_version(version: str) -> str:
    """A version without its local part (``0.29.1+cu130`` -> ``0.29.1``): the CPU and CUDA builds of one
    torchvision release list the same models."""
    return version.partition("+")[0]


@functools.cache
def _read() -> tuple[str, tuple[str, ...]]:
    with resources.files("utilscope.models").joinpath(TABLE_FILE).open() as handle:
        first = handle.readline()
        if not first.startswith(VERSION_LINE):
            raise ValueError(f"{TABLE_FILE} does not start with {VERSION_LINE!r}: rebuild it")
        names = tuple(row["model"].removeprefix(PREFIX) for row in csv.DictReader(handle))
    return first.removeprefix(VERSION_LINE).split(maxsplit=1)[0], names


def table_version() -> str:
    """The torchvision version the table was written from."""
    return _read()[0]


def names() -> tuple[str, ...]:
    """The table's model names (``torchvision:`` left off), in the source's order, read without torchvision."""
    return _read()[1]


def installed_names() -> tuple[str, ...] | None:
    """Every model name of the installed torchvision's source, from the table (``names``: no torchvision or torch
    imported), when the installed torchvision is the table's version (its local part, ``+cu130``, aside); None
    otherwise, or without torchvision."""
    try:
        installed = metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        return None
    return names() if public_version(installed) == table_version() else None


def write_table(path: Path) -> str:
    """Write the table at ``path`` from the installed torchvision: the names the ``torchvision`` source lists (the
    one list the zoo resolves and suggests names from), under the version line. Returns the version."""
    from utilscope.models.sources import TORCHVISION

    version = public_version(metadata.version("torchvision"))
    with Path(path).open("w", newline="") as handle:
        handle.write(
            f"{VERSION_LINE}{version} (the torchvision model source's names: "
            "torchvision.models.list_models(module=torchvision.models); scripts/build_torchvision_table.py)\n"
        )
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["model"])
        writer.writerows([f"{PREFIX}{name}"] for name in TORCHVISION.list_names())
    return version
