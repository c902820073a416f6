"""Model families and the curated survey set, read from ``model_sets.toml``."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
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


def family_split(model_id: str) -> str:
    """The split of a network in `predict`'s evaluation protocol (docs/predict.md, written before it was applied):
    a timm model is in "test" when the first eight hex digits of the SHA-256 of its family's name (``family_of``),
    read as an integer, are 0 modulo 4; every other network is in "validation"."""
    if not model_id.startswith("timm:"):
        return "validation"
    digest = hashlib.sha256(family_of(model_id.split("+")[0]).encode()).hexdigest()
    return "test" if int(digest[:8], 16) % 4 == 0 else "validation"


def family_of(model_id: str) -> str:
    """The family of a model id: the one its source gives (a NAS architecture's is its search space, "NAS mbv3"),
    else the first matching glob of model_sets.toml, else a timm model's timm module, else "other"."""
    from utilscope.models import zoo

    own = zoo.source_family(model_id) or _glob_family(model_id)
    if own is not None:
        return own
    if model_id.startswith("timm:"):
        from utilscope.models import timm_sets

        facts = timm_sets.facts(model_id)
        if facts is not None and facts.get("timm_module"):
            return str(facts["timm_module"])
    return "other"


def _glob_family(model_id: str) -> str | None:
    """The first family of model_sets.toml with a glob matching ``model_id``; None when none does."""
    for family, globs in _table()["families"].items():
        if any(fnmatch.fnmatchcase(model_id, glob) for glob in globs):
            return family
    return None


def display_family(model_id: str) -> str:
    """The family a report shows a model under: ``family_of``'s, except that a timm module's name (a timm model no
    glob of model_sets.toml matches) shows as the table's family that most of that module's other models take
    ("vision_transformer" -> "ViT", "maxxvit" -> "MaxViT"), so one family is one name on a page. For display only:
    ``family_split``, `predict`'s evaluation split, keeps ``family_of``."""
    family = family_of(model_id)
    return _module_families().get(family, family)


@functools.cache
def _module_families() -> dict[str, str]:
    """Each timm module some of whose models a glob of the table matches: the table's family most of them take."""
    from collections import Counter

    from utilscope.models import timm_sets

    table, counts = _table()["families"], {}
    for model_id, module in zip(timm_sets.table()["model"], timm_sets.table()["timm_module"], strict=True):
        family = _glob_family(model_id)
        if family is not None and module not in table:
            counts.setdefault(module, Counter())[family] += 1
    return {module: counted.most_common(1)[0][0] for module, counted in counts.items()}


def default_survey() -> list[str]:
    return list(_table()["survey"]["models"])


def representative() -> list[str]:
    return list(_table()["survey"]["representative"])


def set_names() -> list[str]:
    """The named model sets: the curated survey, its representative models, and model_sets.toml's [sets]."""
    return ["survey", "representative", *_table().get("sets", {})]


def set_description(name: str) -> str:
    builtin = {
        "survey": "the curated default survey (torchvision CNNs)",
        "representative": "the survey models whose op-class shares a survey records",
    }
    return builtin.get(name) or _table()["sets"][name]["description"]


def set_members(name: str) -> list[str]:
    """The model ids of a named set; an unknown name is a UsageError listing the sets."""
    if name == "survey":
        return default_survey()
    if name == "representative":
        return representative()
    entry = _table().get("sets", {}).get(name)
    if entry is None:
        raise UsageError(f"unknown model set {name!r}; use one of: {', '.join(set_names())}")
    if "models" in entry:
        return list(entry["models"])
    from utilscope.models import timm_sets

    return timm_sets.members(entry["kind"], top=entry.get("top"))


def timm_version() -> str:
    """The timm version the timm sets were built with."""
    return str(_table()["timm"]["version"])


def models_of_family(name: str, candidates: list[str]) -> list[str]:
    """The candidates (model ids) in family ``name`` (case-insensitive); an unknown family is an error."""
    names = {family.lower(): family for family in families()}
    if name.lower() not in names:
        raise UsageError(f"unknown family {name!r}; use one of: {', '.join(families())}")
    family = names[name.lower()]
    return [model for model in candidates if family_of(model) == family]
