"""A published row's count (``count_row``) and its cache: what ``count_row`` says of a model at a resolution and
value size is a pure function of them and of the code and model zoos that count it, so it is kept in utilscope's
cache (kind ``counts``, a ``cache.ValueCache``), one file per utilscope, torch, torchvision and timm version and per
digest of the counting code (``counting.counter.count_version``: the counting engine and the model sources; and
this module, not the table formats' parsers), and an ``ingest`` into a new store counts only what no earlier one
counted. The reparameterized models ``infer_reparam`` counts are cached the same way (their FLOPs only). The
cache's seed (``COUNTS_SEED``, ``scripts/seed_caches.py``) holds both of every shipped table, computed under the
version it names: while the code and versions are that one, an ``ingest`` of the shipped tables counts nothing.
"""

from __future__ import annotations

import functools
from pathlib import Path

from utilscope.cache import ValueCache, source_digest
from utilscope.precision import Precision


@functools.cache
def versions() -> str:
    """What a count row depends on: what a count does (``counting.counter.count_version``: the versions and counting
    code) and this module, which makes a row of it (once per process)."""
    from utilscope.counting.counter import count_version

    return f"{count_version()}|{source_digest('survey/count_cache.py')}"


COUNTS_SEED = Path(__file__).with_name("counts_seed.json.xz")  # every shipped table's counts (scripts/seed_caches.py)


def counts_cache() -> ValueCache:
    """The cache of counts (kind ``counts``), seeded with those of every shipped published table (``COUNTS_SEED``)."""
    return ValueCache("counts", versions(), COUNTS_SEED)


key_of = ValueCache.key


def cached(keys: list[str]) -> dict[str, dict]:
    """The cached values of those keys that have one."""
    return counts_cache().get(keys)


def keep(values: dict[str, dict]) -> None:
    """Cache each key's value."""
    counts_cache().put(values)


UNCHECKED = "unchecked"  # a reparameterizable model's row before infer_reparam read its GMACs


def count_row(model: str, resolution: int, precision: str) -> dict:
    """What utilscope's counting engine says of ``model`` at ``resolution`` (per sample, batch 1, the precision's
    value size), and whether the table's run could have reparameterized it: ``reparam`` is "unchecked" for a model
    with modules timm's ``reparameterize_model`` converts (the tables do not say whether ``--reparam`` was given:
    ``infer_reparam`` reads it from the row's GMACs), "n/a" otherwise; ``conv_class`` its class for the GPU atlas
    (``counting.architecture.conv_class``). A precision the counting engine has no dtype for (int8) is counted in
    fp16, whose FLOPs are its own, its bytes left unknown (None). A model that cannot be built or counted:
    ``count_status`` "error: ..." (the row is kept)."""
    from utilscope.counting import DTYPES, count
    from utilscope.counting.architecture import conv_class
    from utilscope.errors import describe
    from utilscope.models import zoo

    dtype = Precision(precision).count_dtype
    traced = dtype if dtype in DTYPES else "fp16"  # int8 (TensorRT's): the FLOPs of the fp16 trace, not its bytes
    try:
        module, _ = zoo.build_on_meta(zoo.parse_spec(model), resolution)
        convertible = zoo.reparameterizable(module)
        result = count(model, 1, resolution, traced)
    except Exception as exc:  # noqa: BLE001 - a model of another timm version, a counter gap: recorded, not raised
        return {"count_status": f"error: {describe(exc)}"[:300], "reparam": "", "conv_class": ""}
    total = result.total
    return {
        "flops_per_sample": int(total.flops),
        "other_flops_per_sample": int(total.other_flops),
        "bytes_per_sample": int(total.bytes) if traced == dtype else None,
        "count_status": "ok",
        "reparam": UNCHECKED if convertible else "n/a",
        "conv_class": conv_class(result),
    }


def count_in_worker(model: str, resolution: int, precision: str) -> dict:
    """``count_row`` in a worker process, torch on one thread (the workers share the machine's cores)."""
    import torch

    torch.set_num_threads(1)
    return count_row(model, resolution, precision)
