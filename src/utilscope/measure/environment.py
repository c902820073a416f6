"""The software and hardware environment recorded with every measurement."""

from __future__ import annotations

import platform

import torch

from utilscope import __version__, hardware
from utilscope.measure.nvml import device_uuid, driver_version


def environment(
    device: torch.device,
    precision: str,
    backend: str,
    channels_last: bool,
    cudnn_benchmark: bool = True,
    cudnn_benchmark_limit: int | None = None,
    cudnn_depthwise_heuristic: bool = False,
) -> dict:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    env = {
        "device_name": hardware.device_name(device),
        "device_type": device.type,
        "device_uuid": device_uuid(device),  # which GPU of a machine with several (None on a CPU)
        "driver": driver_version() if device.type == "cuda" else None,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "utilscope": __version__,
        "precision": precision,
        "backend": backend,
        "memory_format": "channels_last" if channels_last else "contiguous",
        "cudnn_benchmark": cudnn_benchmark,  # cuDNN autotunes each new conv shape (True) or takes its heuristic
    }
    if cudnn_benchmark_limit is not None:  # algorithms autotuning tries per new shape (absent: torch's default)
        env["cudnn_benchmark_limit"] = cudnn_benchmark_limit
    if cudnn_depthwise_heuristic:  # depthwise convs took cuDNN's heuristic algorithm (absent: autotuned as the rest)
        env["cudnn_depthwise_heuristic"] = True
    return env
