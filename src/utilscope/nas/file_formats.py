"""The NAS files a command reads, by the rules the library reads them with and without torch, so that the command
line checks them while parsing: a latency table's format (``latency.LatencyTable``), a predictor profile's
(``table_predictor.load_table_predictor``), and ``nas search --objective``'s table of values."""

from __future__ import annotations

import math
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import LATENCY_TABLE, NAS_PROFILE_FILE, read_json

TABLE_FORMAT = "utilscope-latency-table/1"
PREDICTOR_FORMAT = "utilscope-nas-predictor/1"
OBJECTIVE_FILE = "objective table of --objective"


def check_table(data, source: str = "the table") -> dict:
    """``data`` if it is a latency table of the format this utilscope reads; UsageError naming ``source`` else."""
    if not isinstance(data, dict) or data.get("format") != TABLE_FORMAT:
        raise UsageError(f"{source} is not a utilscope latency table ({TABLE_FORMAT})")
    return data


def read_table(path: str | Path) -> dict:
    """The content of the latency table file at ``path`` (``read_json``, ``check_table``)."""
    return check_table(read_json(path, LATENCY_TABLE), str(path))


def read_predictor(path: str | Path) -> dict:
    """The content of the predictor profile file at ``path``: JSON of ``PREDICTOR_FORMAT``, else a UsageError."""
    data = read_json(path, NAS_PROFILE_FILE)
    if not isinstance(data, dict) or data.get("format") != PREDICTOR_FORMAT:
        raise UsageError(f"{path} is not a utilscope predictor profile ({PREDICTOR_FORMAT})")
    return data


def read_objective(path: str | Path) -> dict[str, float]:
    """An objective table: a JSON object mapping architecture id -> a finite number; UsageError naming the file and
    what is wrong."""
    table = read_json(path, OBJECTIVE_FILE)
    if not isinstance(table, dict):
        raise UsageError(f"{path} is not a JSON object mapping architecture id -> value (the {OBJECTIVE_FILE})")
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(
                f"{path}: the value of {key!r} is not a number ({value!r}); an objective table maps "
                "architecture ids to numbers"
            )
    return {str(k): float(v) for k, v in table.items()}
