"""Per-layer latency tables: every distinct layer of a search space, timed alone once per GPU, batch and precision.

Like the lookup tables of FBNet and once-for-all: a network's latency is estimated as the sum of its layers'
latencies (``utilscope.nas.table_predictor`` adds a learned correction for what the sum misses). Each layer is timed on
the ``graph`` backend, as the networks are: repeated calls captured into one CUDA graph
(``predict.calibrate.time_module_ms``, as calibration times its layers), so the replay's own launch cost is spread
over them and the entry is the layer's time inside a network.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.files import LATENCY_TABLE, check_output_file, write_json
from utilscope.limits import check_batches
from utilscope.measure.environment import device_label, environment, software_label
from utilscope.measure.precision import check_precision, parse_precision
from utilscope.measure.settings import CudnnSettings
from utilscope.nas.file_formats import TABLE_FORMAT, check_table, read_table
from utilscope.nas.sampler import load_jsonl
from utilscope.nas.space import Arch, Layer, SearchSpace
from utilscope.nas.spaces import get_space
from utilscope.predict.calibrate import time_module_ms
from utilscope.survey.ray_cluster import HeadWatch


@dataclass
class LatencyTable:
    space: str
    device: str  # the GPU's name, e.g. "NVIDIA H200"
    software: str
    precision: str
    cudnn_benchmark: bool = True
    entries: dict[str, dict[int, float]] = field(default_factory=dict)  # layer key -> batch -> milliseconds

    @property
    def cudnn(self) -> CudnnSettings:
        """The cuDNN settings its layers were timed with (tables record autotuning on or off)."""
        return CudnnSettings(benchmark=self.cudnn_benchmark)

    def describe(self) -> str:
        tuning = "" if self.cudnn_benchmark else ", cudnn.benchmark off"
        return f"{self.space} on {self.device} in {self.precision}{tuning}"

    def latency_ms(self, layer_key: str, batch: int) -> float:
        try:
            return self.entries[layer_key][batch]
        except KeyError:
            raise UsageError(
                f"the latency table of {self.describe()} has no entry for layer {layer_key} at batch "
                f"{batch}: measure it with `utilscope nas table`"
            ) from None

    def batches(self) -> set[int]:
        return {batch for per_batch in self.entries.values() for batch in per_batch}

    def to_dict(self) -> dict:
        entries = {key: {str(b): ms for b, ms in sorted(per.items())} for key, per in sorted(self.entries.items())}
        return {
            "format": TABLE_FORMAT,
            "space": self.space,
            "device": self.device,
            "software": self.software,
            "precision": self.precision,
            "cudnn_benchmark": self.cudnn_benchmark,
            "entries": entries,
        }

    @classmethod
    def from_dict(cls, data: dict, source: str = "the table") -> LatencyTable:
        check_table(data, source)
        entries = {key: {int(b): float(ms) for b, ms in per.items()} for key, per in data["entries"].items()}
        return cls(data["space"], data["device"], data["software"], data["precision"], data["cudnn_benchmark"], entries)

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LatencyTable:
        return cls.from_dict(read_table(path), str(path))


def load_tables(paths: list[str | Path], space: str | None = None) -> LatencyTable:
    """One table from several files of the same space (``space`` when given) and configuration (e.g. one per batch
    size, timed side by side on two GPUs); a layer timed in two files at the same batch size keeps the later file's
    entry."""
    tables = [LatencyTable.load(path) for path in paths]
    merged = tables[0]
    if space is not None and merged.space != space:
        raise UsageError(f"{paths[0]} is a {merged.space} latency table, not {space}")
    for path, table in zip(paths[1:], tables[1:], strict=True):
        if _configuration(table) != _configuration(merged):
            raise UsageError(f"{path} is a table for {table.describe()}, not {merged.describe()}")
        for key, per_batch in table.entries.items():
            merged.entries.setdefault(key, {}).update(per_batch)
    return merged


def _configuration(table: LatencyTable) -> tuple:
    return table.space, table.device, table.precision, table.cudnn_benchmark


def distinct_layers(space: SearchSpace, archs: Iterable[Arch]) -> list[Layer]:
    """The distinct layers of the space's covering architectures and of ``archs``, in first-seen order."""
    seen: dict[str, Layer] = {}
    for arch in [*space.covering_archs(), *archs]:
        for layer in space.layers(arch):
            seen.setdefault(layer.key, layer)
    return list(seen.values())


def time_layer_ms(
    space: SearchSpace, layer: Layer, batch: int, device: torch.device, precision, cudnn: CudnnSettings
) -> float:
    """Median milliseconds of one call of the layer at ``batch`` (``predict.calibrate.time_module_ms``)."""
    module = space.build_layer(layer).to(device=device, dtype=precision.dtype).eval()
    module = module.to(memory_format=torch.channels_last)
    shape = (batch, layer.in_channels, layer.in_size, layer.in_size)
    x = torch.randn(shape, device=device).to(precision.dtype).contiguous(memory_format=torch.channels_last)
    return time_module_ms(module, [x], device, precision, cudnn)


def open_table(
    space_name: str,
    precision: str = "fp16",
    device: str | None = None,
    cudnn_benchmark: bool = True,
    existing: LatencyTable | None = None,
) -> LatencyTable:
    """A new table for this space, device and configuration, or ``existing`` when it matches them (resume)."""
    space = get_space(space_name)
    dev = hardware.resolve_device(device)
    prec = check_precision(parse_precision(precision), dev)
    cudnn = CudnnSettings(benchmark=cudnn_benchmark)
    env = environment(dev, prec.value, "graph", True, cudnn)
    software = software_label(env["torch"], env["cudnn"], env["driver"], cudnn)
    table = LatencyTable(space.name, device_label(env), software, prec.value, cudnn_benchmark)
    if existing is None:
        return table
    if _configuration(existing) != _configuration(table):
        raise UsageError(f"the existing table is for {existing.describe()}, not {table.describe()}")
    return existing


def fill_table(
    table: LatencyTable,
    archs: Iterable[Arch],
    batches: list[int],
    device: str | None = None,
    on_layer: Callable[[int, int], None] | None = None,
) -> LatencyTable:
    """Time every distinct layer of ``archs`` (and of the space's covering set) at each batch size that the table
    lacks; ``on_layer(done, total)`` after each."""
    space = get_space(table.space)
    dev = hardware.resolve_device(device)
    prec = parse_precision(table.precision)
    todo = [
        (layer, b)
        for layer in distinct_layers(space, archs)
        for b in batches
        if b not in table.entries.get(layer.key, {})
    ]
    for done, (layer, batch) in enumerate(todo, start=1):
        latency_ms = time_layer_ms(space, layer, batch, dev, prec, table.cudnn)
        table.entries.setdefault(layer.key, {})[batch] = latency_ms
        if on_layer is not None:
            on_layer(done, len(todo))
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return table


SAVE_EVERY = 25  # layers timed between saves of a table being filled


def build_table(
    out: str | Path,
    space: str,
    batches: list[int],
    arch_files: Iterable[str | Path] = (),
    precision: str = "fp16",
    device: str | None = None,
    cudnn_benchmark: bool = True,
    on_layer: Callable[[int, int], None] | None = None,
    executor=None,
) -> LatencyTable:
    """Fill the table at ``out`` (resumed when it exists and matches the configuration) with every distinct layer
    of the space's covering set and of ``arch_files``, saving it every ``SAVE_EVERY`` layers and at the end, so an
    interrupted run keeps what it timed. ``on_layer(done, total)`` after each layer. The batch sizes and ``out``
    are checked before anything is timed. With a ``RayExecutor`` the layers are timed by Ray tasks on one GPU type
    of the cluster (or its CPUs), ``LAYERS_PER_TASK`` a task, and the table is written here."""
    batches = check_batches(batches)
    check_output_file(out, LATENCY_TABLE)
    archs = [arch for path in arch_files for arch in load_jsonl(path, space)]
    existing = LatencyTable.load(out) if Path(out).exists() else None
    if executor is not None and executor.name == "ray":
        return _build_on_ray(
            out, executor, (space, precision, device, cudnn_benchmark), existing, archs, batches, on_layer
        )
    table = open_table(space, precision, device, cudnn_benchmark, existing)

    def progress(done: int, total: int) -> None:
        if done % SAVE_EVERY == 0:
            table.save(out)
        if on_layer is not None:
            on_layer(done, total)

    fill_table(table, archs, batches, device, progress)
    table.save(out)
    return table


LAYERS_PER_TASK = 50


def todo_layers(table: LatencyTable, archs: Iterable[Arch], batches: list[int]) -> list[tuple[Layer, int]]:
    """The (layer, batch) pairs of ``archs`` and the space's covering set that the table lacks."""
    space = get_space(table.space)
    return [
        (layer, b)
        for layer in distinct_layers(space, archs)
        for b in batches
        if b not in table.entries.get(layer.key, {})
    ]


def _time_on_node(settings: tuple, todo: list[tuple[Layer, int]]):
    """A Ray task: the node's table configuration, then (key, batch, ms) of each of its layers as it is timed."""
    space_name, precision, device, cudnn_benchmark = settings
    table = open_table(space_name, precision, device, cudnn_benchmark)
    yield _configuration(table), table.software
    space, dev, prec = get_space(space_name), hardware.resolve_device(device), parse_precision(precision)
    for layer, batch in todo:
        yield layer.key, batch, time_layer_ms(space, layer, batch, dev, prec, table.cudnn)


def _build_on_ray(
    out, executor, settings: tuple, existing: LatencyTable | None, archs: list[Arch], batches: list[int], on_layer
) -> LatencyTable:
    """``build_table`` with the layers timed by Ray tasks; the table's configuration is the nodes'."""
    ray = executor.connect()
    _, options = executor.task_options(settings[2])
    task = ray.remote(_time_on_node).options(num_returns="streaming", max_retries=executor.max_retries, **options)
    configuration, software = ray.get(next(task.remote(settings, [])))  # a probe: the configuration, no layer
    table = existing or LatencyTable(configuration[0], configuration[1], software, configuration[2], configuration[3])
    if _configuration(table) != configuration:
        raise UsageError(f"the existing table is for {table.describe()}, not the cluster's {configuration}")
    todo = todo_layers(table, archs, batches)
    chunks = [todo[i : i + LAYERS_PER_TASK] for i in range(0, len(todo), LAYERS_PER_TASK)]
    pending, done = {task.remote(settings, chunk): None for chunk in chunks}, 0
    watch = HeadWatch(ray.get_runtime_context().gcs_address)
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=watch.every_s)
            watch.check()  # a lost head: ClusterLost, the layers timed so far saved below
            for generator in ready:
                try:
                    item = ray.get(next(generator))
                except StopIteration:
                    del pending[generator]
                    continue
                if len(item) == 2:  # the task's configuration: the same GPU type, so the same table
                    if item[0] != configuration:
                        raise UsageError(
                            f"a node timed layers in another configuration: {item[0]}, not {configuration}"
                        )
                    continue
                key, batch, latency_ms = item
                table.entries.setdefault(key, {})[batch] = latency_ms
                done += 1
                if done % SAVE_EVERY == 0:
                    table.save(out)
                if on_layer is not None:
                    on_layer(done, len(todo))
    finally:
        table.save(out)
    return table
