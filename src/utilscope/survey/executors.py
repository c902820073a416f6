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

import torch

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.survey.claims import Lease, claim, holding
from utilscope.survey.plan import Group, SurveyGrid, SurveyPlan, Target, grid_configuration, local_target
from utilscope.survey.runner import (
    FAILURE,
    ROW,
    RunOptions,
    Sink,
    SurveyInterrupted,
    SurveyResult,
    Workers,
    chunk_groups,
    failure_rows,
    outcome,
    run_chunk,
)
from utilscope.survey.store import Store

PLACEMENT = "utilscope-placement"  # a Ray task's first message: where it runs
ACCELERATOR_PREFIX = "accelerator_type:"  # Ray's resource naming a node's GPU type
TYPE_SHARE = 0.001  # of a GPU type's resource a task asks for: it only pins the task to that type
RAY_EXTRA = "pip install 'utilscope[ray]'"


class LocalExecutor:
    """Worker subprocesses on this machine."""

    name = "local"

    def targets(self, grid: SurveyGrid) -> list[Target]:
        return [local_target(grid)]

    def check(self, plans: list[SurveyPlan], options: RunOptions) -> None:
        gpus = _local_gpus(plans)
        if gpus and options.jobs > gpus:
            raise UsageError(f"--jobs {options.jobs} with {gpus} GPU(s): workers sharing a GPU would disturb each "
                             "other's timings")  # fmt: skip

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


def import_ray():
    """The ``ray`` module; UsageError naming the extra when it is not installed."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray needs Ray: {RAY_EXTRA}") from None
    return ray


def _probe(grid: SurveyGrid) -> tuple:
    """On a node: the configuration it measures the grid in, and the grid's precisions there."""
    return grid_configuration(grid)


def _chunk_task(chunk: list[Group], plan: SurveyPlan, options: RunOptions, device: str | None):
    """A Ray task: where it runs, then the worker's messages as they come."""
    import ray

    context = ray.get_runtime_context()
    yield PLACEMENT, {"node": context.get_node_id(), "pid": os.getpid(), "target": plan.target.label if plan.target
                      else None, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}  # fmt: skip
    yield from run_chunk(chunk, plan, options, device)


class RayExecutor:
    """Each chunk a Ray task. ``address``: a cluster's (``auto``: the one this machine belongs to, else a Ray
    started here for the run). ``gpu_types``: None (one GPU type, the first the cluster has), ``"all"``, or
    comma-separated types ("A100,H100"): each is a target of its own, so one store holds the grid per GPU type.
    ``accelerator``: what a task asks for, "gpu" or "cpu" (default: CPU tasks for a ``--device cpu`` grid, else
    GPU tasks). A task lost with its worker or node is retried up to ``max_retries`` times."""

    name = "ray"

    def __init__(self, address: str = "auto", gpu_types: str | None = None, accelerator: str | None = None,
                 max_retries: int = 3):  # fmt: skip
        if accelerator not in (None, "gpu", "cpu"):
            raise UsageError(f"a Ray task asks for a gpu or a cpu, not {accelerator!r}")
        self.address, self.gpu_types, self.accelerator, self.max_retries = address, gpu_types, accelerator, max_retries
        self.placements: list[dict] = []  # where each task ran (node, CUDA_VISIBLE_DEVICES, target)

    def connect(self):
        ray = import_ray()
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, log_to_driver=False)
            except ConnectionError:
                if self.address != "auto":
                    raise UsageError(f"no Ray cluster answers at {self.address}") from None
                ray.init(log_to_driver=False, include_dashboard=False)  # no cluster: one for this run, here
        return ray

    def _uses_gpus(self, ray, grid: SurveyGrid) -> bool:
        if self.accelerator is not None:
            return self.accelerator == "gpu"
        if grid.device is not None:
            return not grid.device.startswith("cpu")
        return ray.cluster_resources().get("GPU", 0) > 0

    def targets(self, grid: SurveyGrid) -> list[Target]:
        """One target per GPU type asked for (or the CPUs), each probed on its nodes for its configuration."""
        ray = self.connect()
        probe = ray.remote(_probe)
        if not self._uses_gpus(ray, grid):
            return [Target("cpu", *ray.get(probe.options(num_cpus=1).remote(grid)))]
        if ray.cluster_resources().get("GPU", 0) < 1:
            raise UsageError("the Ray cluster has no GPU: give --device cpu for a CPU survey")
        targets = []
        for gpu_type in self._chosen_types(ray):
            resources = {f"{ACCELERATOR_PREFIX}{gpu_type}": TYPE_SHARE} if gpu_type != "gpu" else {}
            config, precisions = ray.get(probe.options(num_gpus=1, resources=resources).remote(grid))
            targets.append(Target(gpu_type, config, precisions, tuple(resources.items())))
        return targets

    def _chosen_types(self, ray) -> list[str]:
        present = sorted(name.removeprefix(ACCELERATOR_PREFIX) for name in ray.cluster_resources()
                         if name.startswith(ACCELERATOR_PREFIX))  # fmt: skip
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
        uses_gpus = self.accelerator == "gpu" if self.accelerator else (
            not device.startswith("cpu") if device else ray.cluster_resources().get("GPU", 0) > 0)  # fmt: skip
        if not uses_gpus:
            return "cpu", {"num_cpus": 1}
        types = self._chosen_types(ray)
        if len(types) != 1:
            raise UsageError(f"this runs on one GPU type; the cluster has {', '.join(types)}: give --gpu-types TYPE")
        resources = {f"{ACCELERATOR_PREFIX}{types[0]}": TYPE_SHARE} if types[0] != "gpu" else {}
        return types[0], {"num_gpus": 1, "resources": resources}

    def check(self, plans: list[SurveyPlan], options: RunOptions) -> None:
        """Nothing to check on the driver: Ray places one task per GPU."""

    def run(self, plans: list[SurveyPlan], options: RunOptions, sink: Sink) -> None:
        ray = self.connect()
        task, pending = ray.remote(_chunk_task), {}
        for plan in plans:
            gpu = plan.target is not None and plan.target.label != "cpu"
            resources = dict(plan.target.resources) if plan.target else {}
            remote = task.options(num_returns="streaming", max_retries=self.max_retries, resources=resources,
                                  **({"num_gpus": 1} if gpu else {"num_cpus": 1}))  # fmt: skip
            for chunk in chunk_groups(plan.groups, options.per_worker):
                pending[remote.remote(chunk, plan, options, plan.grid.device)] = (plan, chunk, set())
        try:
            self._stream(ray, pending, sink)
        except KeyboardInterrupt:
            for generator in pending:
                ray.cancel(generator, force=True)
            raise

    def _stream(self, ray, pending: dict, sink: Sink) -> None:
        """Every task's messages into ``sink`` as they come; a task that fails for good fails its cells left."""
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for generator in ready:
                plan, chunk, told = pending[generator]
                try:
                    tag, payload = ray.get(next(generator))
                except StopIteration:
                    del pending[generator]
                    continue
                except ray.exceptions.RayError as exc:
                    del pending[generator]
                    _fail_chunk(chunk, plan, told, exc, sink)
                    continue
                if tag == PLACEMENT:
                    self.placements.append(payload)
                    continue
                if tag == ROW:
                    told.add((payload["model"], payload["precision"], payload["backend"], payload["batch"]))
                sink.take(tag, payload)


def _fail_chunk(chunk: list[Group], plan: SurveyPlan, told: set, exc: Exception, sink: Sink) -> None:
    """Error rows for the cells of a chunk whose task failed after its retries."""
    reason = f"error: Ray task failed: {' '.join(f'{type(exc).__name__}: {exc}'.split())[:300]}"
    for group in chunk:
        left = group.only(b for b in group.batches if (group.model, group.precision, group.backend, b) not in told)
        if not left.batches:
            continue
        for row in failure_rows(left, plan, reason, 0.0):
            sink.take(ROW, row)
        sink.take(FAILURE, [f"{left.model} {left.precision} {left.backend} batch {b}: {reason}" for b in left.batches])


EXECUTORS = ("local", "ray")


def executor_for(name: str, ray_address: str | None = None, gpu_types: str | None = None):
    """The executor a command line names; Ray's options only with ``ray``."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}; use one of: {', '.join(EXECUTORS)}")
    if name == "local":
        if ray_address is not None or gpu_types is not None:
            raise UsageError("--ray-address and --gpu-types apply to --executor ray")
        return LocalExecutor()
    import_ray()
    return RayExecutor(ray_address or "auto", gpu_types)


# --- the driver ---------------------------------------------------------------------------------------------------


def run_survey(plan: SurveyPlan, options: RunOptions, on_cells_done: Callable[[int], None] | None = None,
               lease: Lease | None = None, executor=None) -> SurveyResult:  # fmt: skip
    """Run the plan's groups, ``options.per_worker`` groups per worker process, on ``executor`` (default: local
    subprocesses, ``options.jobs`` at a time, one GPU each when there are several). Only the cells claimed in the
    store are measured (``lease``, from ``claims.claim``; claimed here when not given): cells another live run
    holds are skipped. An interrupt (Ctrl-C) stops every worker and raises ``SurveyInterrupted``: the cells stored
    stay, the ones in flight are not stored."""
    return run_plans([plan], options, on_cells_done, [lease] if lease else None, executor)


def run_plans(plans: list[SurveyPlan], options: RunOptions, on_cells_done: Callable[[int], None] | None = None,
              leases: list[Lease] | None = None, executor=None) -> SurveyResult:  # fmt: skip
    """``run_survey`` for several plans at once (one per GPU type of a cluster), in one executor run."""
    executor = executor or LocalExecutor()
    executor.check(plans, options)
    start_s = time.perf_counter()
    leases = leases or [claim(plan, options.db) for plan in plans]
    held_plans = [lease.plan for lease in leases]
    with Store(options.db) as store, contextlib.ExitStack() as held:
        for lease in leases:
            held.enter_context(holding(lease, options.db))
        sink = Sink(store, on_cells_done)
        try:
            executor.run(held_plans, options, sink)
        except KeyboardInterrupt:
            stored = len(outcome(held_plans, options.db))
            raise SurveyInterrupted(stored, sum(p.cells for p in held_plans) - stored) from None
    cells, taken = sum(p.cells for p in held_plans), sum(lease.taken for lease in leases)
    return SurveyResult(cells, time.perf_counter() - start_s, outcome(held_plans, options.db), sink.failures, taken)
