"""The general layer model (`utilscope predict`'s) as the prior of the NAS layer models: one predictor, not two.

A search space's block is built, traced on the meta device and predicted from the shipped device profile, as any
CNN would be. That costs about 11 ms of CPU per block, too slow for `nas predict`'s 10,000 networks per second, so
`nas fit` does it once: for every block of the latency table and of a seeded sample of the space's architectures,
at each of the table's batch sizes. The estimates (``prior_ms``) go into the NAS profile; the layer models then fit
trees to them (a fast copy of the general model over the space) and, on top, trees to the table's residual over
that copy (``nas.table_predictor.fit_layer_model``).
"""

from __future__ import annotations

import numpy as np
import torch

from utilscope.errors import UsageError
from utilscope.nas.latency import LatencyTable
from utilscope.nas.sampler import sample_architectures
from utilscope.nas.space import Layer, SearchSpace, parse_layer_key
from utilscope.nas.spaces import get_space

PRIOR_KIND = "block"  # the kind the general model is the prior of: a space's blocks (stems and heads are few)
PRIOR_SEED = 1  # the architectures sampled for more blocks than the table holds


def block_layer(key: str) -> Layer:
    """The block of a table key: in both spaces a block's configuration starts with its input channels and ends with
    its input size."""
    kind, config = parse_layer_key(key)
    if kind != PRIOR_KIND:
        raise UsageError(f"{key} is not a {PRIOR_KIND}")
    return Layer(kind, config, config[0], config[-1])


def general_block_ms(predictor, space: SearchSpace, layers: list[Layer], batch: int) -> np.ndarray:
    """The general model's milliseconds of each block at ``batch``: built, traced on the meta device in fp16 and
    composed from the device profile (``predict.predictor.Predictor``), one layer-model call for all."""
    from utilscope.counting.counter import meta_copy
    from utilscope.counting.tracer import trace
    from utilscope.predict.predictor import network_rows

    networks = []
    for layer in layers:
        module = meta_copy(space.build_layer(layer).eval()).to(torch.float16)
        x = torch.empty((batch, layer.in_channels, layer.in_size, layer.in_size), device="meta", dtype=torch.float16)
        networks.append(network_rows(trace(module, x), predictor.gpu))
    return predictor.compose_many(networks)


def prior_keys(table: LatencyTable, sample_archs: int, seed: int = PRIOR_SEED) -> list[str]:
    """The blocks to estimate: the table's, and those of ``sample_archs`` architectures sampled with ``seed``."""
    space = get_space(table.space)
    keys = {key for key in table.entries if parse_layer_key(key)[0] == PRIOR_KIND}
    if sample_archs > 0:
        archs = sample_architectures(space, sample_archs, seed)
        keys |= {layer.key for arch in archs for layer in space.layers(arch) if layer.kind == PRIOR_KIND}
    return sorted(keys)


def prior_estimates(table: LatencyTable, sample_archs: int, profile_path) -> dict[str, dict[int, float]]:
    """key -> batch -> the general model's ms, for ``prior_keys`` at every batch size of the table, from the device
    profile at ``profile_path`` (``predict.selection.select_profile``)."""
    from utilscope.predict.fit_cache import load_predictor

    predictor = load_predictor(profile_path)
    space = get_space(table.space)
    keys = prior_keys(table, sample_archs)
    layers = [block_layer(key) for key in keys]
    estimates: dict[str, dict[int, float]] = {key: {} for key in keys}
    for batch in sorted(table.batches()):
        for key, ms in zip(keys, general_block_ms(predictor, space, layers, batch).tolist(), strict=True):
            estimates[key][batch] = float(f"{ms:.5g}")  # 5 digits: far inside the model's error, a smaller profile
    return estimates


def shipped_general_profile(table: LatencyTable):
    """The shipped device profile of the table's GPU and precision (graph backend), or None when none is shipped."""
    from utilscope.hardware.specs import gpu_matches
    from utilscope.predict import profiles

    for entry in profiles.shipped():
        if gpu_matches(entry.device, table.device) and (entry.precision, entry.backend) == (table.precision, "graph"):
            return entry.path
    return None
