"""Model families and the curated survey set, read from ``model_sets.toml``."""

from __future__ import annotations

import fnmatch
import functools
from importlib import resources

from utilscope.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


@functools.cache
def _table() -> dict:
    return tomllib.loads(resources.files("utilscope.models").joinpath("model_sets.toml").read_text())


def families() -> dict[str, list[str]]:
    return dict(_table()["families"])


def family_of(model_id: str) -> str:
    """The family of a model id: the one its source gives (a NAS architecture's is its search space, "NAS mbv3"),
    else the first matching glob of model_sets.toml, else "other"."""
    from utilscope.models import zoo

    own = zoo.source_family(model_id)
    if own is not None:
        return own
    for family, globs in _table()["families"].items():
        if any(fnmatch.fnmatchcase(model_id, glob) for glob in globs):
            return family
    return "other"


def default_survey() -> list[str]:
    return list(_table()["survey"]["models"])


def representative() -> list[str]:
    return list(_table()["survey"]["representative"])


def models_of_family(name: str, candidates: list[str]) -> list[str]:
    """The candidates (model ids) in family ``name`` (case-insensitive); an unknown family is an error."""
    names = {family.lower(): family for family in families()}
    if name.lower() not in names:
        raise UsageError(f"unknown family {name!r}; use one of: {', '.join(families())}")
    family = names[name.lower()]
    return [model for model in candidates if family_of(model) == family]
