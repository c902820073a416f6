"""Many networks predicted together, for a table of them (the report's model view: every model on every GPU).

Each network is counted once (``Predictor.count``) and kept as its distinct rows (``predictor.network_records``
without their place in the network) with how often each occurs: a ``CountedNetwork``. The rows of all networks
are then timed on the profile's GPU in one layer-model call (``Predictor.source_times``) and carried to each target
GPU in one ``Predictor.row_times`` call; a network's time on a GPU is its rows' times weighted by their counts.
The composition is ``Predictor.predict_counted``'s: samples/s, utilization and bound equal a one-network
prediction's (``predict_on``) to float rounding. What needs the rows in their order (eager's latency of one
forward alone, the per-layer lists) is ``predict_on``'s alone.

A zoo model's counted network is a function of its name, the count's arguments and the code and versions that
count it, so it is kept in utilscope's cache (kind ``networks``, ``networks_cache``), whose shipped seed holds the
networks of the GPU atlas's models (``scripts/seed_caches.py``): a report of the atlas traces none of them while
that code is the seed's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from utilscope.cache import ValueCache, source_digest
from utilscope.counting.counter import count_version
from utilscope.errors import UtilscopeError
from utilscope.hardware.utilization import achieved_tflops, utilization
from utilscope.models import zoo
from utilscope.predict.features import Gpu
from utilscope.predict.host import call_counts
from utilscope.predict.predictor import Predictor, counted_channels_last, network_records, rows_frame

PLACE = ("layer", "layers")  # a row's place in its network: not what it costs
COUNT = "count"  # the column of a distinct row's occurrences in its network
# one row per network and GPU (``predict_counted_networks``)
COLUMNS = [
    "model",
    "gpu",
    "gpu_key",
    "transferred_from",
    "batch",
    "precision",
    "backend",
    "memory_format",
    "resolution",
    "flops",
    "samples_per_s",
    "utilization",
    "bound",
]


@dataclass(frozen=True)
class CountedNetwork:
    """What a prediction reads of one counted network: its name, batch, resolution, FLOPs per batch, the memory
    format its convs saw, its host calls by kind (``host.call_counts``) and its distinct rows with their ``count``."""

    model: str
    batch: int
    resolution: int
    flops: int
    memory_format: str
    host_calls: dict[str, int]
    rows: pd.DataFrame

    def to_dict(self) -> dict:
        """A JSON-encodable dict (``from_dict`` reads it back, to the bit): the rows as their columns and values,
        None where a row has no value."""
        values = self.rows.astype(object).where(self.rows.notna(), None).to_numpy().tolist()
        fields = {name: getattr(self, name) for name in ("model", "batch", "resolution", "flops", "memory_format")}
        return {**fields, "host_calls": dict(self.host_calls), "columns": list(self.rows.columns), "rows": values}

    @classmethod
    def from_dict(cls, data: dict) -> CountedNetwork:
        records = [
            {name: value for name, value in zip(data["columns"], values, strict=True) if value is not None}
            for values in data["rows"]
        ]
        fields = [data[name] for name in ("model", "batch", "resolution", "flops", "memory_format", "host_calls")]
        return cls(*fields, rows_frame(records).reindex(columns=data["columns"]))


CACHED_SOURCES = ("timm", "torchvision")  # their networks are functions of their names; a file's or module's are not
NETWORKS_SEED = Path(__file__).with_name("networks_seed.json.xz")  # the atlas's networks (``scripts/seed_caches.py``)
# what a counted network depends on besides the versions and counting code (``counter.count_version``): the
# predictor's code (its rows, features and host calls), the GPU table (the rows' rooflines) and the precisions' dtypes
NETWORK_CODE = ("hardware", "precision.py", "measure/precision.py")


def networks_cache() -> ValueCache:
    """The cache of counted networks (kind ``networks``), seeded with the atlas's (``NETWORKS_SEED``)."""
    predictor_code = sorted(f"predict/{path.name}" for path in Path(__file__).parent.glob("*.py"))
    version = f"{count_version()}|{source_digest(*predictor_code, *NETWORK_CODE)}"
    return ValueCache("networks", version, NETWORKS_SEED)


def network_key(predictor: Predictor, model, batch: int, resolution: int | None, precision, channels_last: bool):
    """The cache key of ``counted_network``'s arguments, None for a network not kept (not of ``CACHED_SOURCES``)."""
    if not isinstance(model, str) or zoo.parse_spec(model).source not in CACHED_SOURCES:
        return None
    parsed = predictor.check_precision(precision)
    return ValueCache.key(model, batch, resolution, parsed.value, channels_last, predictor.timed_casts, predictor.gpu)


def counted_network(
    predictor: Predictor, model, batch: int, resolution: int | None, precision: str | None, channels_last: bool
) -> CountedNetwork:
    """``model`` counted as ``Predictor.count`` counts it, kept as a ``CountedNetwork``."""
    counted, recorded = predictor.count(model, batch, resolution, precision, channels_last)
    distinct = Counter(
        tuple((name, value) for name, value in record.items() if name not in PLACE)
        for record in network_records(recorded, predictor.gpu)
    )
    rows = rows_frame([dict(items) for items in distinct]).assign(**{COUNT: list(distinct.values())})
    layout = "channels_last" if counted_channels_last(recorded) else "contiguous"
    return CountedNetwork(
        counted.model, batch, counted.resolution, counted.total.flops, layout, call_counts(recorded), rows
    )


def known_networks(predictor: Predictor, cells: list[tuple]) -> dict[tuple, CountedNetwork]:
    """The networks of those ``cells`` (``counted_network``'s arguments after the predictor) that the cache, or its
    seed, has; a cell of a model not kept, or not known to the zoo, is not among them."""
    keys = {cell: _key_or_none(predictor, cell) for cell in cells}
    keys = {cell: key for cell, key in keys.items() if key is not None}
    found = networks_cache().get(list(keys.values()))
    return {cell: CountedNetwork.from_dict(found[key]) for cell, key in keys.items() if key in found}


def keep_networks(predictor: Predictor, networks: dict[tuple, CountedNetwork]) -> None:
    """Cache the networks counted of those cells whose model is kept (``network_key``)."""
    keys = {cell: _key_or_none(predictor, cell) for cell in networks}
    networks_cache().put({key: networks[cell].to_dict() for cell, key in keys.items() if key is not None})


def _key_or_none(predictor: Predictor, cell: tuple) -> str | None:
    """``network_key`` of a cell, None for a model the zoo does not know (its count says why)."""
    try:
        return network_key(predictor, *cell)
    except UtilscopeError:
        return None


def predict_counted_networks(
    predictor: Predictor,
    networks: list[CountedNetwork],
    targets: list[Gpu | None],
    backend: str | None = None,
    precision: str | None = None,
) -> pd.DataFrame:
    """One row (``COLUMNS``) per network and target GPU (None: the profile's), networks first: each network as
    ``Predictor.predict_counted`` predicts it, all of them in one layer-model call and one ``row_times`` call per
    GPU."""
    backend = predictor.check_backend(backend)
    parsed = predictor.check_precision(precision)
    if not networks:
        return pd.DataFrame(columns=COLUMNS)
    rows = pd.concat([network.rows for network in networks], ignore_index=True)
    if "channels_last_input" in rows:  # 0 on the networks' rows of no conv, as ``rows_frame`` fills it
        rows["channels_last_input"] = rows["channels_last_input"].fillna(0).astype(int)
    count = rows.pop(COUNT).to_numpy(float)
    owner = np.repeat(np.arange(len(networks)), [len(network.rows) for network in networks])
    source = predictor.source_times(rows)
    frames = []
    for target in targets:
        ms, _, bound, launched = predictor.row_times(rows, backend, target, source)
        per_forward_ms, main_bound = _network_times(predictor, networks, backend, owner, count, ms, bound, launched)
        gpu = target or predictor.gpu
        frames.append(
            pd.DataFrame(
                {
                    "network": np.arange(len(networks)),
                    "gpu": gpu.name,
                    "gpu_key": gpu.key,
                    "transferred_from": "" if gpu == predictor.gpu else predictor.device,
                    "samples_per_s": [n.batch for n in networks] / per_forward_ms * 1e3,
                    "utilization": utilization(
                        achieved_tflops(np.array([n.flops for n in networks], float), per_forward_ms),
                        gpu.peak_flops / 1e12,
                    ),
                    "bound": main_bound,
                }
            )
        )
    return _with_networks(pd.concat(frames, ignore_index=True), networks, parsed.value, backend)


def _network_times(
    predictor: Predictor,
    networks: list[CountedNetwork],
    backend: str,
    owner: np.ndarray,
    count: np.ndarray,
    ms: np.ndarray,
    bound: np.ndarray,
    launched: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each network's milliseconds per forward (back to back) and the bound of the most of its time, from its rows'
    ``row_times`` (``owner``: each row's network, ``count``: its occurrences). On eager with a host profile, a forward
    takes the longer of its host work and its kernels (``host.eager_timing``), bound "host" when that is the host's."""
    size = len(networks)
    latency_ms = np.bincount(owner, weights=count * ms, minlength=size)
    latency_ms += predictor.gap_ms * np.bincount(owner, weights=count * launched, minlength=size)
    names, codes = np.unique(bound.astype(str), return_inverse=True)  # sorted, as a groupby's keys
    per_bound = np.zeros((size, len(names)))
    np.add.at(per_bound, (owner, codes.reshape(-1)), count * ms)
    main_bound = names[per_bound.argmax(axis=1)] if len(names) else np.full(size, "")
    main_bound = np.where(np.bincount(owner, minlength=size) > 0, main_bound, "")
    if backend != "eager" or predictor.host is None:
        return latency_ms, main_bound.astype(object)
    host_ms = np.array([predictor.host.calls_ms(network.host_calls) for network in networks])
    return np.maximum(latency_ms, host_ms), np.where(host_ms > latency_ms, "host", main_bound).astype(object)


def _with_networks(frame: pd.DataFrame, networks: list[CountedNetwork], precision: str, backend: str) -> pd.DataFrame:
    """``predict_counted_networks``'s rows with their networks' columns, networks first, then GPUs in their order."""
    facts = pd.DataFrame(
        {
            "model": [n.model for n in networks],
            "batch": [n.batch for n in networks],
            "precision": precision,
            "backend": backend,
            "memory_format": [n.memory_format for n in networks],
            "resolution": [n.resolution for n in networks],
            "flops": [n.flops for n in networks],
        }
    )
    merged = frame.join(facts, on="network").sort_values("network", kind="stable")
    return merged[COLUMNS].reset_index(drop=True)
