"""JSON data files (latency tables, predictor profiles, objective tables): read with one-line errors, write whole."""

from __future__ import annotations

import json
from pathlib import Path

from utilscope.errors import UsageError


def read_json(path: str | Path, what: str):
    """The parsed content of a JSON file; UsageError naming ``what`` it should be when missing or not JSON."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no {what} at {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON ({exc.msg}); expected {what}") from None


def write_json(path: str | Path, data) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
