"""Calibration of the host side of eager PyTorch (``predict.host``): the host's microseconds per call kind.

Each kind is one small call as a network's forward makes it (a conv, a batch norm, a ReLU, ... on a batch-1
8-channel 8x8 image; an ``nn.Identity`` call for a module's Python call; a synchronize for the end of a timed
forward), made ``CALLS`` times back to back and timed on the host with ``time.perf_counter``, the median of
``SAMPLES`` such runs. The tensors are so small that the GPU runs each kernel in less time than the host takes to
launch it, and ``CALLS`` stays below the depth of CUDA's launch queue, so the host never waits for the GPU: the
time is the host's own (Python, dispatch, the launch). On a CPU the ops run on the host itself, their work
included; such a profile tests the machinery and predicts no GPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utilscope import hardware
from utilscope.predict.host import FORWARD, MODULE, OTHER, HostProfile

CALLS = 200  # below CUDA's launch queue (1,024 kernels): the host is never held up by the GPU
SAMPLES = 7
WARMUP_CALLS = 50


def call_cases(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
    """One call of each kind (``host.CALL_KINDS``) on tiny tensors of ``device``."""
    image = torch.randn(1, 8, 8, 8, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    other = torch.randn_like(image)
    weight = torch.randn(8, 8, 3, 3, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    tokens = torch.randn(1, 64, device=device, dtype=dtype)
    dense, bias = torch.randn(64, 64, device=device, dtype=dtype), torch.randn(64, device=device, dtype=dtype)
    stats = [torch.rand(8, device=device, dtype=dtype) + 0.5 for _ in range(4)]
    heads = torch.randn(1, 1, 16, 8, device=device, dtype=dtype)
    identity = torch.nn.Identity()
    cases = {
        MODULE: lambda: identity(image),
        FORWARD: torch.cuda.synchronize if device.type == "cuda" else lambda: None,
        OTHER: lambda: torch.clamp(image, -1.0, 1.0),
        "conv": lambda: F.conv2d(image, weight, None, 1, 1),
        "matmul": lambda: F.linear(tokens, dense, bias),
        "attention": lambda: F.scaled_dot_product_attention(heads, heads, heads),
        "norm": lambda: F.batch_norm(image, stats[0], stats[1], stats[2], stats[3], False),
        "activation": lambda: F.relu(image),
        "elementwise": lambda: torch.add(image, other),
        "pool": lambda: F.max_pool2d(image, 3, 2, 1),
        "reduce": lambda: image.mean((2, 3), keepdim=True),
        "softmax": lambda: torch.softmax(tokens, -1),
        "movement": lambda: torch.cat((image, other), 1),
        "view": lambda: image.permute(0, 2, 3, 1),
        "creation": lambda: torch.empty_like(image),
    }
    return cases


def host_us(call: Callable[[], object], device: torch.device) -> float:
    """The host's median microseconds per call (the module's docstring)."""
    with torch.inference_mode():
        for _ in range(WARMUP_CALLS):
            call()
        samples = []
        for _ in range(SAMPLES):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start_s = time.perf_counter()
            for _ in range(CALLS):
                call()
            samples.append((time.perf_counter() - start_s) / CALLS * 1e6)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return statistics.median(samples)


def calibrate_host(device: str | None = None, on_kind: Callable[[str, float], None] | None = None) -> HostProfile:
    """The host profile of this machine launching to ``device`` (None: the GPU if there is one, else the CPU):
    each call kind timed (``host_us``); ``on_kind(kind, us)`` is told each."""
    dev = hardware.resolve_device(device)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    call_us = {}
    for kind, call in call_cases(dev, dtype).items():
        call_us[kind] = host_us(call, dev)
        if on_kind is not None:
            on_kind(kind, call_us[kind])
    cpu = hardware.device_name(torch.device("cpu"))
    return HostProfile(cpu, torch.__version__, hardware.device_name(dev), call_us)
