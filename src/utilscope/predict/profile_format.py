"""The device profile's file format (``calibrate.DeviceProfile``'s JSON): its version, and the check that a file's
content is a profile of that version, without torch, so that the command line checks a ``--profile`` while
parsing by the rule the library reads it with."""

from __future__ import annotations

from utilscope.errors import UsageError
from utilscope.files import DEVICE_PROFILE_FILE, read_json

PROFILE_FORMAT = "utilscope-device-profile/2"  # 2: cold weights (1 timed warm weights)
REMEDY = "time it again with `utilscope calibrate`, or, a shipped one, reinstall utilscope"
PROFILE_READ = f"{DEVICE_PROFILE_FILE}; time it again, or, a shipped one, reinstall utilscope"  # what a bad file says


def check_profile(data, path) -> dict:
    """``data`` read from ``path`` if it is a device profile of the format this utilscope reads; a one-line
    UsageError otherwise: another file, a profile of a newer utilscope (upgrade), or an older one (time it again)."""
    found = data.get("format") if isinstance(data, dict) else None
    if found == PROFILE_FORMAT:
        return data
    family, _, version = str(found).rpartition("/")
    if family == PROFILE_FORMAT.rpartition("/")[0] and version.isdigit():
        newer = int(version) > int(PROFILE_FORMAT.rpartition("/")[2])
        what = "a newer utilscope's: upgrade utilscope to read it" if newer else f"an older format's: {REMEDY}"
        raise UsageError(f"{path} is a device profile of format {found}, this utilscope reads {PROFILE_FORMAT}; {what}")
    raise UsageError(f"{path} is not a device profile ({PROFILE_FORMAT}) written by `utilscope calibrate`")


def read_profile(path) -> dict:
    """The content of the device profile file at ``path`` (``read_json``, ``check_profile``)."""
    return check_profile(read_json(path, PROFILE_READ), path)
