"""The ``timm_models.csv`` table: one row per timm architecture with its kind (``cnn``, ``attention``,
``no_spatial_conv``, ``test``, ``failed``; the rule is ``utilscope.counting.architecture``), native resolution,
GFLOPs and params at batch 1, unsupported ops, pretrained weights in timm and timm module. ``scripts/
build_timm_table.py`` writes it with the timm of model_sets.toml's [timm] version; the model sets read it.
"""

from __future__ import annotations

import csv
import functools
from importlib import metadata, resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

TABLE_FILE = "timm_models.csv"
KINDS = ("cnn", "attention", "no_spatial_conv", "test", "failed")


@functools.cache
def table() -> pd.DataFrame:
    """The shipped table (``timm_models.csv``): one row per timm architecture, as ``write_table`` wrote it."""
    import pandas as pd

    with resources.files("utilscope.models").joinpath(TABLE_FILE).open() as handle:
        return pd.read_csv(handle, comment="#", keep_default_na=False)


@functools.cache
def names() -> frozenset[str]:
    """The table's architecture names (``timm:`` left off), read without pandas."""
    with resources.files("utilscope.models").joinpath(TABLE_FILE).open() as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        return frozenset(row["model"].removeprefix("timm:") for row in rows)


def installed_names(table_version: str) -> frozenset[str] | None:
    """Every architecture name of the installed timm, from the table (``names``: no timm, pandas or torch imported),
    when the installed timm is ``table_version``, the one the table was built with (the table then lists exactly
    timm's models); None otherwise, or without timm."""
    try:
        return names() if metadata.version("timm") == table_version else None
    except metadata.PackageNotFoundError:
        return None


def members(kind: str, top: int | None = None) -> list[str]:
    """The table's models of one kind, in name order; ``top``: only the ``top`` with the most pretrained weights
    in timm (ties: fewer GFLOPs, then the name), in that order."""
    frame = table()
    frame = frame[frame["kind"] == kind]
    if top is not None:
        frame = frame.sort_values(["pretrained_tags", "gflops", "model"], ascending=[False, True, True]).head(top)
    return frame["model"].tolist()


@functools.cache
def _by_model() -> dict[str, dict]:
    return {row["model"]: row for row in table().to_dict("records")}


def facts(model_id: str) -> dict | None:
    """The table's row for a model (resolution, gflops, params_m, kind, ...), or None if it is not a timm model
    of the table."""
    return _by_model().get(model_id)
