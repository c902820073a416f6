"""Terminal view of a merge of results stores: what each input brought, and the conflicts."""

from __future__ import annotations

from utilscope.survey.merge import KEPT_RULE, MergeResult, TableCounts
from utilscope.units import plural

ENTRY_NAMES = {
    "measurements": "measurements",
    "op_classes": "op-class sets",
    "models": "model records",
    "published": "published rows",
}
ENTRY_NAME = {
    "measurements": "measurement",
    "op_classes": "op-class set",
    "models": "model record",
    "published": "published row",
}  # one of them
MOST_CONFLICTS = 10  # conflicts listed one by one; the rest are counted


def merge_lines(result: MergeResult, most: int = MOST_CONFLICTS) -> list[str]:
    """One line per input (added, identical, conflicting, per table it has rows of; identical ones recorded with
    other software versions say which), the output's totals, the first ``most`` conflicts and how many more, and
    which value a conflict kept."""
    lines = [f"{counts.path}: {_tallies(counts.tables)}" for counts in result.inputs]
    held = ", ".join(
        plural(result.held_after(table), ENTRY_NAME[table], name)
        for table, name in ENTRY_NAMES.items()
        if table != "published" or result.held_after(table)
    )  # others' rows: said when there are some
    before = result.held_before["measurements"]
    lines.append(
        f"merged {plural(len(result.inputs), 'store')} into {result.output}: it holds {held} "
        f"({plural(before, 'measurement')} before)"
    )
    for conflict in result.conflicts[:most]:
        lines.append(
            f"conflict: {conflict.key}: {conflict.left_out} differs from {conflict.kept} in "
            f"{', '.join(conflict.columns)}; kept {conflict.kept}'s"
        )
    if len(result.conflicts) > most:
        lines.append(f"... and {len(result.conflicts) - most} more conflicts")
    if result.conflicts:
        lines.append(f"{plural(len(result.conflicts), 'conflict')}: on a conflict {KEPT_RULE}")
    return lines


def _tallies(tables: dict) -> str:
    parts = []
    for table, name in ENTRY_NAMES.items():
        counts = tables[table]
        if table == "measurements" or counts.added or counts.identical or counts.conflicting:
            identical = f"{counts.identical} identical{_other_versions(counts)}"
            parts.append(f"{name} {counts.added} added, {identical}, {counts.conflicting} conflicting")
    return "; ".join(parts)


def _other_versions(counts: TableCounts) -> str:
    """ " (2 recorded with other timm: 1.0.29 vs kept 1.0.31)", or "" when every identical entry recorded the kept
    copy's versions."""
    if not counts.other_versions:
        return ""
    named = "; ".join(
        f"other {package}: " + ", ".join(f"{mine} vs kept {kept}" for mine, kept in sorted(pairs))
        for package, pairs in counts.versions.items()
    )
    return f" ({counts.other_versions} recorded with {named})"
