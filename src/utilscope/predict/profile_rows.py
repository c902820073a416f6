"""A device profile's rows: what the layer models are fitted on, derived once and kept beside the profile.

Deriving the rows traces every timed config on the meta device (``features.config_events``): about 14 s for the
H200 profile's 7,257 configs on one core, most of a cold ``predict``. The rows are plain numbers and names, so they
are kept as a gzipped CSV beside the profile (``<profile>.rows-<key>.csv.gz``): the key is a digest of the
profile's content and of the code that derives rows from configs (``ROWS_CODE``), so rows of another profile or of
older code are never read. ``python -m utilscope.predict.profile_rows PROFILE`` writes the file; ``calibrate``
does at its end. Without a current file the rows are derived as before.

The file holds the single-op and gate rows (``layers.calibration_rows``, ``part = op``) and each chain's op rows
(``part = chain``, with the chain's key and measured milliseconds), which fit the composition gap.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from pathlib import Path

import pandas as pd

from utilscope import hardware
from utilscope.files import read_bytes, write_atomically
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile
from utilscope.predict.features import Gpu, config_events, fold_casts, op_row
from utilscope.predict.layers import calibration_rows, profile_precision
from utilscope.predict.ops import OpConfig

ROWS_CODE = ("ops.py", "features.py", "layers.py", "profile_rows.py")
SUFFIX = ".csv.gz"


def rows_key(path: Path) -> str:
    """The digest of the profile's content and of the code that derives its rows."""
    code = b"".join((Path(__file__).parent / name).read_bytes() for name in ROWS_CODE)
    return hashlib.sha256(read_bytes(path, PROFILE_FILE) + code).hexdigest()[:16]


def rows_file(path: Path) -> Path:
    return path.with_name(f"{path.stem}.rows-{rows_key(path)}{SUFFIX}")


def chain_rows(profile: DeviceProfile, gpu: Gpu) -> pd.DataFrame:
    """Every chain config's op rows, each with the chain's key and measured milliseconds."""
    rows, precision = [], profile_precision(profile)
    for key, ms in profile.latency_ms.items():
        config = OpConfig(**profile.configs[key])
        if config.kind == "chain":
            events = fold_casts(config_events(config, precision))
            rows += [{**op_row(event, gpu, casts), "chain": key, "chain_ms": ms} for event, casts in events]
    return pd.DataFrame(rows)


def derive(profile: DeviceProfile, gpu: Gpu) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The profile's op rows and chain rows, traced from its configs."""
    return calibration_rows(profile, gpu), chain_rows(profile, gpu)


def load(path: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The op and chain rows kept beside the profile at ``path``, or None when there is no current file."""
    kept = rows_file(path)
    if not kept.is_file():
        return None
    frame = pd.read_csv(kept, keep_default_na=False, na_values=[""])
    ops, chains = (
        frame[frame["part"] == part].drop(columns="part").dropna(axis=1, how="all") for part in ("op", "chain")
    )
    return ops.reset_index(drop=True), chains.reset_index(drop=True)


def save(path: Path, ops: pd.DataFrame, chains: pd.DataFrame) -> Path:
    """Write the rows beside the profile, and remove the profile's rows files of other keys."""
    kept = rows_file(path)
    for stale in path.parent.glob(f"{path.stem}.rows-*{SUFFIX}"):
        if stale != kept:
            stale.unlink()
    frame = pd.concat([ops.assign(part="op"), chains.assign(part="chain")], ignore_index=True)
    write_atomically(kept, gzip.compress(frame.to_csv(index=False).encode(), mtime=0))
    return kept


def write_beside(path: Path, profile: DeviceProfile) -> Path | None:
    """Derive and save the rows of the profile at ``path``; None for a device the spec table lacks (a CPU profile:
    the layer models need its GPU's figures, and so does ``predict``)."""
    if hardware.detect(profile.device) is None:
        return None
    return save(path, *derive(profile, Gpu.of(profile.device, profile.precision)))


def main(argv: list[str]) -> int:
    for name in argv:
        kept = write_beside(Path(name), DeviceProfile.load(name))
        print(f"{kept} written" if kept else f"{name}: not a GPU of the spec table; no rows written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
