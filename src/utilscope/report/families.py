"""How the figures tell families apart, and how they draw many points.

A store of at most ``ALL_COLOURED`` families gives every family its own colour (tab20, families by name: the look of
the 61-model torchvision survey). A larger one (a timm survey has ~60) colours only the ``COLOURED`` families with the
most models, from a qualitative palette of distinct colours, and draws every other family in one light grey
(``OTHER_COLOUR``). Static figures with more than ``CROWDED_POINTS`` points draw smaller, more translucent markers
(``marker_style``).
"""

from __future__ import annotations

import math

import pandas as pd

ALL_COLOURED = 20  # up to this many families every family has a colour (as many as tab20 has)
COLOURED = 10  # past ALL_COLOURED: how many families (the most models first) have a colour
OTHER_COLOUR = "#c3c3c3"
CROWDED_POINTS = 500  # more points than this in a figure: markers shrink with the square root of the count
SMALLEST_MARKER = 0.35  # the least a crowded figure scales marker areas by
CROWDED_ALPHA = 0.6  # how much more translucent crowded markers are (a factor on their alpha)
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
    """``frame`` with each row's family as a report shows it today (``models.sets.display_family``). A store keeps
    the family of the day a row was measured, maybe before the table named it (then it is timm's module name,
    "mambaout"); a model the table does not know (a file's, "other") keeps the stored one."""
    from utilscope.models.sets import display_family

    current = frame["model"].map({model: display_family(model) for model in frame["model"].unique()})
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


def crowding(count: int, threshold: int = CROWDED_POINTS) -> float:
    """The factor on marker areas for a figure of ``count`` points: 1 up to ``threshold``, then
    ``sqrt(threshold / count)``, never below ``SMALLEST_MARKER``."""
    if count <= threshold:
        return 1.0
    return max(SMALLEST_MARKER, math.sqrt(threshold / count))


def marker_style(points: int, size: float, alpha: float) -> dict[str, float]:
    """Scatter keywords ``s`` (points²) and ``alpha`` for ``points`` markers of area ``size`` and opacity ``alpha``
    when uncrowded."""
    scale = crowding(points)
    return dict(s=size * scale, alpha=alpha if scale == 1.0 else alpha * CROWDED_ALPHA)
