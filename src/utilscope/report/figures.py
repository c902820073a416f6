"""The report's figures as declarations: each figure is one ``Figure`` (its id, title, caption, the one function that
builds it and its kind), each section of the report one table (a tuple) of them, and ``render`` turns any section's
table into HTML, building each figure once.

A builder takes the section's rows (one DataFrame per section: the survey's measurements, the atlas rows, ...) and
returns one figure, or a ``str`` saying why there is nothing to draw; the page then shows that line instead of an
empty frame. A figure's kind is its own declaration:

- ``Kind.INTERACTIVE``: a plotly figure (the point clouds, where a reader hovers a point for its model and the page's
  search highlights it), embedded in the page as an element and its JSON, which the explorer's script draws
  (``explorer``); plotly's toolbar downloads a PNG of it;
- ``Kind.STATIC``: a matplotlib figure (boxes, bars, lines of few series, a matrix), written as ``<id>.png`` beside
  the page and shown as an image (it needs no JavaScript).

The id is the one name of a figure: the element's id in the page and, for a static figure, its PNG's file name.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

PNG_PAD_INCHES = 0.15


class Kind(str, Enum):
    INTERACTIVE = "interactive"  # plotly, embedded in the page
    STATIC = "static"  # matplotlib, a PNG beside the page


@dataclass(frozen=True)
class Figure:
    """One figure of the report: ``id`` (element id; a static figure's PNG is ``<id>.png``), ``title`` and
    ``caption`` (shown under it), ``build`` (the section's rows -> a figure of its kind, or why there is none) and
    ``kind``."""

    id: str
    title: str
    caption: str
    build: Callable[[object], object]
    kind: Kind

    @property
    def png(self) -> str:
        """The PNG's file name in the report folder (a static figure's)."""
        return f"{self.id}.png"


def render(figures: Sequence[Figure], rows, out_dir: Path) -> str:
    """HTML of one section's figures, in the table's order, each built once from ``rows``: a static figure written
    as its PNG into ``out_dir`` and shown as an image, an interactive one as the element the page's script draws
    and its JSON; a figure with nothing to show is one line saying why."""
    blocks = []
    for figure in figures:
        drawn = figure.build(rows)
        if isinstance(drawn, str):
            why = f"<b>{html.escape(figure.title)}:</b> not drawn, {html.escape(drawn)}."
            blocks.append(f'<p class="empty" id="{figure.id}">{why}</p>')
        elif figure.kind is Kind.STATIC:
            blocks.append(_static(figure, drawn, out_dir))
        else:
            blocks.append(_interactive(figure, drawn))
    return "\n".join(blocks)


def _caption(figure: Figure) -> str:
    return f"<figcaption><b>{html.escape(figure.title)}.</b> {html.escape(figure.caption)}</figcaption>"


def _static(figure: Figure, drawn, out_dir: Path) -> str:
    """Write the matplotlib figure ``drawn`` as the figure's PNG; the image beside the page (the folder is the
    report: embedded, the PNGs would add a third to the page's size)."""
    # no "Software" metadata: the PNG carries no URL and is byte-stable across runs
    drawn.savefig(out_dir / figure.png, bbox_inches="tight", pad_inches=PNG_PAD_INCHES, metadata={"Software": None})
    source = html.escape(figure.png)
    return f'<figure id="{figure.id}"><img alt="{html.escape(figure.title)}" src="{source}">{_caption(figure)}</figure>'


def _interactive(figure: Figure, drawn) -> str:
    """The plotly figure ``drawn`` as the element the explorer's script draws it in, and its JSON beside it."""
    return (
        f'<figure><div class="plot" id="{figure.id}"></div>{_caption(figure)}</figure>\n'
        f'<script type="application/json" data-figure="{figure.id}">{figure_json(drawn)}</script>'
    )


def figure_json(figure) -> str:
    """A plotly figure as JSON safe inside a ``<script>`` element."""
    return figure.to_json(validate=False).replace("</", "<\\/")
