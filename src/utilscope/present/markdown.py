"""A DataFrame as a Markdown table, for the generated parts of the docs (no tabulate needed)."""

from __future__ import annotations

import pandas as pd


def markdown(frame: pd.DataFrame, formats: dict[str, str] | None = None, index: bool = False) -> str:
    """A Markdown table of ``frame`` (its index as the first column when ``index``); ``formats`` maps a column to a
    format spec, or to "pct" for a percentage with 2 decimals."""
    formats = formats or {}
    if index:
        frame = frame.reset_index()

    def cell(column, value):
        spec = formats.get(column)
        if spec == "pct":
            return f"{value:.2%}"
        return format(value, spec) if spec else str(value)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(c, v) for c, v in row.items()) + " |" for _, row in frame.iterrows()]
    return "\n".join(lines)
