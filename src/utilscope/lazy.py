"""Names a package binds on first use: a package's ``__init__`` that must not import torch, pandas or numpy (a
command line's parser imports it) names where each of its public names lives, and ``module_getattr`` imports that
module when the name is first asked for (``from utilscope import count``) and binds it in the package from then on."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def module_getattr(package: str, namespace: dict, homes: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` (whose globals are ``namespace``): each name of ``homes`` (name ->
    the module defining it) imported and bound on first access; any other an AttributeError, as Python's own."""

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(homes[name]), name)  # bound from now on
        return value

    return __getattr__
