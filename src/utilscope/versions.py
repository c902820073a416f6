"""Version strings: the one rule for sorting torch versions (tables, stores, validation), and the one reading of an
installed package's version (an environment's record, what a cached count depends on)."""

from __future__ import annotations

import sys
from importlib import metadata


def installed_version(package: str) -> str | None:
    """The version of an imported (else installed) package, None if it is neither."""
    module = sys.modules.get(package)
    if module is not None and hasattr(module, "__version__"):
        return str(module.__version__)
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def torch_key(version: str) -> tuple:
    """ "2.9.1" -> (2, 9, 1), "2.11.0+cu130" -> (2, 11, 0): to order torch versions."""
    parts = str(version).split("+")[0].split(".")
    return tuple(int(part) if part.isdigit() else 0 for part in parts)
