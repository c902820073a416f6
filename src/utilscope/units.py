"""Number formatting with SI prefixes, so every table says its unit the same way; and the time as every record
says it (``now_iso``)."""

from __future__ import annotations

import math
from datetime import datetime, timezone

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``si(4.09e9, "FLOP") == "4.09 GFLOP"``: three significant digits and an SI prefix."""
    if value == 0:
        return f"0 {unit}".rstrip()
    magnitude = abs(value)
    for scale, prefix in _PREFIXES:
        if magnitude >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".rstrip()
    return f"{value:.{digits}g} {unit}".rstrip()


def significant(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits and thousands separators, never rounded away: 0.00312 ->
    "0.00312", 8.4 -> "8.40", 1234.5 -> "1,234" (at least the integer part); None -> "-"."""
    if value is None or value != value:
        return "-"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``plural(1, "cell") == "1 cell"``, ``plural(3, "cell") == "3 cells"`` (``nouns``: an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def percent(fraction: float, digits: int = 1) -> str:
    return f"{100 * fraction:.{digits}f}%"


def shape_text(shapes: list[list[int]]) -> str:
    return ", ".join("×".join(str(d) for d in shape) for shape in shapes)


def now_iso() -> str:
    """The time now, as every measurement records it (``measured_at``): ISO 8601 in UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
