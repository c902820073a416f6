"""A channel layout: where each of a tensor's original channels sits in its padded version.

Channel ``i`` of the original tensor is channel ``positions[i]`` of the padded one, which has ``width`` channels in
all. Positions are increasing; the others are padding: they hold finite values (zeros, an activation of zero, or a
neighbouring channel a slice took along) that every consumer ignores, because consumers get zero weights there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from utilscope.hardware.alignment import round_up


@dataclass(frozen=True)
class Layout:
    positions: tuple[int, ...]
    width: int

    @classmethod
    def identity(cls, channels: int) -> Layout:
        return cls(tuple(range(channels)), channels)

    @classmethod
    def from_segments(cls, segments: Iterable[tuple[int, int]]) -> Layout:
        """Segments of ``(channels, width)``: each segment's channels first, then its padding."""
        positions, offset = [], 0
        for channels, width in segments:
            positions.extend(range(offset, offset + channels))
            offset += width
        return cls(tuple(positions), offset)

    @classmethod
    def padded(cls, start: int, stop: int, cuts: Iterable[int], multiple: int) -> Layout:
        """Channels ``start..stop`` cut at ``cuts``, each piece padded on its own to the next multiple."""
        edges = sorted({start, stop} | {cut for cut in cuts if start < cut < stop})
        return cls.from_segments((b - a, round_up(b - a, multiple)) for a, b in zip(edges, edges[1:], strict=False))

    @classmethod
    def concat(cls, layouts: Iterable[Layout]) -> Layout:
        positions, offset = [], 0
        for layout in layouts:
            positions.extend(offset + p for p in layout.positions)
            offset += layout.width
        return cls(tuple(positions), offset)

    @property
    def channels(self) -> int:
        return len(self.positions)

    @property
    def is_identity(self) -> bool:
        return self.width == self.channels

    def offset(self, channel: int) -> int:
        """The padded position channel ``channel`` starts at (``width`` past the last channel)."""
        return self.positions[channel] if channel < self.channels else self.width

    def natural(self, start: int, stop: int) -> Layout:
        """Channels ``start..stop`` with the padding up to the next kept channel: what ``cat`` laid out."""
        base = self.offset(start)
        return Layout(tuple(p - base for p in self.positions[start:stop]), self.offset(stop) - base)

    def window(self, start: int, stop: int, multiple: int) -> Layout:
        """Channels ``start..stop`` as a slice takes them: a width rounded up to ``multiple`` where the tensor has
        room (the channels after ``stop`` come along as padding), else the natural piece."""
        base, natural = self.offset(start), self.natural(start, stop)
        tight_width = self.positions[stop - 1] + 1 - base
        aligned_width = round_up(tight_width, multiple)
        if natural.width % multiple and base + aligned_width <= self.width:
            return Layout(natural.positions, aligned_width)
        return natural

    def per_group(self, groups: int) -> Layout | None:
        """The layout each of ``groups`` equal parts of the channels has, where all have the same one within an
        equal share of the width (a grouped conv's weights need it); else None."""
        if self.channels % groups or self.width % groups:
            return None
        size, width = self.channels // groups, self.width // groups
        first = self.positions[:size]
        if any(p >= width for p in first):
            return None
        same = all(
            tuple(p - k * width for p in self.positions[k * size : (k + 1) * size]) == first for k in range(1, groups)
        )
        return Layout(first, width) if same else None

    def holds(self, start: int, stop: int, piece: Layout) -> bool:
        """Whether slicing ``piece.width`` channels from channel ``start`` gives ``piece``'s layout."""
        base = self.offset(start)
        relative = tuple(p - base for p in self.positions[start:stop])
        return relative == piece.positions and base + piece.width <= self.width
