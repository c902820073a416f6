"""Executors: where a survey's chunks of groups run. Both run the same worker subprocess per chunk
(``runner.run_chunk``) and hand every message to the driver's ``Sink``, the one writer of the store.

``LocalExecutor``  worker subprocesses on this machine, ``jobs`` at a time, each on a GPU of its own when there
                   are several.
``RayExecutor``    each chunk a Ray task asking for one GPU (or one CPU) on a cluster, streaming the worker's rows
                   back as they are measured; a task lost with its node is retried by Ray; one GPU type (or each,
                   ``gpu_types="all"``) is a target of its own, probed for its configuration.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from utilscope import hardware
from utilscope.errors import SurveyIncomplete, UsageError
from utilscope.survey.claims import Lease, claim, holding
from utilscope.survey.plan import Group, SurveyGrid, SurveyPlan, Target, grid_configuration, local_target
from utilscope.survey.ray_cluster import (
    ACCELERATOR_PREFIX,
    ClusterLost,
    HeadWatch,
    check_address,
    check_executor,
    import_ray,
    quiet_handled_errors,
    start_or_join,
)
from utilscope.survey.runner import (
    FAILURE,
    ROW,
    RunOptions,
    Sink,
    SurveyInterrupted,
    SurveyResult,
    Workers,
    cell_of,
    cell_of_row,
    chunk_groups,
    failure_rows,
    outcome,
    run_chunk,
    stored_tally,
)
from utilscope.survey.store import Store

PLACEMENT = "utilscope-placement"  # a Ray task's first message: where it runs
TYPE_SHARE = 0.001  # of a GPU type's resource a task asks for: it only pins the task to that type


class LocalExecutor:
    """Worker subprocesses on this machine."""

    name = "local"

    def targets(self, grid: SurveyGrid) -> list[Target]:
        return [local_target(grid)]

    def check(self, plans: list[SurveyPlan], options: RunOptions) -> None:
        gpus = _local_gpus(plans)
        if gpus and options.jobs > gpus:
            raise UsageError(
                f"--jobs {options.jobs} with {gpus} GPU(s): workers sharing a GPU would disturb each other's timings"
            )

    def run(self, plans: list[SurveyPlan], options: RunOptions, sink: Sink) -> None:
        """Every chunk of every plan on ``options.jobs`` threads; their messages reach ``sink`` in this thread."""
        gpus = _local_gpus(plans)
        if gpus:
            hardware.get_ceilings(hardware.resolve_device(plans[0].grid.device))  # measured once, cached
        units = [(plan, chunk) for plan in plans for chunk in chunk_groups(plan.groups, options.per_worker)]
        free_gpus: queue.Queue[int | None] = queue.Queue()
        for index in range(options.jobs):
            free_gpus.put(index if gpus > 1 else None)
        messages, workers, done = queue.Queue(), Workers(), object()

        def task(plan: SurveyPlan, chunk: list[Group]) -> None:
            gpu = free_gpus.get()
            try:
                env = {} if gpu is None else {"CUDA_VISIBLE_DEVICES": str(gpu)}
                device = plan.grid.device if gpu is None else "cuda:0"
                for message in run_chunk(chunk, plan, options, device, workers, env):
                    messages.put(message)
            finally:
                free_gpus.put(gpu)
                messages.put(done)

        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            futures = [pool.submit(task, plan, chunk) for plan, chunk in units]
            try:
                _drain(messages, done, len(units), sink)
            except KeyboardInterrupt:
                workers.stop()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            for future in futures:
                future.result()  # a thread's own error surfaces here


def _local_gpus(plans: list[SurveyPlan]) -> int:
    device = hardware.resolve_device(plans[0].grid.device) if plans else torch.device("cpu")
    return torch.cuda.device_count() if device.type == "cuda" else 0


def _drain(messages: queue.Queue, done: object, units: int, sink: Sink) -> None:
    finished = 0
    while finished < units:
        message = messages.get()
        if message is done:
            finished += 1
        else:
            sink.take(*message)


# --- Ray ---------------------------------------------------------------------------------------------------------


def _probe(grid: SurveyGrid) -> tuple:
    """On a node: the configuration it measures the grid in, and the grid's precisions there."""
    return grid_configuration(grid)


def _chunk_task(chunk: list[Group], plan: SurveyPlan, options: RunOptions, device: str | None):
    """A Ray task: where it runs (with the resources Ray gave it), then the worker's messages as they come."""
    import ray

    context = ray.get_runtime_context()
    yield (
        PLACEMENT,
        {
            "node": context.get_node_id(),
            "pid": os.getpid(),
            "target": plan.target.label if plan.target else None,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "resources": context.get_assigned_resources(),
        },
    )
    yield from run_chunk(chunk, plan, options, device)


@dataclass
class _Chunk:
    """Groups one Ray task measures, the cells whose rows reached the driver (``told``) and the tasks tried."""

    plan: SurveyPlan
    groups: list[Group]
    told: set = field(default_factory=set)
    attempts: int = 0

    def left(self) -> list[Group]:
        """The groups' cells no row has come for yet."""
        groups = [g.only(b for b in g.batches if cell_of(g, b) not in self.told) for g in self.groups]
        return [group for group in groups if group.batches]


class RayExecutor:
    """Each chunk a Ray task. ``address``: None or ``local`` (a private Ray started here for the run), ``auto`` (the
    cluster Ray finds) or a head's HOST:PORT (``ray_cluster``). ``gpu_types``: None (one GPU type, the first the
    cluster has), ``"all"``, or comma-separated types ("A100,H100"): each is a target of its own, so one store holds
    the grid per GPU type. ``accelerator``: what a task asks for, "gpu" or "cpu" (default: CPU tasks for a
    ``--device cpu`` grid, else GPU tasks). A task lost with its worker or node is not retried by Ray (a retried
    streaming task is replayed from its start, and the driver would miss rows); the driver submits a new task for
    exactly the cells no row came for, up to ``max_retries`` times, then stores them as error rows."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        gpu_types: str | None = None,
        accelerator: str | None = None,
        max_retries: int = 3,
    ):
        if accelerator not in (None, "gpu", "cpu"):
            raise UsageError(f"a Ray task asks for a gpu or a cpu, not {accelerator!r}")
        self.address, self.gpu_types, self.accelerator = check_address(address), gpu_types, accelerator
        self.max_retries = max_retries
        self.placements: list[dict] = []  # where each task ran (node, CUDA_VISIBLE_DEVICES, resources, target)
        self.joined: str | None = None  # what ``connect`` joined, in words (None: Ray was started by the caller)

    def connect(self):
        ray = import_ray()
        if not ray.is_initialized():
            self.joined = start_or_join(ray, self.address)
        quiet_handled_errors()  # a Ray the caller started prints the worker deaths this executor handles too
        return ray

    def _uses_gpus(self, ray, device: str | None) -> bool:
        if self.accelerator is not None:
            return self.accelerator == "gpu"
        if device is not None:
            return not device.startswith("cpu")
        return ray.cluster_resources().get("GPU", 0) > 0

    def targets(self, grid: SurveyGrid) -> list[Target]:
        """One target per GPU type asked for (or the CPUs), each probed on its nodes for its configuration."""
        ray = self.connect()
        probe = ray.remote(_probe)
        if not self._uses_gpus(ray, grid.device):  # a CPU task asks for as many CPUs as it runs threads
            most = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=0)
            if (grid.threads or 1) > most:
                raise UsageError(
                    f"--threads {grid.threads}: no node of the Ray cluster has that many CPUs (the most: {most:g})"
                )
            return [Target("cpu", *ray.get(probe.options(num_cpus=grid.threads or 1).remote(grid)))]
        if ray.cluster_resources().get("GPU", 0) < 1:
            raise UsageError("the Ray cluster has no GPU: give --device cpu for a CPU survey")
        targets = []
        for gpu_type in self._chosen_types(ray):
            resources = _pin(gpu_type)
            config, precisions = ray.get(probe.options(num_gpus=1, resources=resources).remote(grid))
            targets.append(Target(gpu_type, config, precisions, tuple(resources.items())))
        return targets

    def _chosen_types(self, ray) -> list[str]:
        present = sorted(
            name.removeprefix(ACCELERATOR_PREFIX)
            for name in ray.cluster_resources()
            if name.startswith(ACCELERATOR_PREFIX)
        )
        if not present:
            return ["gpu"]  # GPUs without a type Ray knows: one target, any GPU
        if self.gpu_types is None:
            return present[:1]
        if self.gpu_types == "all":
            return present
        asked = [t.strip() for t in self.gpu_types.split(",") if t.strip()]
        unknown = [t for t in asked if t not in present]
        if unknown or not asked:
            raise UsageError(f"GPU types {unknown or asked} are not in the Ray cluster; it has: {', '.join(present)}")
        return asked

    def task_options(self, device: str | None) -> tuple[str, dict]:
        """(the target's label, the options of a task asking for one device of ONE kind): the CPUs for a ``cpu``
        device, else one GPU of one type (a latency table is of one GPU)."""
        ray = self.connect()
        if not self._uses_gpus(ray, device):
            return "cpu", {"num_cpus": 1}
        types = self._chosen_types(ray)
        if len(types) != 1:
            raise UsageError(f"this runs on one GPU type; the cluster has {', '.join(types)}: give --gpu-types TYPE")
        return types[0], {"num_gpus": 1, "resources": _pin(types[0])}

    def check(self, plans: list[SurveyPlan], options: RunOptions) -> None:
        """Nothing to check on the driver: Ray places one task per GPU."""

    def run(self, plans: list[SurveyPlan], options: RunOptions, sink: Sink) -> None:
        ray = self.connect()
        watch = HeadWatch(ray.get_runtime_context().gcs_address)
        pending: dict = {}
        for plan in plans:
            for groups in chunk_groups(plan.groups, options.per_worker):
                chunk = _Chunk(plan, groups)
                pending[self._submit(ray, chunk, options)] = chunk
        try:
            self._stream(ray, pending, sink, options, watch)
        except (KeyboardInterrupt, ClusterLost):
            for generator in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(generator, force=True)
            raise

    def _submit(self, ray, chunk: _Chunk, options: RunOptions):
        """A task for the chunk's cells that no row came for."""
        chunk.attempts += 1
        plan = chunk.plan
        gpu = plan.target is not None and plan.target.label != "cpu"
        resources = dict(plan.target.resources) if plan.target else {}
        device = {"num_gpus": 1} if gpu else {"num_cpus": plan.config.threads}  # the threads its cells are keyed with
        task = ray.remote(_chunk_task).options(num_returns="streaming", max_retries=0, resources=resources, **device)
        return task.remote(chunk.left(), plan, options, plan.grid.device)

    def _stream(self, ray, pending: dict, sink: Sink, options: RunOptions, watch: HeadWatch) -> None:
        """Every task's messages into ``sink`` as they come; a task lost before it told every cell is submitted
        again for the cells left, then (after ``max_retries``) they are stored as errors."""
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=watch.every_s)
            watch.check()
            for generator in ready:
                chunk = pending[generator]
                try:
                    tag, payload = ray.get(next(generator))
                except StopIteration:
                    del pending[generator]
                    if chunk.left():  # a task that ended without telling its cells (never expected)
                        self._retry(ray, pending, chunk, sink, options, RuntimeError("the task ended early"))
                    continue
                except ray.exceptions.RayError as exc:
                    del pending[generator]
                    watch.confirm()  # a task lost with the head is not submitted again
                    self._retry(ray, pending, chunk, sink, options, exc)
                    continue
                if tag == PLACEMENT:
                    self.placements.append(payload)
                    continue
                if tag == ROW:
                    chunk.told.add(cell_of_row(payload))
                sink.take(tag, payload)

    def _retry(self, ray, pending: dict, chunk: _Chunk, sink: Sink, options: RunOptions, exc: Exception) -> None:
        if not chunk.left():
            return
        if chunk.attempts <= self.max_retries:
            pending[self._submit(ray, chunk, options)] = chunk
        else:
            _fail_chunk(chunk, exc, sink)


def _pin(gpu_type: str) -> dict:
    """The resources that pin a task to nodes of ``gpu_type`` (none for GPUs of no type Ray knows)."""
    return {f"{ACCELERATOR_PREFIX}{gpu_type}": TYPE_SHARE} if gpu_type != "gpu" else {}


def _fail_chunk(chunk: _Chunk, exc: Exception, sink: Sink) -> None:
    """Error rows for the cells of a chunk whose tasks all failed, but the ones a row came for."""
    reason = f"error: Ray task failed: {' '.join(f'{type(exc).__name__}: {exc}'.split())[:300]}"
    for group in chunk.left():
        for row in failure_rows(group, chunk.plan, reason, 0.0):
            sink.take(ROW, row)
        sink.take(
            FAILURE, [f"{group.model} {group.precision} {group.backend} batch {b}: {reason}" for b in group.batches]
        )


def executor_for(name: str, ray_address: str | None = None, gpu_types: str | None = None, device: str | None = None):
    """The executor a command line names for work on ``device``, its options checked (``check_executor``) before
    Ray is imported."""
    check_executor(name, ray_address, gpu_types, device)
    if name == "local":
        return LocalExecutor()
    executor = RayExecutor(ray_address, gpu_types)
    import_ray()
    return executor


# --- the driver ---------------------------------------------------------------------------------------------------


def run_survey(
    plan: SurveyPlan,
    options: RunOptions,
    on_cells_done: Callable[[int], None] | None = None,
    lease: Lease | None = None,
    executor=None,
) -> SurveyResult:
    """Run the plan's groups, ``options.per_worker`` groups per worker process, on ``executor`` (default: local
    subprocesses, ``options.jobs`` at a time, one GPU each when there are several). Only the cells claimed in the
    store are measured (``lease``, from ``claims.claim``; claimed here when not given): cells another live run
    holds are skipped. An interrupt (Ctrl-C) stops every worker and raises ``SurveyInterrupted``: the cells stored
    stay, the ones in flight are not stored."""
    return run_plans([plan], options, on_cells_done, [lease] if lease else None, executor)


def run_plans(
    plans: list[SurveyPlan],
    options: RunOptions,
    on_cells_done: Callable[[int], None] | None = None,
    leases: list[Lease] | None = None,
    executor=None,
) -> SurveyResult:
    """``run_survey`` for several plans at once (one per GPU type of a cluster), in one executor run."""
    executor = executor or LocalExecutor()
    executor.check(plans, options)
    start_s = time.perf_counter()
    leases = leases or [claim(plan, options.db) for plan in plans]
    held_plans = [lease.plan for lease in leases]
    cells = sum(plan.cells for plan in held_plans)
    with Store(options.db) as store, contextlib.ExitStack() as held:
        for lease in leases:
            held.enter_context(holding(lease, options.db))
        sink = Sink(store, on_cells_done)
        try:
            executor.run(held_plans, options, sink)
        except KeyboardInterrupt:
            stored = len(outcome(held_plans, options.db)[0])
            raise SurveyInterrupted(stored, cells - stored) from None
        except ClusterLost as exc:
            raise SurveyIncomplete(str(exc), stored_tally(outcome(held_plans, options.db)[0], cells)) from None
    stored, missing = outcome(held_plans, options.db)
    taken = sum(lease.taken for lease in leases)
    return SurveyResult(cells, time.perf_counter() - start_s, stored, sink.failures, taken, missing)
