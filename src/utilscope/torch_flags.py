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
def _flags(settings: list[tuple[object, str, object]]) -> Iterator[None]:
    """Set each (owner, attribute, value) inside the block; restore the values found before, also on errors."""
    saved = [getattr(owner, name) for owner, name, _ in settings]
    for owner, name, value in settings:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name, _), value in zip(settings, saved, strict=True):
            setattr(owner, name, value)


def tf32_mode(matmul: bool, conv: bool | None = None):
    """Allow (or forbid) TF32 in fp32 matmuls and in cuDNN convolutions (``conv`` None: as matmuls) inside the
    block."""
    wanted = (matmul, matmul if conv is None else conv)
    return _flags(
        [
            (owner, name, on if enabled else off)
            for (owner, name, on, off), enabled in zip(_tf32_settings(), wanted, strict=True)
        ]
    )


def cudnn_mode(benchmark: bool, benchmark_limit: int | None = None):
    """cuDNN autotuning on or off inside the block, trying at most ``benchmark_limit`` algorithms per new shape when
    given (torch's default 10; 0: all)."""
    settings = [(torch.backends.cudnn, "benchmark", benchmark)]
    if benchmark_limit is not None:
        settings.append((torch.backends.cudnn, "benchmark_limit", benchmark_limit))
    return _flags(settings)


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
