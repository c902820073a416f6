"""What attribution produces: measured time per layer (or per fused region) beside the layer's counted work.

A *point* is anything with work and a measured time: a layer for the eager and graph backends (one row per
layer of the counting engine, unfused bytes), a fused region for compiled backends (consecutive layers that
became one group of kernels, fused bytes). The roofline, the attainable-utilization bounds and the diagnosis all
read points.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from utilscope.counting.counter import LayerCount
from utilscope.hardware.utilization import achieved_tflops, utilization
from utilscope.models.sources import IMAGE_CHANNELS


def _counted(name: str) -> property:
    return property(lambda self: getattr(self.count, name), doc=f"``count.{name}``")


@dataclass
class LayerTime:
    """One layer of the counting engine with the device time its kernels took, per inference.

    Its counted work reads through to the count (``layer.flops`` is ``layer.count.flops``), so the roofline, the
    attainable bounds and the diagnosis read layers and points alike.
    """

    count: LayerCount
    time_ms: float | None  # None: the layer's kernels are accounted for in its fused region
    kernel_count: int = 0  # kernels launched per inference
    kernels: list[str] = field(default_factory=list)  # distinct kernel names
    region: str | None = None  # compiled backends: the fused region this layer became part of

    name = _counted("name")
    type = _counted("type")
    op_class = _counted("op_class")
    flops = _counted("flops")
    other_flops = _counted("other_flops")
    bytes = _counted("bytes")  # unfused minimum traffic
    bytes_fused = _counted("bytes_fused")  # with elementwise/norm ops fused into their producers
    params = _counted("params")
    input_shapes = _counted("input_shapes")
    output_shapes = _counted("output_shapes")

    def to_dict(self) -> dict:
        """One flat record: the count's fields, then the measurement's (a layer of ``utilscope layers --json``)."""
        return {
            **asdict(self.count),
            "time_ms": self.time_ms,
            "kernel_count": self.kernel_count,
            "kernels": list(self.kernels),
            "region": self.region,
        }

    @classmethod
    def from_dict(cls, record: dict) -> LayerTime:
        """The layer of a ``to_dict`` record. Records saved before they held the count's ``weight_bytes``, ``ops``
        and ``unsupported`` read as None (not recorded), {} and {}."""
        counted = {name: record[name] for name in _COUNT_FIELDS if name in record}
        counted.setdefault("weight_bytes", None)
        measured = {name: record[name] for name in _MEASURED_FIELDS if name in record}
        return cls(LayerCount(**counted), **measured)


_COUNT_FIELDS = tuple(f.name for f in fields(LayerCount))
_MEASURED_FIELDS = ("time_ms", "kernel_count", "kernels", "region")


@dataclass
class Point:
    """A unit of work with a measured time: a layer (eager, graph) or a fused region (compiled backends).

    Not a ``LayerCount``: a region's work is the sum over the layers it covers (its ``bytes`` are their fused
    bytes), and it has no single type, shapes or params.
    """

    name: str
    op_class: str
    flops: int
    other_flops: int
    bytes: int
    time_ms: float
    layers: list[str] = field(default_factory=list)  # the layers it covers (a region covers several)
    kernels: list[str] = field(default_factory=list)

    @property
    def intensity(self) -> float:
        """Tensor-core FLOPs per byte (the roofline's x for compute-heavy layers)."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def achieved_tflops(self) -> float:
        return achieved_tflops(self.flops, self.time_ms) if self.time_ms else 0.0


@dataclass(frozen=True)
class Roofs:
    """The ceilings a roofline is drawn against: tensor-core and vector (CUDA-core) FLOP/s, memory bandwidth."""

    tensor_tflops: float  # peak of the precision's math unit (fp16 tensor for fp16, ...)
    vector_tflops: float  # non-tensor arithmetic (elementwise, norms): the fp32 CUDA-core peak
    bandwidth_gbs: float
    label: str  # "datasheet: NVIDIA H200 SXM", "measured ceilings"

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte above which the tensor roof, not memory, limits: peak / bandwidth."""
        return self.tensor_tflops * 1e12 / (self.bandwidth_gbs * 1e9)


@dataclass
class Attribution:
    """Per-layer (and per-region) device time of one model, backend, precision and batch size."""

    model: str
    device_name: str
    device_type: str  # cuda | cpu
    backend: str
    precision: str
    batch: int
    resolution: int
    layers: list[LayerTime]
    points: list[Point]  # layers (eager, graph) or fused regions (compile, inference)
    kernel_time_ms: float  # all device (kernel) time per inference; on a CPU the time of all ops
    attributed_ms: float  # the part mapped to layers/regions
    end_to_end_ms: float  # measured latency of the backend (graph replay where it has one)
    flops: int  # network total per inference (all samples of the batch)
    peak_tflops: float | None  # datasheet peak of the precision's unit (utilization's denominator)
    roofs: Roofs | None  # datasheet roofs (bounds never beaten)
    ceiling_roofs: Roofs | None  # measured ceilings
    sm_count: int | None
    notes: list[str] = field(default_factory=list)
    kernel_sequence: list[tuple[str, float]] = field(default_factory=list)  # compiled runs: (name, us), as profiled
    profiled_ms: float | None = None  # device time per inference as profiled, before reconciling (None: not recorded)
    time_scale: float = 1.0  # factor every per-layer/region time was scaled by to fit the end-to-end time (reconcile)
    idle_measurable: bool = True  # False when the profiled device time exceeded the end-to-end time
    input_channels: int = IMAGE_CHANNELS  # the input is batch x this x resolution x resolution (a saved record from
    # before the field: RGB images, the only input fed then)

    @property
    def idle_share(self) -> float | None:
        """Share of the end-to-end time with no kernel (CPU: no op) running: launch overhead, gaps, host work.
        None when not measurable: the profiled device time exceeded the end-to-end time (the notes say by how much).
        """
        if not self.end_to_end_ms:
            return 0.0
        if not self.idle_measurable or self.kernel_time_ms > self.end_to_end_ms:
            return None
        return 1.0 - self.kernel_time_ms / self.end_to_end_ms

    @property
    def measured_utilization(self) -> float | None:
        if not self.peak_tflops or not self.end_to_end_ms:
            return None
        return utilization(achieved_tflops(self.flops, self.end_to_end_ms), self.peak_tflops)

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "layers": [layer.to_dict() for layer in self.layers],
            "idle_share": self.idle_share,
            "measured_utilization": self.measured_utilization,
        }


def attribution_from_dict(doc: dict) -> Attribution:
    """Rebuild an Attribution from ``Attribution.to_dict()`` output (e.g. a saved ``utilscope layers --json``)."""
    names = {f for f in Attribution.__dataclass_fields__}
    values = {key: doc[key] for key in names if key in doc}
    values["layers"] = [LayerTime.from_dict(layer) for layer in doc["layers"]]
    values["points"] = [Point(**point) for point in doc["points"]]
    values["roofs"] = Roofs(**doc["roofs"]) if doc.get("roofs") else None
    values["ceiling_roofs"] = Roofs(**doc["ceiling_roofs"]) if doc.get("ceiling_roofs") else None
    values["kernel_sequence"] = [tuple(kernel) for kernel in doc.get("kernel_sequence", [])]
    return Attribution(**values)
