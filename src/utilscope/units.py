"""Number formatting with SI prefixes, so every table says its unit the same way."""

from __future__ import annotations

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


def percent(fraction: float, digits: int = 1) -> str:
    return f"{100 * fraction:.{digits}f}%"


def shape_text(shapes: list[list[int]]) -> str:
    return ", ".join("×".join(str(d) for d in shape) for shape in shapes)
