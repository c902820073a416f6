"""Seeded, deduplicated sampling of architectures, optionally within a FLOPs band; JSONL in and out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from utilscope.errors import UsageError
from utilscope.files import ARCH_FILE, check_output_file, write_atomically
from utilscope.limits import ARCHITECTURES_WHY, MAX_ARCHITECTURES, check_count, check_flops_band, check_seed
from utilscope.nas.arch_files import read_lines
from utilscope.nas.space import Arch, SearchSpace, arch_id
from utilscope.nas.spaces import get_space

MAX_TRIES_PER_ARCH = 200
PROGRESS_DRAWS = 10_000  # draws between two progress reports (about a second of drawing)


def sample_architectures(
    space: SearchSpace,
    n: int,
    seed: int,
    flops_min: float | None = None,
    flops_max: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Arch]:
    """``n`` distinct architectures drawn with ``numpy.random.default_rng(seed)``; the same seed gives the same list
    on any machine. Each record carries its ``id`` and the ``seed``. Raises when the band is too narrow.
    ``progress(found, draws)`` is called every PROGRESS_DRAWS draws (a large sample, or a narrow band, takes
    seconds to minutes)."""
    check_count(n, "the number of architectures", 1, MAX_ARCHITECTURES, ARCHITECTURES_WHY)
    check_seed(seed)
    check_flops_band(flops_min, flops_max)
    rng = np.random.default_rng(seed)
    seen: dict[str, Arch] = {}
    tries = 0
    while len(seen) < n:
        tries += 1
        if progress is not None and tries % PROGRESS_DRAWS == 0:
            progress(len(seen), tries)
        if tries > MAX_TRIES_PER_ARCH * n:
            raise UsageError(
                f"only {len(seen)} distinct {space.name} architectures in {tries - 1} draws within the FLOPs band "
                f"[{flops_min}, {flops_max}]: widen the band or ask for fewer"
            )
        arch = space.validate(space.sample(rng))
        flops = space.complexity(arch).flops
        if (flops_min is not None and flops < flops_min) or (flops_max is not None and flops > flops_max):
            continue
        key = arch_id(arch)
        seen.setdefault(key, {**arch, "id": key, "seed": seed})
    return list(seen.values())


def sample_file(
    path: str | Path,
    space: SearchSpace,
    n: int,
    seed: int,
    flops_min: float | None = None,
    flops_max: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Arch]:
    """``utilscope nas sample``: :func:`sample_architectures` into a JSONL file, whose path is checked first."""
    check_jsonl_path(path)
    archs = sample_architectures(space, n, seed, flops_min, flops_max, progress)
    save_jsonl(path, archs)
    return archs


def check_jsonl_path(path: str | Path) -> Path:
    """A path an architecture file can be written to: a ``.jsonl`` file (``archs.jsonl:ID`` names a model only
    with that suffix), not a folder, in a folder that exists or can be created."""
    return check_output_file(path, ARCH_FILE, (".jsonl",))


def save_jsonl(path: str | Path, archs: list[Arch]) -> Path:
    path = check_jsonl_path(path)
    return write_atomically(path, "".join(json.dumps(arch, sort_keys=True) + "\n" for arch in archs), ARCH_FILE)


def load_jsonl(path: str | Path, space_name: str | None = None) -> list[Arch]:
    """Read and validate architectures; a file that cannot be read as text or a malformed line is a UsageError
    naming the file (and line): ``arch_files.read_lines``, then each record validated by its space."""
    archs = []
    for number, record in read_lines(path, space_name):
        try:
            archs.append(
                {**get_space(record["space"]).validate(record), **{k: record[k] for k in ("id", "seed") if k in record}}
            )
        except UsageError as exc:
            raise UsageError(f"{path}:{number}: {exc}") from None
    return archs


def measurement_models(path: str | Path, limit: int | None = None) -> list[str]:
    """The model ids (``path:ID``) of a sampled file's architectures, the first ``limit`` of them when given."""
    ids = [f"{path}:{arch['id']}" for arch in load_jsonl(path) if "id" in arch]
    if not ids:
        raise UsageError(f"{path} has no architectures with ids (write it with `utilscope nas sample`)")
    if limit is not None:
        check_count(limit, "--limit")
    return ids[:limit]
