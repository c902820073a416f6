"""The search spaces: each module registers itself when imported, which happens on the first look-up here (they
build their layers from torchvision's, and importing torchvision costs a command's start-up about two seconds)."""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

from utilscope.nas.space import SPACES

if TYPE_CHECKING:
    from utilscope.nas.space import SearchSpace
    from utilscope.registry import Registry

MODULES = ("mbv3", "regnet")  # each registers the space of its name


@functools.cache
def registered() -> Registry:
    """The registry of search spaces, every space module imported (so registered)."""
    for module in MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return SPACES


def get_space(name: str) -> SearchSpace:
    return registered().get(name)


def list_spaces(pattern: str = "*") -> list[str]:
    return sorted(registered().names(pattern))
