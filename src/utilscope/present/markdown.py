"""A DataFrame as a Markdown table, for the generated parts of the docs (no tabulate needed)."""

from __future__ import annotations

import math

import pandas as pd


def markdown(frame: pd.DataFrame, formats: dict[str, str] | None = None, index: bool = False) -> str:
    """A Markdown table of ``frame`` (its index as the first column when ``index``); ``formats`` maps a column to a
    format spec, or to "pct" for a percentage with 2 decimals. A missing value (NaN) is an empty cell."""
    formats = formats or {}
    if index:
        frame = frame.reset_index()

    def cell(column, value):
        if isinstance(value, float) and math.isnan(value):
            return ""
        spec = formats.get(column)
        if spec == "pct":
            return f"{value:.2%}"
        return format(value, spec) if spec else str(value)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(c, v) for c, v in row.items()) + " |" for _, row in frame.iterrows()]
    return "\n".join(lines)


def replace_block(doc: str, begin: str, end: str, text: str) -> str:
    """``doc`` with what lies between its ``begin`` and ``end`` markers replaced by a blank line and ``text``, for
    the docs' generated parts; ValueError when a marker is missing."""
    if begin not in doc or end not in doc:
        raise ValueError(f"the document lacks the markers {begin!r} and {end!r}")
    head, rest = doc.split(begin, 1)
    return f"{head}{begin}\n\n{text}\n{end}{rest.split(end, 1)[1]}"
