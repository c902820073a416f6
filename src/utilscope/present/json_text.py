"""The one way ``--json`` output is written: strict JSON, so any parser reads it (no ``NaN`` or ``Infinity``)."""

from __future__ import annotations

import json
import math


def strict_json(doc) -> str:
    """``doc`` as strict JSON text: a non-finite float (nan, inf, -inf: "no value", e.g. the Spearman of two
    architectures or the objective of a search that found nothing) is ``null``; numpy scalars are plain numbers;
    objects JSON does not know (paths, timestamps) are their ``str``."""
    return json.dumps(_plain(doc), allow_nan=False, default=str)


def _plain(value):
    import numpy as np  # here, as in _key: the command line imports this module to parse its options

    if isinstance(value, dict):
        return {_key(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, np.ndarray):
        return [_plain(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _key(key):
    import numpy as np

    return key.item() if isinstance(key, np.generic) else key
