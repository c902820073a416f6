"""What a survey worker tells its runner, one line of its standard output each: a measured row, a model's op-class
shares, a model's record, the end of a group. The runner, the one writer of the store, stores them as they come
(from a local subprocess or a Ray task on another node); any other line is the model's own output and is ignored.
"""

from __future__ import annotations

import json

ROW = "utilscope-row"  # {column: value}: a measurement row, its key as columns
FITTED_ROW = "utilscope-fitted-row"  # a ROW for a batch size the grid did not plan: the largest that fits
OP_CLASSES = "utilscope-op-classes"  # {"key": {column: value}, "rows": [{op_class, flop_share, ...}]}
RECORD = "utilscope-record"  # {"model": id, "record": {...}}: what rebuilds the model without its file
GROUP_DONE = "utilscope-group-done"  # the worker finished a group (its timeout starts again)
TAGS = (ROW, FITTED_ROW, OP_CLASSES, RECORD, GROUP_DONE)
PARENT_ENV = "UTILSCOPE_SURVEY_PARENT"  # the runner's pid: a worker exits when its runner dies


def line(tag: str, payload=None) -> str:
    return tag if payload is None else f"{tag} {json.dumps(payload, default=str)}"


def emit(tag: str, payload=None) -> None:
    """Tell the runner, on standard output, at once."""
    print(line(tag, payload), flush=True)


def parse(text: str) -> tuple[str, object] | None:
    """(tag, payload) of a worker's line; None for a line that is not a message."""
    tag, _, payload = text.rstrip("\n").partition(" ")
    if tag not in TAGS:
        return None
    return tag, (json.loads(payload) if payload else None)
