"""Per-layer attribution: which layer's kernels took the device time, measured with torch.profiler.

Eager and graph backends: the model runs eagerly under the counting engine's tracer, which wraps every aten op
in a profiler range named after its layer (``utilscope.layer.N``), so each kernel (GPU) or op (CPU) is mapped
to exactly the layer whose counts the same run produced. The graph backend replays the same kernels, so its
per-layer times are these; its end-to-end time is the graph replay's.

Compiled backends (compile, inference): their kernels no longer belong to single layers. The kernel sequence of
one inference is split at every tensor-core kernel (convolution/GEMM/attention), and so is the layer sequence at
every layer with tensor-core FLOPs; when the two counts agree, the k-th kernel segment is the fused region of the
k-th layer segment. When they do not, kernels are grouped by family and the mismatch is recorded in the notes.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, record_function
from torch.profiler import profile as torch_profile

from utilscope.attribute.kernels import ANCHOR_FAMILIES, kernel_family
from utilscope.attribute.records import LayerTime, Point
from utilscope.counting.classify import OpClass
from utilscope.counting.counter import CountResult, LayerCount, aggregate
from utilscope.counting.tracer import Tracer, trace

RANGE_PREFIX = "utilscope.layer."


class RangeTracer(Tracer):
    """The counting tracer, with each op wrapped in a profiler range named after the layer it belongs to."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.suspended:
            return super().__torch_dispatch__(func, types, args, kwargs)
        with record_function(f"{RANGE_PREFIX}{self.next_layer_index()}"):
            return super().__torch_dispatch__(func, types, args, kwargs)


KINETO_QUIET = "6"  # above kineto's highest severity (USDT, 5): none of its log lines


@contextlib.contextmanager
def _profiled(activities: list) -> Iterator:
    """torch.profiler's ``profile``, without its warning that events are kept per profiling cycle (we profile one
    cycle and read it whole). Without CUDA activity, kineto's log lines are silenced (``KINETO_LOG_LEVEL``, read when
    the profiler first starts in a process; a value the user set is kept): on a machine without CUDA it printed
    "ERROR ... gpuGetDeviceCount failed" and its start/stop markers beside our output."""
    if ProfilerActivity.CUDA not in activities:
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with torch_profile(activities=activities) as prof:
            yield prof


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _enclosing_layer(event) -> int | None:
    node = event
    while node is not None:
        if node.name.startswith(RANGE_PREFIX):
            return int(node.name[len(RANGE_PREFIX) :])
        node = node.cpu_parent
    return None


@dataclass
class DeviceTimes:
    """Device time per inference: per layer index, in total, and the kernels (or ops) behind it.

    ``total_us`` sums every kernel's (GPU) or aten op's own (CPU) time; ``busy_us`` is the wall-clock time during
    which at least one of them ran. On a CPU, ops of several threads at once make the sum exceed the wall-clock
    time; on a GPU ``busy_us`` is ``total_us`` (the eager passes run on one stream)."""

    per_layer_us: dict[int, float]
    kernels: dict[int, Counter]
    total_us: float
    busy_us: float


def _spent(event, device: torch.device) -> tuple[float, list[str]]:
    """Kernel time launched from a CPU event (GPU), or an aten op's own CPU time (CPU)."""
    if device.type == "cuda":
        return sum(k.duration for k in event.kernels), [k.name for k in event.kernels]
    if event.device_type == DeviceType.CPU and event.name.startswith("aten::"):
        return event.self_cpu_time_total, [event.name]
    return 0.0, []


def covered_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: time during which at least one of them was open."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _range_wrappers(events) -> set[int]:
    """Ops that enclose a layer range: composite wrappers whose own time is the tracer's Python work."""
    wrappers: set[int] = set()
    for event in events:
        if event.name.startswith(RANGE_PREFIX):
            node = event.cpu_parent
            while node is not None and id(node) not in wrappers:
                wrappers.add(id(node))
                node = node.cpu_parent
    return wrappers


def device_times(events, device: torch.device, iters: int) -> DeviceTimes:
    per_layer_us: dict[int, float] = defaultdict(float)
    kernels: dict[int, Counter] = defaultdict(Counter)
    total_us = 0.0
    intervals: list[tuple[float, float]] = []
    wrappers = _range_wrappers(events)
    for event in events:
        spent_us, names = _spent(event, device)
        if not names or id(event) in wrappers:
            continue
        total_us += spent_us
        intervals.append((event.time_range.start, event.time_range.end))
        layer = _enclosing_layer(event)
        if layer is not None:
            per_layer_us[layer] += spent_us / iters
            kernels[layer].update(names)
    busy_us = covered_us(intervals) if device.type == "cpu" else total_us
    return DeviceTimes(dict(per_layer_us), dict(kernels), total_us / iters, busy_us / iters)


def layer_time(layer: LayerCount, time_us: float, kernels: Counter, iters: int) -> LayerTime:
    kernel_count = sum(kernels.values()) // iters
    return LayerTime(layer, time_ms=time_us / 1e3, kernel_count=kernel_count, kernels=sorted(kernels))


def eager_attribution(module, x: torch.Tensor, name: str, dtype: str, iters: int = 3):
    """Run the model eagerly ``iters`` times under the range tracer and the profiler.

    Returns (counts, per-layer times, the ``DeviceTimes`` per inference they come from).
    """
    device = x.device
    with torch.no_grad():
        for _ in range(3):  # warm-up: cuDNN autotuning, lazy initialization
            module(x)
    _synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with _profiled(activities) as prof:
        for _ in range(iters):
            recorded = trace(module, x, RangeTracer)
            _synchronize(device)
    params = sum(p.numel() for p in module.parameters())
    counts = aggregate(recorded, name, tuple(x.shape), dtype, params, device.type)
    times = device_times(prof.events(), device, iters)
    layers = [
        layer_time(layer, times.per_layer_us.get(index, 0.0), times.kernels.get(index, Counter()), iters)
        for index, layer in enumerate(counts.layers)
    ]
    return counts, layers, times


def layer_points(layers: list[LayerTime]) -> list[Point]:
    """Eager execution: every layer with work and time is a roofline point, with its unfused bytes."""
    return [
        Point(
            layer.name,
            layer.op_class,
            layer.flops,
            layer.other_flops,
            layer.bytes,
            layer.time_ms,
            [layer.name],
            layer.kernels,
        )
        for layer in layers
        if layer.time_ms and (layer.flops or layer.other_flops or layer.bytes)
    ]


def kernel_sequence(run, device: torch.device) -> list[tuple[str, float]]:
    """(name, microseconds) of every kernel of one call of ``run``, in the order they ran on the GPU."""
    run()
    _synchronize(device)
    with _profiled([ProfilerActivity.CUDA]) as prof:
        run()
        _synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    kernels.sort(key=lambda e: e.time_range.start)
    return [(e.name, e.time_range.elapsed_us()) for e in kernels]


_DEPTHWISE_KERNEL = re.compile(r"depthwise|dwconv|grouped|conv2d_c1_k1", re.IGNORECASE)  # c1_k1: one filter per channel


def _kernel_groups(kernels: list[tuple[str, float]]) -> list[tuple[int, bool]]:
    """(first kernel index, depthwise?) of each tensor-core launch group; cuDNN runs a depthwise convolution as
    two adjacent depthwise kernels (a short one, then the main one), which form one group."""
    groups: list[tuple[int, bool]] = []
    for index, (name, _) in enumerate(kernels):
        if kernel_family(name) not in ANCHOR_FAMILIES:
            continue
        depthwise = bool(_DEPTHWISE_KERNEL.search(name))
        if depthwise and groups and groups[-1][1] and kernel_family(kernels[index - 1][0]) in ANCHOR_FAMILIES:
            continue  # the second kernel of the same depthwise convolution
        groups.append((index, depthwise))
    return groups


def align(layer_kinds: list[bool], group_kinds: list[bool]) -> list[tuple[int, int]]:
    """Order-preserving alignment of layers to kernel groups (both given as depthwise? flags) that matches as many
    pairs of the same kind as possible; unmatched layers ran inside fused (Triton) kernels, unmatched groups are
    extra launches. Returns the matched (layer, group) index pairs."""
    n, m = len(layer_kinds), len(group_kinds)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                cost[i][j] = i + j
                continue
            best = min(cost[i - 1][j], cost[i][j - 1]) + 1
            if layer_kinds[i - 1] == group_kinds[j - 1]:
                best = min(best, cost[i - 1][j - 1])
            cost[i][j] = best
    pairs, i, j = [], n, m
    while i > 0 and j > 0:  # among equal alignments, an extra launch follows its layer's (split-K, epilogues)
        if cost[i][j] == cost[i][j - 1] + 1:
            j -= 1
        elif layer_kinds[i - 1] == group_kinds[j - 1] and cost[i][j] == cost[i - 1][j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        else:
            i -= 1
    return pairs[::-1]


def _region_point(name: str, covered: list[LayerCount], region_kernels: list[tuple[str, float]]) -> Point:
    return Point(
        name=name,
        op_class=covered[0].op_class if covered else "other",
        flops=sum(layer.flops for layer in covered),
        other_flops=sum(layer.other_flops for layer in covered),
        bytes=sum(layer.bytes_fused for layer in covered),
        time_ms=sum(us for _, us in region_kernels) / 1e3,
        layers=[layer.name for layer in covered],
        kernels=sorted({kernel for kernel, _ in region_kernels}),
    )


def region_points(counts: CountResult, kernels: list[tuple[str, float]]) -> tuple[list[Point], list[str], list[str]]:
    """Fused regions of a compiled run: returns (points, each layer's region name, notes).

    Layers with tensor-core FLOPs are aligned, in order and by kind (depthwise or not), with the tensor-core kernel
    groups; each matched pair starts a region that runs until the next matched pair, on both sequences.
    """
    layers = counts.layers
    anchors = [i for i, layer in enumerate(layers) if layer.flops > 0]
    groups = _kernel_groups(kernels)
    is_depthwise = [layers[i].op_class == OpClass.DEPTHWISE_CONV.value for i in anchors]
    pairs = align(is_depthwise, [depthwise for _, depthwise in groups])
    if not pairs:
        note = f"no tensor-core kernel could be matched to the {len(anchors)} layers with FLOPs: regions by family"
        return family_points(counts, kernels), [""] * len(layers), [note]
    layer_starts = [0] + [anchors[a] for a, _ in pairs] + [len(layers)]
    kernel_starts = [0] + [groups[g][0] for _, g in pairs] + [len(kernels)]
    points, region_of = [], [""] * len(layers)
    for k in range(len(layer_starts) - 1):
        (l0, l1), (k0, k1) = layer_starts[k : k + 2], kernel_starts[k : k + 2]
        if l0 == l1 and k0 == k1:
            continue  # an empty prologue
        name = layers[l0].name if k > 0 else f"(before {layers[l1].name if l1 < len(layers) else 'end'})"
        region_of[l0:l1] = [name] * (l1 - l0)
        points.append(_region_point(name, layers[l0:l1], kernels[k0:k1]))
    notes = []
    if len(pairs) < len(anchors) or len(pairs) < len(groups):
        notes.append(
            f"{len(anchors) - len(pairs)} of {len(anchors)} layers with FLOPs ran inside fused kernels and "
            f"{len(groups) - len(pairs)} of {len(groups)} tensor-core kernel groups matched no layer: "
            "both are counted in the region before them"
        )
    return points, region_of, notes


def family_points(counts: CountResult, kernels: list[tuple[str, float]]) -> list[Point]:
    """Fallback: one point for the tensor-core kernels (all layers with FLOPs), one for everything else."""
    anchors = [layer for layer in counts.layers if layer.flops > 0]
    others = [layer for layer in counts.layers if layer.flops == 0]
    anchor_us = sum(us for name, us in kernels if kernel_family(name) in ANCHOR_FAMILIES)
    other_us = sum(us for name, us in kernels if kernel_family(name) not in ANCHOR_FAMILIES)
    groups = [("tensor-core kernels", "linear", anchors, anchor_us), ("other kernels", "elementwise", others, other_us)]
    return [
        Point(
            name=name,
            op_class=op_class,
            flops=sum(layer.flops for layer in group),
            other_flops=sum(layer.other_flops for layer in group),
            bytes=sum(layer.bytes_fused for layer in group),
            time_ms=us / 1e3,
            layers=[layer.name for layer in group],
            kernels=sorted({k for k, _ in kernels if (kernel_family(k) in ANCHOR_FAMILIES) == (op_class == "linear")}),
        )
        for name, op_class, group, us in groups
        if group or us
    ]
