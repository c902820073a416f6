"""TF32 and cuDNN switches, set inside a ``with`` block and restored after (never at import).

torch >= 2.9 has ``fp32_precision`` settings, which must not be mixed with the legacy ``allow_tf32`` flags:
use the new ones where they exist, else the legacy ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


def _tf32_settings() -> list[tuple[object, str, object, object]]:
    """(owner, attribute, value for TF32 on, value for TF32 off) for matmuls and cuDNN convolutions."""
    matmul, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision"):
        return [(matmul, "fp32_precision", "tf32", "ieee"), (conv, "fp32_precision", "tf32", "ieee")]
    return [(matmul, "allow_tf32", True, False), (torch.backends.cudnn, "allow_tf32", True, False)]


@contextlib.contextmanager
def tf32_mode(
    enabled: bool, cudnn_benchmark: bool | None = None, cudnn_benchmark_limit: int | None = None
) -> Iterator[None]:
    """Allow (or forbid) TF32 in fp32 matmuls and convolutions; optionally set cuDNN autotuning and how many
    algorithms it tries per new shape (``benchmark_limit``: torch's default 10, 0 for all)."""
    settings = _tf32_settings()
    if cudnn_benchmark is not None:
        settings.append((torch.backends.cudnn, "benchmark", cudnn_benchmark, cudnn_benchmark))
    if cudnn_benchmark_limit is not None:
        settings.append((torch.backends.cudnn, "benchmark_limit", cudnn_benchmark_limit, cudnn_benchmark_limit))
    saved = [getattr(owner, name) for owner, name, _, _ in settings]
    for owner, name, on, off in settings:
        setattr(owner, name, on if enabled else off)
    try:
        yield
    finally:
        for (owner, name, _, _), value in zip(settings, saved, strict=True):
            setattr(owner, name, value)


def is_depthwise(conv: nn.Module) -> bool:
    """A 2-d convolution with one group per input channel (and more than one channel)."""
    return isinstance(conv, nn.Conv2d) and conv.groups > 1 and conv.groups == conv.in_channels


@contextlib.contextmanager
def heuristic_for_depthwise(model: nn.Module) -> Iterator[None]:
    """While inside, the model's depthwise convolutions run with ``cudnn.benchmark`` off (cuDNN's heuristic
    algorithm) and every other layer with the setting outside. torch caches cuDNN's choice per conv shape, whichever
    way it was made, so one forward pass inside decides the depthwise algorithms for later calls too."""
    saved: list[bool] = []

    def heuristic(module, args) -> None:
        saved.append(torch.backends.cudnn.benchmark)
        torch.backends.cudnn.benchmark = False

    def restore(module, args, output) -> None:
        torch.backends.cudnn.benchmark = saved.pop()

    convs = [m for m in model.modules() if is_depthwise(m)]
    handles = [c.register_forward_pre_hook(heuristic) for c in convs]
    handles += [c.register_forward_hook(restore, always_call=True) for c in convs]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
