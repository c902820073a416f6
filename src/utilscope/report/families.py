"""How the figures tell families apart, and how they draw many points.

A store of at most ``ALL_COLOURED`` families gives every family its own colour (tab20, families by name: the look of
the 61-model torchvision survey). A larger one (a timm survey has ~60) colours only the ``COLOURED`` families with the
most models, from a qualitative palette of distinct colours, and draws every other family in one light grey
(``OTHER_COLOUR``) under them: the legend has at most ``COLOURED`` + 1 entries, the last one
``"50 other families (312)"``. Figures with more than ``CROWDED_POINTS`` points draw smaller, more translucent markers
(``marker_style``), panels of more than ``CROWDED_LINES`` lines thinner, fainter ones (``line_style``).
"""

from __future__ import annotations

import math

import pandas as pd

ALL_COLOURED = 20  # up to this many families every family has a colour (as many as tab20 has)
COLOURED = 10  # past ALL_COLOURED: how many families (the most models first) have a colour
OTHER_COLOUR = "#c3c3c3"
CROWDED_POINTS = 500  # more points than this in a figure: markers shrink with the square root of the count
CROWDED_LINES = 150  # more lines than this in a panel: lines thin and fade the same way
SMALLEST_MARKER = 0.35  # the least a crowded figure scales marker areas by
CROWDED_ALPHA = 0.6  # how much more translucent crowded markers and lines are (a factor on their alpha)
# tab10 with its grey (the colour of the other families) swapped for near-black
_DISTINCT = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#222222",
    "#bcbd22",
    "#17becf",
]


def with_current_families(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each row's family as today's model_sets.toml names it. A store keeps the family of the day a
    row was measured, maybe before the table named it (then it is timm's module name, "mambaout"); a model the
    table does not know (a file's, "other") keeps the stored one."""
    from utilscope.models.sets import family_of

    current = frame["model"].map({model: family_of(model) for model in frame["model"].unique()})
    return frame.assign(family=current.where(current != "other", frame["family"]))


def family_labels(frame: pd.DataFrame) -> pd.Series:
    """The family of each row as text; missing or empty families read ``"unknown"``."""
    return frame["family"].fillna("").astype(str).replace("", "unknown")


def family_counts(frame: pd.DataFrame) -> pd.Series:
    """Distinct models per family (index: ``family_labels``), most models first, ties by family name."""
    counts = frame.assign(family=family_labels(frame)).groupby("family")["model"].nunique()
    return counts.reset_index().sort_values(["model", "family"], ascending=[False, True]).set_index("family")["model"]


def coloured_families(counts: pd.Series, limit: int = COLOURED, all_up_to: int = ALL_COLOURED) -> list[str]:
    """The families of ``counts`` (models per family) that get a colour, in legend order: every family by name when
    there are at most ``all_up_to``, else the ``limit`` with the most models, most first (ties by name)."""
    if len(counts) <= all_up_to:
        return sorted(str(family) for family in counts.index)
    ranked = counts.reset_index().set_axis(["family", "models"], axis=1)
    return list(ranked.sort_values(["models", "family"], ascending=[False, True])["family"].head(limit))


def family_colors(counts: pd.Series, limit: int = COLOURED, all_up_to: int = ALL_COLOURED) -> dict[str, object]:
    """A colour for every family of ``counts``: tab20 in turn (its ten strong colours first) when every family is
    coloured, else ``_DISTINCT`` for the ``coloured_families`` and ``OTHER_COLOUR`` for the rest."""
    from matplotlib import colormaps

    chosen = coloured_families(counts, limit, all_up_to)
    if len(chosen) == len(counts):
        palette = colormaps["tab20"].colors
        order = list(range(0, 20, 2)) + list(range(1, 20, 2))  # the ten strong colours first, then their light twins
        return {family: palette[order[i % 20]] for i, family in enumerate(chosen)}
    colours = {family: _DISTINCT[i % len(_DISTINCT)] for i, family in enumerate(chosen)}
    return colours | {str(family): OTHER_COLOUR for family in counts.index if family not in colours}


def legend_entries(shown: pd.DataFrame, colors: dict[str, object]) -> list[tuple[str, object]]:
    """``(label, colour)`` per legend entry for the rows ``shown`` in a figure: ``"ResNet (5)"`` (models shown) for
    each coloured family that has rows there, in ``colors``' order, then one ``"N other families (M)"`` entry for
    the families drawn in ``OTHER_COLOUR``."""
    counts = family_counts(shown)
    entries = [
        (f"{family} ({counts[family]})", colour)
        for family, colour in colors.items()
        if colour != OTHER_COLOUR and family in counts.index
    ]
    others = [family for family in counts.index if colors.get(family, OTHER_COLOUR) == OTHER_COLOUR]
    if others:
        word = "family" if len(others) == 1 else "families"
        entries.append((f"{len(others)} other {word} ({int(counts[others].sum())})", OTHER_COLOUR))
    return entries


def crowding(count: int, threshold: int = CROWDED_POINTS) -> float:
    """The factor on marker areas for a figure of ``count`` points (or lines): 1 up to ``threshold``, then
    ``sqrt(threshold / count)``, never below ``SMALLEST_MARKER``."""
    if count <= threshold:
        return 1.0
    return max(SMALLEST_MARKER, math.sqrt(threshold / count))


def marker_style(points: int, size: float, alpha: float) -> dict[str, float]:
    """Scatter keywords ``s`` (points²) and ``alpha`` for ``points`` markers of area ``size`` and opacity ``alpha``
    when uncrowded."""
    scale = crowding(points)
    return dict(s=size * scale, alpha=alpha if scale == 1.0 else alpha * CROWDED_ALPHA)


def line_style(lines: int, width: float, alpha: float) -> dict[str, float]:
    """Line keywords ``linewidth`` and ``alpha`` for ``lines`` lines of width ``width`` and opacity ``alpha`` when
    uncrowded (up to ``CROWDED_LINES``): else both times the square root of ``crowding``, the opacity times
    ``CROWDED_ALPHA`` too."""
    scale = crowding(lines, CROWDED_LINES)
    if scale == 1.0:
        return dict(linewidth=width, alpha=alpha)
    return dict(linewidth=width * math.sqrt(scale), alpha=alpha * CROWDED_ALPHA * math.sqrt(scale))


def coloured_last(frame: pd.DataFrame, colors: dict[str, object]) -> pd.DataFrame:
    """``frame``'s rows in drawing order: the grey families first, then the coloured ones in ``colors``' order (with
    many families the largest first), so grey lies under colour and small coloured families over large ones."""
    rank = {family: i for i, (family, colour) in enumerate(colors.items()) if colour != OTHER_COLOUR}
    order = family_labels(frame).map(lambda family: rank.get(family, -1)).to_numpy()
    return frame.iloc[order.argsort(kind="stable")]
