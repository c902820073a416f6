"""A DataFrame as a Markdown table, for the generated parts of the docs (no tabulate needed); a validation's errors
per family as one."""

from __future__ import annotations

import math

import pandas as pd

from utilscope.models.sets import display_family

WITHIN = 0.10  # the validation targets' band: a network within ±10%


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


def family_errors(rows: pd.DataFrame, condition: dict[str, str]) -> str:
    """A validation's errors per family (Markdown): per condition (``condition`` maps a column of ``rows`` to its
    heading), one line per family (``models.sets.display_family`` of ``model``) with its networks and, per
    ``batch``, the MAPE of ``error`` and the share within ±10% in brackets; then, per condition and batch, how many
    families have at least 90% of their networks within ±10%."""
    columns = list(condition)
    rows = rows.assign(family=rows["model"].map(display_family), off=rows["error"].abs())
    table = rows.groupby([*columns, "family", "batch"])["off"].agg(
        networks="size", mape="mean", within=lambda off: (off <= WITHIN).mean()
    )
    batches = sorted(rows["batch"].unique())
    head = [*condition.values(), "family", "networks", *(f"batch {b}: MAPE (within ±10%)" for b in batches)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for keys, group in table.groupby(level=list(range(len(columns) + 1))):
        cells = {key[-1]: f"{r.mape:.1%} ({r.within:.0%})" for key, r in group.iterrows()}
        shown = [*map(str, keys), str(group["networks"].max()), *(cells.get(b, "–") for b in batches)]
        lines.append("| " + " | ".join(shown) + " |")
    families = table.groupby(level=[*columns, "batch"])["within"].agg(all="size", met=lambda s: (s >= 0.9).sum())
    lines.append("")
    for keys, r in families.iterrows():
        named = " ".join(map(str, keys[:-1]))
        lines.append(f"{named}, batch {keys[-1]}: {r.met} of {r['all']} families ≥ 90% within ±10%")
    return "\n".join(lines)
