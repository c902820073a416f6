"""The ``timm_models.csv`` table: one row per timm architecture with its kind (``cnn``, ``attention``,
``no_spatial_conv``, ``test``, ``failed``; the rule is ``utilscope.counting.architecture``), native resolution,
GFLOPs and params at batch 1, unsupported ops, pretrained weights in timm and timm module. ``scripts/
build_timm_table.py`` writes it with the timm of model_sets.toml's [timm] version; the model sets read it.
"""

from __future__ import annotations

import functools
from importlib import resources

import pandas as pd

TABLE_FILE = "timm_models.csv"
KINDS = ("cnn", "attention", "no_spatial_conv", "test", "failed")


@functools.cache
def table() -> pd.DataFrame:
    """The shipped table (``timm_models.csv``): one row per timm architecture, as ``write_table`` wrote it."""
    with resources.files("utilscope.models").joinpath(TABLE_FILE).open() as handle:
        return pd.read_csv(handle, comment="#", keep_default_na=False)


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
