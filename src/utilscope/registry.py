"""A name -> item registry (backends, search spaces, op formulas, model sources): each name is registered once, and
asking for an unknown name is a one-line ``UsageError`` listing the valid ones.

It is a mapping in registration order (``registry[name]``, ``in``, iteration, ``items()``). Setting a name that is
already taken raises ``ValueError``; deleting one (tests clean up what they registered) is allowed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Generic, TypeVar

from utilscope.errors import UsageError

T = TypeVar("T")
_REQUIRED = object()


class Registry(MutableMapping[str, T], Generic[T]):
    """Items by name. ``what`` names one item in messages: ``Registry("backend")`` -> "unknown backend 'x'"."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name`` and return it; a name registered twice is a ``ValueError``."""
        return self.add_all([name], item)

    def add_all(self, names: Iterable[str], item: T) -> T:
        """Register ``item`` under each of ``names``, all or none: one taken (or repeated) name adds nothing."""
        names = list(names)
        taken = [name for name in names if name in self._items or names.count(name) > 1]
        if taken:
            raise ValueError(f"{self.what} {', '.join(dict.fromkeys(taken))} registered twice")
        self._items.update(dict.fromkeys(names, item))
        return item

    def get(self, name: str, default=_REQUIRED):
        """The item called ``name``. Without ``default``, an unknown name is a ``UsageError`` listing the names;
        with one, like ``dict.get``."""
        if name in self._items:
            return self._items[name]
        if default is not _REQUIRED:
            return default
        raise UsageError(f"unknown {self.what} {name!r}; use one of: {', '.join(self._items)}")

    def names(self, pattern: str = "*") -> list[str]:
        """The registered names matching a glob (``fnmatch``, case-sensitive), in registration order."""
        return [name for name in self._items if fnmatch.fnmatchcase(name, pattern)]

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __setitem__(self, name: str, item: T) -> None:
        self.add(name, item)

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._items)})"
