"""The search spaces: each module registers itself when this package is imported; look them up here."""

from utilscope.nas.space import SPACES, SearchSpace
from utilscope.nas.spaces import mbv3, regnet  # noqa: F401  (registers the spaces)


def get_space(name: str) -> SearchSpace:
    return SPACES.get(name)


def list_spaces(pattern: str = "*") -> list[str]:
    return sorted(SPACES.names(pattern))
