"""``advise``: measure, one at a time from the model as given, the changes that could make it use the device better,
then the best combination, and rank them by measured throughput.

Two kinds of change. *Exact rewrites* change the model's graph but not its function: channel padding and
BatchNorm folding, each checked against the original (``rewrites``); one that is not exact is rejected (listed,
never measured or combined). *Deployment choices* change how the same model runs: backend, precision, memory
format and batch size. Every trial is timed ``AdviseRequest.repeats`` times with ``profile``'s harness at one batch
size and reports the median with its range; its utilization is computed on the original model's FLOPs
(``Sweep.work``), so that padding's extra FLOPs cannot inflate it.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from utilscope import hardware
from utilscope.advise.rewrites import EXACT_RTOL, Rewrite, check_exact, check_inputs, exact_rewrites, exactness
from utilscope.errors import UsageError
from utilscope.files import EXPORTED_MODEL, check_output_folder, make_folder
from utilscope.hardware.alignment import channel_multiple
from utilscope.limits import check_batches, check_count, check_multiple, check_seed
from utilscope.measure.backends import get_backend
from utilscope.measure.environment import device_label
from utilscope.measure.precision import math_mode, parse_precision
from utilscope.measure.settings import MeasureRequest
from utilscope.measure.sweep import ProfileRow, Sweep, prepare_module, prepare_sweep, run_sweep
from utilscope.models import zoo
from utilscope.units import now_iso

REPEATS = 3  # timed runs per trial by default: the trial reports their median, minimum and maximum
MIN_GAIN = 1.02  # a change enters the combination when it is at least this much faster (beyond timing noise)
SATURATION = 0.05  # the saturation batch: the smallest within this share of the best throughput
GPU_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CPU_LADDER = (1, 2, 4, 8, 16)
DEPLOYMENT_OPTIONS = ("backend", "precision", "channels_last")  # the request's fields a deployment choice changes


@dataclass
class Trial:
    change: str
    kind: str  # "as given" | "rewrite" | "deployment" | "combination"
    batch: int
    backend: str
    precision: str
    channels_last: bool
    status: str  # ok | oom | error: ... | rejected: ...
    samples_per_s: float | None = None  # the median over the repeats (so are latency_ms and utilization)
    latency_ms: float | None = None
    utilization: float | None = None  # on the original model's FLOPs
    speedup: float | None = None  # median over median of "as given" at the same batch size
    repeats: int = 0  # timed runs that ran (ok): the median is over these
    samples_per_s_min: float | None = None
    samples_per_s_max: float | None = None
    samples_per_s_runs: list[float] = field(default_factory=list)  # each run's, in the order they ran
    exact: bool | None = None  # rewrites: checked; deployment choices: None (the model is unchanged)
    max_abs_diff: float | None = None  # the largest output differences from the original over the check inputs
    max_rel_diff: float | None = None
    detail: str = ""
    changes: dict = field(default_factory=dict)  # the request's fields a deployment choice changed


@dataclass
class Advice:
    model: str
    device: str
    gpu_measurement: bool
    resolution: int
    flops_per_sample: int
    trials: list[Trial]
    batch_ladder: list[Trial]
    saturation_batch: int | None
    best: dict[int, Trial]  # per batch size: the fastest measured configuration
    commands: dict[int, str] = field(default_factory=dict)  # per batch size: the command that reproduces the best
    notes: list[str] = field(default_factory=list)  # changes not tried, and why
    environment: dict = field(default_factory=dict)  # the as-given configuration's (``measure.environment``)
    measured_at: str = ""  # when the run began (``now_iso``: ISO 8601, UTC)
    wall_s: float | None = None  # how long the run took, building and checking the rewrites included
    repeats: int = REPEATS  # timed runs per trial asked for
    exactness: dict = field(default_factory=dict)  # how rewrites were checked: inputs, dtype, tolerance

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "device": self.device,
            "gpu_measurement": self.gpu_measurement,
            "resolution": self.resolution,
            "flops_per_sample": self.flops_per_sample,
            "environment": self.environment,
            "measured_at": self.measured_at,
            "wall_s": self.wall_s,
            "repeats": self.repeats,
            "exactness": self.exactness,
            "trials": [dataclasses.asdict(t) for t in self.trials],
            "batch_ladder": [dataclasses.asdict(t) for t in self.batch_ladder],
            "saturation_batch": self.saturation_batch,
            "best": {str(b): dataclasses.asdict(t) for b, t in self.best.items()},
            "commands": {str(b): c for b, c in self.commands.items()},
            "notes": self.notes,
        }


def _variant(sweep: Sweep, base: nn.Module, **changes) -> Sweep:
    """``sweep`` with ``base`` (fp32) prepared on its device; ``changes``: another backend, precision or memory
    format (the request and sweep re-resolved for them, the original's FLOPs kept)."""
    if not changes:
        module = prepare_module(copy.deepcopy(base), sweep.device, sweep.precision, sweep.request.channels_last)
        return dataclasses.replace(sweep, module=module)
    request = dataclasses.replace(sweep.request, **changes)  # resolved again, not counted or built again
    fresh = prepare_sweep(request, sweep.clock, built=copy.deepcopy(base), counted=sweep.work)
    return dataclasses.replace(fresh, plan=sweep.plan)


def repeated(run_once: Callable[[], ProfileRow], repeats: int) -> list[ProfileRow]:
    """``run_once`` called ``repeats`` times, or until the first row that is not ok (a failure is not repeated)."""
    rows = []
    for _ in range(repeats):
        rows.append(run_once())
        if rows[-1].status != "ok":
            break
    return rows


def median_fields(rows: list[ProfileRow]) -> dict:
    """A trial's measured fields from its repeated rows: throughput, latency and utilization each the median over
    the rows, the throughput's minimum, maximum and every run, and how many ran. Where one did not run, the status
    is its status and no median is given (the runs before it are kept)."""
    ok = [row for row in rows if row.status == "ok"]
    runs = [row.samples_per_s for row in ok]
    fields = {"status": "ok", "repeats": len(ok), "samples_per_s_runs": runs}
    if len(ok) < len(rows) or not ok:
        return {**fields, "status": next(row.status for row in rows if row.status != "ok")}
    return {
        **fields,
        "samples_per_s": statistics.median(runs),
        "samples_per_s_min": min(runs),
        "samples_per_s_max": max(runs),
        "latency_ms": _median([row.latency_ms for row in ok]),
        "utilization": _median([row.utilization for row in ok]),
    }


def _median(values: list[float | None]) -> float | None:
    """The median; None where a value is None (no peak to compute a utilization against)."""
    return None if any(v is None for v in values) else statistics.median(values)


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of one ``advise`` run shares: how many timed runs it takes (``repeats``), the inputs a
    rewrite is checked on (``check_inputs``; the first is the example rewrites trace with) and who sees each trial
    as it lands."""

    repeats: int
    inputs: tuple[torch.Tensor, ...]
    on_trial: Callable[[Trial], None] = lambda trial: None


def trial_in(sweep: Sweep, change: str, kind: str, batch: int, **fields) -> Trial:
    """A trial of ``change`` at ``batch`` in ``sweep``'s configuration (its backend, precision and memory format);
    ``fields``: its status and the rest of ``Trial``'s fields."""
    return Trial(
        change=change,
        kind=kind,
        batch=batch,
        backend=sweep.backend.name,
        precision=sweep.precision.value,
        channels_last=sweep.request.channels_last,
        **fields,
    )


def measure_trial(sweep: Sweep, change: str, kind: str, batch: int, repeats: int, **extra) -> Trial:
    """``sweep`` at ``batch`` timed ``repeats`` times, as one trial (``median_fields``)."""
    rows = repeated(lambda: run_sweep(sweep, [batch])[0], repeats)
    return trial_in(sweep, change, kind, batch, **median_fields(rows), **extra)


def deployment_changes(sweep: Sweep, backends: tuple[str, ...], precisions: tuple[str, ...]) -> list[tuple[str, dict]]:
    """The deployment choices other than the as-given one: each other backend, each other precision, the other
    memory format."""
    request = sweep.request
    changes = [(f"backend {b}", {"backend": b}) for b in backends if b != sweep.backend.name]
    changes += [(f"precision {p}", {"precision": p}) for p in precisions if p != sweep.precision.value]
    layout = "NCHW-contiguous" if request.channels_last else "channels_last"
    changes.append((f"memory format {layout}", {"channels_last": not request.channels_last}))
    return changes


def _rejected(rewrite: Rewrite, sweep: Sweep, batch: int) -> Trial:
    reason = f"rejected: outputs differ by {rewrite.max_rel_diff:.2e} (relative) in fp32, above {EXACT_RTOL:g}"
    return trial_in(
        sweep,
        rewrite.name,
        "rewrite",
        batch,
        status=reason,
        exact=False,
        max_abs_diff=rewrite.max_abs_diff,
        max_rel_diff=rewrite.max_rel_diff,
        detail=rewrite.detail,
    )


def trials_at(
    sweep: Sweep, base: nn.Module, rewrites: list[Rewrite], batch: int, backends, precisions, setup: TrialSetup
) -> list[Trial]:
    """At one batch size: the model as given, each exact rewrite, each deployment choice, then their best
    combination (checked on ``setup.inputs``, the rewrites' check inputs); speed-ups over the first."""
    given = measure_trial(_variant(sweep, base), "as given", "as given", batch, setup.repeats)
    setup.on_trial(given)
    trials = [given]
    for rewrite in rewrites:
        trial = (
            measure_trial(
                _variant(sweep, rewrite.model),
                rewrite.name,
                "rewrite",
                batch,
                setup.repeats,
                exact=True,
                max_abs_diff=rewrite.max_abs_diff,
                max_rel_diff=rewrite.max_rel_diff,
                detail=rewrite.detail,
            )
            if rewrite.exact
            else _rejected(rewrite, sweep, batch)
        )
        setup.on_trial(trial)
        trials.append(trial)
    for name, changes in deployment_changes(sweep, backends, precisions):
        variant = _variant(sweep, base, **changes)
        trial = measure_trial(variant, name, "deployment", batch, setup.repeats, changes=changes)
        setup.on_trial(trial)
        trials.append(trial)
    _set_speedups(trials, given)
    combined = measure_combination(sweep, base, rewrites, trials, batch, setup)
    if combined is not None:
        _set_speedups([combined], given)
        setup.on_trial(combined)
        trials.append(combined)
    return trials


def _set_speedups(trials: list[Trial], given: Trial) -> None:
    for trial in trials:
        if trial.status == "ok" and given.status == "ok":
            trial.speedup = trial.samples_per_s / given.samples_per_s


def _gainful(trials: list[Trial], kind: str, option: str | None = None) -> list[Trial]:
    """The ok trials of ``kind`` (that change the request's ``option``, one of ``DEPLOYMENT_OPTIONS``) at least
    ``MIN_GAIN`` faster than as given, best first."""
    chosen = [
        t
        for t in trials
        if t.kind == kind
        and (option is None or option in t.changes)
        and t.status == "ok"
        and t.speedup is not None
        and t.speedup >= MIN_GAIN
    ]
    return sorted(chosen, key=lambda t: -t.speedup)


def measure_combination(
    sweep: Sweep, base: nn.Module, rewrites: list[Rewrite], trials: list[Trial], batch: int, setup: TrialSetup
) -> Trial | None:
    """Every gainful exact rewrite applied in turn, with the best gainful choice of backend, precision and memory
    format; measured, and checked against the original on ``setup.inputs`` (the rewrites' check inputs) when it
    rewrites. None when fewer than two changes gain (one is its own trial)."""
    chosen_rewrites = [r for r in rewrites if any(t.change == r.name for t in _gainful(trials, "rewrite"))]
    changes, names = {}, [r.name for r in chosen_rewrites]
    for option in DEPLOYMENT_OPTIONS:
        best = _gainful(trials, "deployment", option)
        if best:
            changes[option] = best[0].changes[option]
            names.append(best[0].change)
    if len(names) < 2:
        return None
    model = base
    for rewrite in chosen_rewrites:
        model = rewrite.apply(model, setup.inputs[0])
    abs_diff, rel_diff = check_exact(base, model, setup.inputs) if chosen_rewrites else (None, None)
    if rel_diff is not None and not rel_diff <= EXACT_RTOL:
        reason = f"rejected: outputs differ by {rel_diff:.2e}"
        return trial_in(
            sweep, " + ".join(names), "combination", batch, status=reason, max_abs_diff=abs_diff, max_rel_diff=rel_diff
        )
    return measure_trial(
        _variant(sweep, model, **changes),
        " + ".join(names),
        "combination",
        batch,
        setup.repeats,
        exact=True if chosen_rewrites else None,
        max_abs_diff=abs_diff,
        max_rel_diff=rel_diff,
        changes=changes,
    )


def seeded_model(model: str, resolution: int, seed: int) -> nn.Module:
    """The model built on the CPU in eval mode with its random weights drawn after ``torch.manual_seed(seed)``
    (the global generator left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return zoo.build_model(zoo.parse_spec(model), resolution).eval()


def batch_ladder(
    sweep: Sweep, base: nn.Module, sizes: tuple[int, ...], setup: TrialSetup
) -> tuple[list[Trial], int | None]:
    """The model as given over ``sizes`` (stopping at the first that runs out of memory), and the saturation batch:
    the smallest whose median throughput is within ``SATURATION`` of the best median."""
    variant = _variant(sweep, base)
    trials = []
    for batch in sizes:
        trial = measure_trial(variant, "as given", "batch", batch, setup.repeats)
        setup.on_trial(trial)
        trials.append(trial)
        if trial.status == "oom":
            break
    ok = [t for t in trials if t.status == "ok"]
    if not ok:
        return trials, None
    best = max(t.samples_per_s for t in ok)
    return trials, min(t.batch for t in ok if t.samples_per_s >= (1 - SATURATION) * best)


def reproduce_command(model: str, trial: Trial, resolution: int, export: str | None, exported: str | None) -> str:
    """The ``utilscope profile`` command that measures ``trial`` again. A rewritten model runs from its export:
    ``export`` when it holds this trial's rewrite (``exported``, the best change at the largest batch size), else
    a folder the comment says how to write."""
    note = ""
    if trial.kind in ("rewrite", "combination") and trial.exact:
        if export and trial.change == exported:
            model = f"{export}/model.py:build"
        else:
            model, note = (
                "DIR/model.py:build",
                f"  # DIR from: utilscope advise {model} --export DIR --batch {trial.batch}",
            )
    parts = [
        f"utilscope profile {model}",
        f"--batch {trial.batch}",
        f"--backend {trial.backend}",
        f"--precision {trial.precision}",
        f"--res {resolution}",
    ]
    if not trial.channels_last:
        parts.append("--no-channels-last")
    return " ".join(parts) + note


def device_architecture(device: torch.device) -> str:
    """The spec table's architecture of a CUDA device ("*" for a CPU or an unknown GPU)."""
    spec = hardware.device_spec(device)
    return spec.architecture if spec is not None else "*"


@dataclass(frozen=True)
class AdviseRequest:
    """One ``advise`` run, checked when made (a ``UsageError`` before anything is built): the model and how it runs
    as given (``measure``); the batch sizes compared (None: 1,256 on a GPU, 1,8 on a CPU); the channel multiple to
    pad to (None: the largest the precisions tried want on this GPU, ``hardware.alignment.channel_multiple``); the
    backends and precisions tried (empty: graph and inference, fp16 and bf16 on a GPU; the as-given ones on a CPU);
    the saturation ladder's batch sizes (None: powers of two to 512 on a GPU, to 16 on a CPU; (): no ladder); the
    folder the best rewritten model is exported to (None: no export); the seed the model's weights are drawn with;
    how many times each trial is timed (``repeats``: the median is reported with its range and ranked)."""

    measure: MeasureRequest
    batches: tuple[int, ...] | None = None
    multiple: int | None = None
    backends: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    ladder: tuple[int, ...] | None = None
    export: str | None = None
    seed: int = 0
    repeats: int = REPEATS

    def __post_init__(self) -> None:
        if not isinstance(self.measure, MeasureRequest):
            raise UsageError(f"measure must be a MeasureRequest, got {type(self.measure).__name__}")
        if self.batches is not None:
            object.__setattr__(self, "batches", tuple(check_batches(self.batches)))
        if self.multiple is not None:
            check_multiple(self.multiple)
        for name, check in (("backends", get_backend), ("precisions", parse_precision)):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            for value in getattr(self, name):  # bad names fail before anything is measured
                check(value)
        if self.ladder is not None:
            object.__setattr__(self, "ladder", tuple(check_batches(self.ladder)) if self.ladder else ())
        if self.export is not None:
            object.__setattr__(self, "export", str(check_output_folder(self.export, EXPORTED_MODEL)))
        check_seed(self.seed)
        check_count(self.repeats, "repeats")


def advise(request: AdviseRequest, on_trial: Callable[[Trial], None] | None = None) -> Advice:
    """Measure every change at every batch size, the batch ladder, and the best configuration per batch size
    (``AdviseRequest`` says which, and their defaults); each trial timed ``request.repeats`` times, ranked by its
    median. The model is built with the request's seed (``seeded_model``), so its export holds weights a rerun gets
    again. ``on_trial`` sees each trial as it lands. The advice records the as-given configuration's environment
    (``measure.environment``), when the run began and how long it took."""
    measured_at, start_s = now_iso(), time.perf_counter()
    spec = zoo.parse_spec(request.measure.model)
    for batch in request.batches or ():  # a model file whose batch is fixed: refused before anything is measured
        zoo.check_input(spec, batch, request.measure.resolution)
    sweep = prepare_sweep(request.measure)
    gpu = sweep.device.type == "cuda"
    base = seeded_model(request.measure.model, sweep.resolution, request.seed)
    notes: list[str] = []
    batches, sizes, fixed = batch_plan(request, sweep, notes)
    setup = TrialSetup(
        request.repeats, check_inputs(sweep.resolution, sweep.channels, fixed), on_trial or (lambda trial: None)
    )
    backends = request.backends or (("graph", "inference") if gpu else (sweep.backend.name,))
    precisions = request.precisions or (("fp16", "bf16") if gpu else (sweep.precision.value,))
    multiple = request.multiple or max(channel_multiple(p, device_architecture(sweep.device)) for p in precisions)
    with math_mode(parse_precision("fp32")):
        rewrites = exact_rewrites(base, sweep.work, setup.inputs, multiple, notes)  # the sweep counted the model
    trials = [t for batch in batches for t in trials_at(sweep, base, rewrites, batch, backends, precisions, setup)]
    ladder_trials, saturation = batch_ladder(sweep, base, sizes, setup) if sizes else ([], None)
    best = {}
    for batch in batches:
        ok = [t for t in trials if t.batch == batch and t.status == "ok"]
        if ok:
            best[batch] = max(ok, key=lambda t: t.samples_per_s)  # the median throughput
    exported = best[max(best)].change if best else None
    commands = {
        b: reproduce_command(request.measure.model, t, sweep.resolution, request.export, exported)
        for b, t in best.items()
    }
    advice = Advice(
        request.measure.model,
        device_label(sweep.environment),
        gpu,
        sweep.resolution,
        sweep.work.total.flops,
        trials,
        ladder_trials,
        saturation,
        best,
        commands,
        notes,
        sweep.environment,
        measured_at,
        repeats=request.repeats,
        exactness=exactness(),
    )
    if request.export:
        export_best(advice, rewrites, base, setup.inputs[0], request.export)
    advice.wall_s = time.perf_counter() - start_s
    return advice


def batch_plan(request: AdviseRequest, sweep: Sweep, notes: list[str]) -> tuple[tuple[int, ...], tuple, int | None]:
    """The batch sizes the trials run at, the ladder's, and the model's fixed batch: a model file whose batch is
    fixed runs only at it (the trials' default; ``advise`` refuses another; no ladder, with a note)."""
    gpu = sweep.device.type == "cuda"
    spec = zoo.parse_spec(request.measure.model)
    fixed = zoo.fixed_batch(spec)
    batches = request.batches or ((fixed,) if fixed is not None else ((1, 256) if gpu else (1, 8)))
    sizes = (GPU_LADDER if gpu else CPU_LADDER) if request.ladder is None else request.ladder
    if fixed is not None and sizes:
        notes.append(f"batch ladder: not run (the model file runs only at batch {fixed})")
        sizes = ()
    return tuple(batches), tuple(sizes), fixed


def export_best(advice: Advice, rewrites: list[Rewrite], base: nn.Module, example: torch.Tensor, directory: str):
    """Write the rewritten model of the best configuration at the largest batch size (every exact rewrite that
    gained there, in turn) to ``directory``/model.pt, and ``directory``/model.py whose ``build`` loads it, so that
    ``utilscope profile DIR/model.py:build`` runs it. Nothing gained by a rewrite: the original model."""

    if not advice.best:
        raise UsageError("no configuration was measured, so there is nothing to export")
    batch = max(advice.best)
    names = advice.best[batch].change.split(" + ")
    model = base
    for rewrite in rewrites:
        if rewrite.name in names and rewrite.exact:
            model = rewrite.apply(model, example)
    out = make_folder(directory, EXPORTED_MODEL)
    torch.save(model, out / "model.pt")
    (out / "model.py").write_text(
        f'"""{advice.model} as `utilscope advise` rewrote it ({", ".join(names)}); written by utilscope."""\n\n'
        "from pathlib import Path\n\nimport torch\n\n"
        f"RESOLUTION = {advice.resolution}\n\n\n"
        "def build() -> torch.nn.Module:\n"
        '    return torch.load(Path(__file__).with_name("model.pt"), weights_only=False).eval()\n'
    )
    return out
