"""A share of a survey's grid (``--shard K/N``): N machines measure one grid in N stores, each the groups of cells
that hash to its share. Checked without importing anything heavy: the command line parses ``--shard`` with it."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Protocol, TypeVar

from utilscope.errors import UsageError


class Grouped(Protocol):
    """What a shard reads of a group of cells (``survey.plan.Group``): its identity."""

    model: str
    resolution: int
    precision: str
    backend: str


G = TypeVar("G", bound=Grouped)


@dataclass(frozen=True)
class Shard:
    """The ``index``-th of ``count`` shares of a grid (1 <= index <= count; ``Shard()``: the whole grid). A group of
    cells falls in the shard its identity hashes to (``shard_number``): the same group always falls in the same
    shard, on any machine, whatever the order of the models or what a store holds, and its batch sizes stay
    together."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        for value in (self.index, self.count):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"a shard is K/N with integers 1 <= K <= N, got {value!r}")
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise UsageError(f"a shard is K/N with 1 <= K <= N (e.g. 1/3, 2/3, 3/3), got {self}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/3"`` -> Shard(2, 3); anything else is a one-line UsageError."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text), re.ASCII)
        if match is None:
            raise UsageError(f"a shard is K/N with integers 1 <= K <= N (e.g. 1/3, 2/3, 3/3), got {text!r}")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def whole(self) -> bool:
        return self.count == 1

    def select(self, groups: list[G]) -> list[G]:
        """The groups of this shard, in their order."""
        return [group for group in groups if shard_number(group, self.count) == self.index]


def parse_shard(text: str | None) -> Shard:
    """``"K/N"`` -> that shard; None -> the whole grid."""
    return Shard() if text is None else Shard.parse(text)


def shard_number(group: Grouped, count: int) -> int:
    """The shard (1..count) a group falls in: a SHA-256 of its identity (model id, resolution, precision, backend;
    not its batch sizes, nor Python's per-process ``hash``), modulo ``count``."""
    identity = json.dumps([group.model, group.resolution, group.precision, group.backend])
    digest = hashlib.sha256(identity.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


__all__ = ["Shard", "parse_shard", "shard_number"]
