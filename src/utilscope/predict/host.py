"""The host side of eager PyTorch: what each call costs the CPU, and how the host and GPU timelines compose.

In eager PyTorch every module call, every aten op's dispatch and every kernel launch costs the host (the CPU
running Python) time, while the GPU runs the kernels launched so far. When the host takes longer to issue a kernel
than the GPU takes to run the ones before it, the GPU waits: at small batches a network runs at the host's pace,
whatever its FLOPs. A *host profile* (``host_calibrate``) holds the host's microseconds per call kind, measured on
one machine (its CPU and torch recorded); ``host_ms`` turns a traced network into the host milliseconds by which
each of its kernels is issued, and ``eager_timing`` composes the two timelines:

- *latency* (one forward timed alone, CUDA events or a synchronize around it): kernel i starts when it is issued
  and the kernel before it is done, ``start_i = max(issued_i, end_{i-1})``; the forward ends when the last kernel
  ends and the host has finished its own work, plus the synchronize.
- *throughput* (forwards back to back, as ``profile`` and ``survey`` time them, no synchronize between them): the
  host issues the next forward while the GPU runs this one, so a forward takes the longer of the two, its host
  time or its device time: its *bound*.

A call's *kind* is its aten op's (``counting.formulas.Kind``), ``module`` for the Python call of an ``nn.Module``
(its leaves and the containers that call them), ``forward`` for the synchronize that ends a timed forward. A 3x3
grouped conv adds a *split* kind (``split_kind``): cuDNN runs some of them as a kernel per group or more (on the H100,
2 channels a group at 8-64 groups: one kernel a group), each kernel beyond the first a launch of the host's; the
host profile's table of the kernels cuDNN ran for such convs (``HostProfile.conv_kernels``) prices them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from utilscope.counting.classify import OpClass, event_class
from utilscope.counting.formulas import Kind
from utilscope.errors import UsageError
from utilscope.files import HOST_FILE, read_json, write_json

HOST_FORMAT = "utilscope-host-profile/1"
MODULE, FORWARD, OTHER = "module", "forward", "other"
CALL_KINDS = (MODULE, FORWARD, OTHER, *(kind.value for kind in Kind))
SPEED_RANGE = (0.2, 5.0)  # a host's speed over the calibration host's: beyond it, not a CPU running PyTorch
SPLIT = "conv_split"  # a 3x3 grouped conv's kernels beyond its first: the kind "conv_split:WIDTH:GROUPS:SIZE"


@dataclass(frozen=True)
class HostProfile:
    """A host's microseconds per call kind (``CALL_KINDS``), where they were measured, the host speed assumed (1:
    the calibration host's; an anchor fits another), and the composition scale: how much longer the host took
    over whole forwards of its calibration networks (``host_chains``) than the sum of their calls timed one kind at
    a time (``chains``: each network's row; a profile without them: 1). ``conv_kernels``: the kernels cuDNN ran a
    call of 3x3 grouped convs on the device (rows of ``group_width``, ``groups``, ``size`` and ``kernels``, batch 1),
    where they came from (``kernels_source``), and the host's microseconds a kernel beyond a call's first
    (``split_kernel_us``); a profile without them prices every conv as one kernel."""

    cpu: str  # the calibration host's CPU model
    torch: str  # the torch version the calls were timed with
    device: str  # the device the launches went to ("cpu": the ops ran on the host itself)
    call_us: dict[str, float]
    speed: float = 1.0
    path: str = field(default="", compare=False)
    scale: float = 1.0
    chains: tuple[dict, ...] = ()
    conv_kernels: tuple[dict, ...] = ()
    split_kernel_us: float = 0.0
    kernels_source: str = ""

    def __post_init__(self) -> None:
        missing = [kind for kind in CALL_KINDS if kind not in self.call_us]
        if missing:
            raise UsageError(f"{self.path or 'host profile'}: no time for the call kinds {', '.join(missing)}")
        check_speed(self.speed)

    def call_ms(self, kind: str) -> float:
        """One call of ``kind`` in milliseconds at the host's speed, inside a forward (the composition scale; the
        synchronize that ends a forward, ``forward``, is timed as it runs; a split kind: its extra kernels)."""
        scale = 1.0 if kind == FORWARD else self.scale
        if kind.startswith(SPLIT):
            width, groups, size = map(int, kind.split(":")[1:])
            return (self.kernels_a_call(width, groups, size) - 1) * self.split_kernel_us * scale / 1e3 / self.speed
        return self.call_us[kind] * scale / 1e3 / self.speed

    def kernels_a_call(self, group_width: int, groups: int, size: int) -> int:
        """The kernels cuDNN runs for a 3x3 conv of ``groups`` groups of ``group_width`` channels on ``size`` x
        ``size`` images, by ``conv_kernels``' row of that group width nearest in log2 of groups and size: one if
        that row ran one, else that row's kernels a group times ``groups``; one where no row has that width."""
        rows = [row for row in self.conv_kernels if row["group_width"] == group_width]
        if not rows:
            return 1
        near = min(rows, key=lambda row: math.log2(row["groups"] / groups) ** 2 + math.log2(row["size"] / size) ** 2)
        return 1 if near["kernels"] <= 1 else max(1, round(near["kernels"] / near["groups"] * groups))

    def calls_ms(self, counts: dict[str, int]) -> float:
        """The milliseconds of calls counted by kind (``call_counts``) at the host's speed."""
        return sum(n * self.call_ms(kind) for kind, n in counts.items())

    def at_speed(self, speed: float) -> HostProfile:
        """The same host profile at another speed (``check_speed``)."""
        return replace(self, speed=check_speed(speed))

    def describe(self) -> str:
        """One line: the host assumed, whether its speed is the calibration host's, its composition scale, and
        whether its grouped convs are priced by the kernels cuDNN ran them in (``kernels_source`` says where)."""
        speed = "its speed" if self.speed == 1.0 else f"{self.speed:.2f}x its speed (fitted to the anchors)"
        composed = f", its calls x{self.scale:.2f} in a forward" if self.scale != 1.0 else ""
        split = f", grouped convs by their kernels ({len(self.conv_kernels)} counted)" if self.conv_kernels else ""
        return (
            f"host: {self.cpu}, torch {self.torch}, as timed launching to the {self.device}, at {speed}{composed}"
            f"{split}"
        )

    def save(self, path: str | Path) -> Path:
        data = asdict(self)
        data.pop("path")
        return write_json(path, {"format": HOST_FORMAT, **data})


def check_speed(speed: float) -> float:
    """``speed`` if it is a host speed a CPU running PyTorch can have (``SPEED_RANGE``); UsageError otherwise."""
    low, high = SPEED_RANGE
    if not low <= speed <= high:
        raise UsageError(
            f"host speed {speed:.3g}x the calibration host's is outside {low}-{high}x: no CPU runs PyTorch's "
            "eager calls that much faster or slower (an anchor in another condition, or the GPU's own bound?)"
        )
    return speed


def load_host(path: str | Path) -> HostProfile:
    """The host profile at ``path``; a one-line UsageError for another file or a damaged one."""
    data = read_json(path, HOST_FILE)
    if not isinstance(data, dict) or data.get("format") != HOST_FORMAT:
        raise UsageError(f"{path} is not a host profile ({HOST_FORMAT}) written by `utilscope calibrate --host`")
    try:
        return HostProfile(
            data["cpu"],
            data["torch"],
            data["device"],
            dict(data["call_us"]),
            data.get("speed", 1.0),
            str(path),
            scale=float(data.get("scale", 1.0)),
            chains=tuple(dict(row) for row in data.get("chains", ())),
            conv_kernels=tuple(_kernel_row(row) for row in data.get("conv_kernels", ())),
            split_kernel_us=float(data.get("split_kernel_us", 0.0)),
            kernels_source=str(data.get("kernels_source", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path} is a damaged host profile ({exc})") from None


def _kernel_row(row: dict) -> dict:
    """A ``conv_kernels`` row with its four numbers as ints."""
    return {name: int(row[name]) for name in ("group_width", "groups", "size", "kernels")}


def split_kind(event) -> str | None:
    """The split kind of a 3x3 grouped conv (``counting.classify``'s: 1 < groups < its input's channels),
    ``conv_split:WIDTH:GROUPS:SIZE``, priced as its kernels beyond the first (``HostProfile.call_ms``); None for any
    other event."""
    if event_class(event.kind, event.call) is not OpClass.GROUPED_CONV:
        return None
    x, weight, groups = event.call.args[0], event.call.args[1], int(event.call.arg(8, "groups", 1))
    if tuple(int(side) for side in weight[2:]) != (3, 3):
        return None
    return f"{SPLIT}:{int(x[1]) // groups}:{groups}:{int(x[-1])}"


def layer_calls(recorded) -> list[list[str]]:
    """Each traced layer's host calls by kind: ``module`` for a layer that is an ``nn.Module`` (not a functional op
    of a forward, typed ``aten.*``), and its ops' kinds, a 3x3 grouped conv's split kind after it (``split_kind``). A
    tensor creation inside a layer that runs another op is that op's output buffer, allocated within its call, and
    not a call of its own."""
    calls: list[list[str]] = [[] if slot.type.startswith("aten.") else [MODULE] for slot in recorded.layers]
    ops: list[list[str]] = [[] for _ in recorded.layers]
    for event in recorded.events:
        ops[event.layer].append(event.kind.value if event.kind is not None else OTHER)
        if (split := split_kind(event)) is not None:
            ops[event.layer].append(split)
    for layer, kinds in enumerate(ops):
        working = [kind for kind in kinds if kind not in (Kind.CREATION.value, Kind.VIEW.value)]
        calls[layer] += kinds if not working else [k for k in kinds if k != Kind.CREATION.value]
    return calls


def container_calls(recorded) -> int:
    """The module calls above the leaves: every module whose name is a proper prefix of a module layer's name (the
    blocks and stages that call them), and the network itself."""
    prefixes = {""}
    for slot in recorded.layers:
        if slot.type.startswith("aten."):
            continue
        parts = slot.name.split("#")[0].split(".")
        prefixes.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return len(prefixes)


def call_counts(recorded) -> dict[str, int]:
    """A traced network's host calls by kind, in no order: its layers' (``layer_calls``) and its containers'
    (``container_calls``, module calls). ``HostProfile.calls_ms`` of them is ``host_timeline``'s whole host work."""
    counts = Counter(kind for kinds in layer_calls(recorded) for kind in kinds)
    counts[MODULE] += container_calls(recorded)
    return dict(counts)


def host_ms(host: HostProfile, recorded) -> tuple[np.ndarray, float]:
    """Each traced layer's host milliseconds at the host's speed, and the containers' (``container_calls``)."""
    layer_ms = np.array([sum(map(host.call_ms, kinds)) for kinds in layer_calls(recorded)], dtype=float)
    return layer_ms, container_calls(recorded) * host.call_ms(MODULE)


def host_timeline(host: HostProfile, recorded, rows_layers) -> tuple[np.ndarray, float]:
    """A traced network's (or piece's) host side: when each of its device rows is issued (``issued_ms``;
    ``rows_layers``: each row's layer indices) and the host's whole work, in milliseconds."""
    layer_ms, containers_ms = host_ms(host, recorded)
    return issued_ms(rows_layers, layer_ms, containers_ms), float(layer_ms.sum()) + containers_ms


def issued_ms(rows_layers, layer_ms: np.ndarray, containers_ms: float) -> np.ndarray:
    """The host milliseconds by which each device row's kernel is issued: the host work of every layer up to and
    including the row's last one (``rows_layers``: each row's layer indices), the containers' calls spread evenly
    over the layers."""
    if not len(layer_ms):
        return np.zeros(len(rows_layers))
    cumulative = np.cumsum(layer_ms + containers_ms / len(layer_ms))
    return np.array([cumulative[max(layers)] for layers in rows_layers], dtype=float)


@dataclass(frozen=True)
class EagerTiming:
    """One eager forward on the host and the GPU (the module's docstring)."""

    latency_ms: float  # one forward timed alone
    per_forward_ms: float  # forwards back to back
    host_ms: float  # the host's work of one forward
    bound: str  # "host" when the host's work is the longer, else "device"


def eager_timing(issued: np.ndarray, device_ms: np.ndarray, host_total_ms: float, forward_ms: float) -> EagerTiming:
    """The two timelines of one forward: kernel i (``device_ms``, its gap included) starts at the later of its
    issue (``issued``) and the end of kernel i-1 (``last_kernel_end_ms``); the forward ends when both the GPU and
    the host (``host_total_ms``) are done, plus ``forward_ms``, the synchronize."""
    device_total = float(device_ms.sum())
    latency = max(last_kernel_end_ms(issued, device_ms), host_total_ms) + forward_ms
    per_forward = max(device_total, host_total_ms)  # back to back, no synchronize between forwards
    bound = "host" if host_total_ms > device_total else "device"
    return EagerTiming(latency, per_forward, host_total_ms, bound)


def last_kernel_end_ms(issued: np.ndarray, device_ms: np.ndarray) -> float:
    """When the last of kernels issued at ``issued`` and taking ``device_ms`` ends, each starting at the later of
    its issue and the end of the kernel before it: in closed form ``max_i(issued_i + sum_{k>=i} device_k)``; 0 for
    no kernel."""
    if not len(device_ms):
        return 0.0
    return float(np.max(issued + np.cumsum(device_ms[::-1])[::-1]))
