"""A device as a command line or a caller names it (``cpu``, ``cuda``, ``cuda:N``), checked without importing torch:
the command line checks every ``--device`` with ``check_device`` while it parses, and ``ceilings.resolve_device``
checks a name with it before torch makes the device (and finds whether that GPU is there)."""

from __future__ import annotations

import re

from utilscope.errors import UsageError

# The names torch.device takes for the two supported types: the type, optionally ``:N`` (N without a sign or a
# leading zero, as torch parses it; below 100: torch keeps an index in 8 bits).
_DEVICE = re.compile(r"(?:cpu|cuda)(?::(?:0|[1-9][0-9]?))?")


def check_device(device: str) -> str:
    """``device`` as given when it names a CPU or a CUDA device (``cpu``, ``cuda``, ``cuda:N``); a UsageError
    otherwise. Whether a named GPU is there is for ``ceilings.resolve_device`` to tell."""
    if not isinstance(device, str) or _DEVICE.fullmatch(device) is None:
        raise UsageError(f"bad device {device!r}; use cpu, cuda or cuda:N")
    return device


__all__ = ["check_device"]
