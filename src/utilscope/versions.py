"""Version strings ordered as versions: the one rule for sorting torch versions (tables, stores, validation)."""

from __future__ import annotations


def torch_key(version: str) -> tuple:
    """ "2.9.1" -> (2, 9, 1), "2.11.0+cu130" -> (2, 11, 0): to order torch versions."""
    parts = str(version).split("+")[0].split(".")
    return tuple(int(part) if part.isdigit() else 0 for part in parts)
