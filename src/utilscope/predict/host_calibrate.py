"""Calibration of the host side of eager PyTorch (``predict.host``): the host's microseconds per call kind.

Each kind is one small call as a network's forward makes it (a conv, a batch norm, a ReLU, ... on a batch-1
8-channel 8x8 image; an ``nn.Identity`` call for a module's Python call; a synchronize for the end of a timed
forward). The kinds a network calls through a module of their own (``MODULE_FORMS``: ``nn.Conv2d``,
``nn.BatchNorm2d``, ...) are timed as that module's call, less the ``nn.Identity`` call that a layer's ``module``
kind adds back, so a layer costs what its module's own ``forward`` costs. Each call is made ``CALLS`` times back to
back and timed on the host with ``time.perf_counter``, the median of ``SAMPLES`` such runs. The runs are taken in
rounds, each round timing every kind once in turn (``interleaved_us``): a lent machine's host has slow spells of
seconds (torchvision's ConvNeXt-S and ConvNeXt-B, the same calls, ran eager at batch 1 in 8.6 and 5.7 ms a forward,
timed 4 s apart on one H100 machine: ``data/h100/eager.sqlite``), and a kind timed in one block of time would take
a spell whole. The tensors are so small that the GPU runs each kernel in less time than the host takes to launch it,
and ``CALLS`` stays below the depth of CUDA's launch queue, so the host never waits for the GPU: the time is the
host's own (Python, dispatch, the launch). Then the calibration networks (``host_chains``) run whole forwards back
to back, timed the same way, in rounds of their own: the median of their measured times over the sum of their calls
(traced, ``host.call_counts``) is the profile's composition scale, what a forward adds to its calls timed alone. On
a GPU, last, the kernels cuDNN runs a call of 3x3 grouped convs (``conv_kernel_rows``: a grid of group widths, groups
and sizes, batch 1, counted with ``torch.profiler``) and the host's microseconds a kernel beyond a call's first
(``split_kernel_us``): cuDNN runs some grouped convs as a kernel per group or more, each a launch. On a CPU the ops
run on the host itself, their work included; such a profile tests the machinery and predicts no GPU.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

from utilscope import hardware
from utilscope.counting.counter import count_traced
from utilscope.predict import host_chains
from utilscope.predict.host import FORWARD, MODULE, OTHER, HostProfile, call_counts

CALLS = 200  # below CUDA's launch queue (1,024 kernels): the host is never held up by the GPU
SAMPLES = 15  # rounds (``interleaved_us``)
WARMUP_CALLS = 50
# The kinds a network calls through a module of their own, timed as that module's call (``call_cases``)
MODULE_FORMS: dict[str, Callable[[], nn.Module]] = {
    "conv": lambda: nn.Conv2d(8, 8, 3, padding=1, bias=False),
    "matmul": lambda: nn.Linear(64, 64),
    "norm": lambda: nn.BatchNorm2d(8),
    "activation": nn.ReLU,
    "pool": lambda: nn.MaxPool2d(3, 2, 1),
}
CHAIN_FORWARDS = 20  # a calibration network's forwards a sample: under 1,024 kernels for the largest (about 50)
# The 3x3 grouped convs whose kernels a call are counted (``conv_kernel_rows``): every group width at every count of
# groups up to KERNEL_CHANNELS channels, at each size, batch 1
KERNEL_WIDTHS = (2, 3, 4, 8, 16, 24, 32, 48, 64, 128)
KERNEL_GROUPS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
KERNEL_SIZES = (7, 14, 28, 56)
KERNEL_CHANNELS = 2048
SPLIT_TIMED = 6  # split convs (4-128 kernels a call) timed for the host's microseconds a kernel (``split_kernel_us``)
QUEUE_KERNELS = 1000  # kernels a timed sample launches at most: within CUDA's launch queue


def call_cases(device: torch.device, dtype: torch.dtype) -> dict[str, Callable[[], object]]:
    """One call of each kind (``host.CALL_KINDS``) on tiny tensors of ``device``."""
    image = torch.randn(1, 8, 8, 8, device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    other = torch.randn_like(image)
    tokens = torch.randn(1, 64, device=device, dtype=dtype)
    heads = torch.randn(1, 1, 16, 8, device=device, dtype=dtype)
    identity = torch.nn.Identity()
    conv, linear, norm, relu, pool = (make().to(device, dtype).eval() for make in MODULE_FORMS.values())
    conv = conv.to(memory_format=torch.channels_last)
    cases = {
        MODULE: lambda: identity(image),
        FORWARD: torch.cuda.synchronize if device.type == "cuda" else lambda: None,
        OTHER: lambda: torch.clamp(image, -1.0, 1.0),
        "conv": lambda: conv(image),
        "matmul": lambda: linear(tokens),
        "attention": lambda: F.scaled_dot_product_attention(heads, heads, heads),
        "norm": lambda: norm(image),
        "activation": lambda: relu(image),
        "elementwise": lambda: torch.add(image, other),
        "pool": lambda: pool(image),
        "reduce": lambda: image.mean((2, 3), keepdim=True),
        "softmax": lambda: torch.softmax(tokens, -1),
        "movement": lambda: torch.cat((image, other), 1),
        "view": lambda: image.permute(0, 2, 3, 1),
        "creation": lambda: torch.empty_like(image),
    }
    return cases


def _sample_us(call: Callable[[], object], device: torch.device, calls: int) -> float:
    """The host's microseconds per call over ``calls`` calls back to back, the device idle before them."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start_s = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start_s) / calls * 1e6


def interleaved_us(
    cases: dict[str, Callable[[], object]], device: torch.device, calls: int = CALLS
) -> dict[str, float]:
    """Each case's median host microseconds per call (the module's docstring) over ``SAMPLES`` rounds, each round
    one sample of ``calls`` calls of every case in turn, after ``WARMUP_CALLS`` of each."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    with torch.inference_mode():
        for call in cases.values():
            for _ in range(WARMUP_CALLS):
                call()
        for _ in range(SAMPLES):
            for name, call in cases.items():
                samples[name].append(_sample_us(call, device, calls))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {name: statistics.median(values) for name, values in samples.items()}


def host_us(call: Callable[[], object], device: torch.device, calls: int = CALLS) -> float:
    """One call's median host microseconds per call (``interleaved_us`` of it alone)."""
    return interleaved_us({"call": call}, device, calls)["call"]


def chain_rows(unscaled: HostProfile, device: torch.device, dtype: torch.dtype) -> list[dict]:
    """Each calibration network (``host_chains``): its host calls, the host's milliseconds a forward measured
    (forwards back to back, ``interleaved_us``) and the sum of its calls by the ``unscaled`` profile's kinds (scale
    1)."""
    counted = "fp16" if dtype == torch.float16 else "fp32"
    image = torch.randn(1, host_chains.CHANNELS, host_chains.RESOLUTION, host_chains.RESOLUTION, device=device)
    image = image.to(dtype=dtype, memory_format=torch.channels_last)
    counts, forwards = {}, {}
    for name, net in host_chains.chains().items():
        _, recorded = count_traced(net, 1, host_chains.RESOLUTION, counted, channels_last=True)
        counts[name] = call_counts(recorded)
        net = net.to(device, dtype, memory_format=torch.channels_last)
        forwards[name] = functools.partial(net, image)
    measured_us = interleaved_us(forwards, device, CHAIN_FORWARDS)
    return [
        {
            "chain": name,
            "calls": sum(counts[name].values()),
            "measured_ms": measured_us[name] / 1e3,
            "summed_ms": unscaled.calls_ms(counts[name]),
        }
        for name in forwards
    ]


def composition_scale(rows: list[dict]) -> float:
    """The median over the calibration networks of their measured host time over the sum of their calls."""
    return statistics.median(row["measured_ms"] / row["summed_ms"] for row in rows)


def grouped_call(group_width: int, groups: int, size: int, device: torch.device, dtype: torch.dtype, batch: int = 1):
    """One call of a 3x3 conv of ``groups`` groups of ``group_width`` channels on ``batch`` (default 1) ``size`` x
    ``size`` channels_last images, as a network's ``nn.Conv2d`` makes it."""
    channels = group_width * groups
    conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False).to(device, dtype).eval()
    image = torch.randn(batch, channels, size, size, device=device, dtype=dtype)
    return functools.partial(
        conv.to(memory_format=torch.channels_last), image.contiguous(memory_format=torch.channels_last)
    )


def count_kernels(call: Callable[[], object], device: torch.device) -> int:
    """The CUDA kernels one call runs (``torch.profiler``, after a call that warms it up)."""
    with torch.inference_mode():
        call()
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize(device)
    return sum(1 for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA)


def conv_kernel_rows(device: torch.device, dtype: torch.dtype) -> list[dict]:
    """The kernels cuDNN runs a call of each 3x3 grouped conv of the grid (``KERNEL_WIDTHS`` x ``KERNEL_GROUPS`` x
    ``KERNEL_SIZES``, at most ``KERNEL_CHANNELS`` channels): ``HostProfile.conv_kernels``' rows."""
    rows = []
    for width, groups, size in itertools.product(KERNEL_WIDTHS, KERNEL_GROUPS, KERNEL_SIZES):
        if width * groups <= KERNEL_CHANNELS:
            kernels = count_kernels(grouped_call(width, groups, size, device, dtype), device)
            rows.append({"group_width": width, "groups": groups, "size": size, "kernels": kernels})
    return rows


def split_kernel_us(rows: list[dict], device: torch.device, dtype: torch.dtype) -> float:
    """The host's microseconds a kernel beyond a call's first: up to ``SPLIT_TIMED`` convs of ``rows`` that run
    4-128 kernels a call, spread over their kernels, timed beside a one-kernel conv (``interleaved_us``, as few calls
    a sample as keep its kernels within ``QUEUE_KERNELS``): the median of their call's extra time over their extra
    kernels; 0 when no conv splits."""
    split = sorted((row for row in rows if 4 <= row["kernels"] <= 128), key=lambda row: row["kernels"])
    chosen = split[:: max(1, len(split) // SPLIT_TIMED)][:SPLIT_TIMED]
    if not chosen:
        return 0.0
    cases = {"one": grouped_call(8, 1, 8, device, dtype)}
    for i, row in enumerate(chosen):
        cases[str(i)] = grouped_call(row["group_width"], row["groups"], row["size"], device, dtype)
    us = interleaved_us(cases, device, max(1, QUEUE_KERNELS // chosen[-1]["kernels"]))
    return statistics.median((us[str(i)] - us["one"]) / (row["kernels"] - 1) for i, row in enumerate(chosen))


def calibrate_host(device: str | None = None, on_kind: Callable[[str, float], None] | None = None) -> HostProfile:
    """The host profile of this machine launching to ``device`` (None: the GPU if there is one, else the CPU):
    each call kind timed (``interleaved_us``), then the calibration networks (``chain_rows``) for the composition scale;
    ``on_kind(kind, us)`` is told each kind's microseconds a call."""
    dev = hardware.resolve_device(device)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    call_us = interleaved_us(call_cases(dev, dtype), dev)
    for kind in call_us:
        if kind in MODULE_FORMS:  # its module's call: less the module call the layer counts apart
            call_us[kind] = max(call_us[kind] - call_us[MODULE], 0.0)
        if on_kind is not None:
            on_kind(kind, call_us[kind])
    cpu = hardware.device_name(torch.device("cpu"))
    unscaled = HostProfile(cpu, torch.__version__, hardware.device_name(dev), call_us)
    rows = chain_rows(unscaled, dev, dtype)
    composed = replace(unscaled, scale=composition_scale(rows), chains=tuple(rows))
    return with_conv_kernels(composed, dev, dtype) if dev.type == "cuda" else composed


def with_conv_kernels(host: HostProfile, device: torch.device, dtype: torch.dtype) -> HostProfile:
    """``host`` with the kernels cuDNN runs a call of the grid's grouped convs (``conv_kernel_rows``), the host's
    microseconds a kernel beyond the first (``split_kernel_us``) and where they were counted."""
    rows = conv_kernel_rows(device, dtype)
    source = (
        f"calibrate --host, {hardware.device_name(device)}, cuDNN {torch.backends.cudnn.version()}, "
        f"cudnn.benchmark {'on' if torch.backends.cudnn.benchmark else 'off'}, batch 1"
    )
    per_kernel_us = split_kernel_us(rows, device, dtype)
    return replace(host, conv_kernels=tuple(rows), split_kernel_us=per_kernel_us, kernels_source=source)
