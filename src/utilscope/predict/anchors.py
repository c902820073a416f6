"""Anchors: a user's own measurements of other models on the target GPU, in the prediction's condition, fit that GPU's
two physical parameters, nothing per model: its sustained SM clock and the share of its memory bandwidth a
streaming op reaches (``predict.sustained`` gives their datasheet values). The fit is a maximum a posteriori
estimate in log space: each anchor's log error over ``ANCHOR_SD`` squared, plus each parameter's log distance from
its datasheet value over ``PRIOR_SD``, so that one anchor moves both parameters by how much its network's time
depends on each, and several anchors separate them. An anchor that the two parameters cannot bring within
``CONTRADICTION`` of its measurement is reported as contradicting the others.

On ``eager`` with a host profile (``predict.host``), an anchor that the datasheet GPU and the calibration host predict
host-bound fits the host's speed instead (over the calibration host's, in ``host.SPEED_RANGE``): the speed whose
predictions are nearest the host-bound anchors in log, the GPU fitted to the others first. A host anchor measured
faster than the fitted GPU runs its kernels contradicts the device anchors (a warning); a speed at the range's edge
is a one-line error.

Of ``CONSENSUS`` anchors or more, one that the fit to the others predicts more than ``CONTRADICTION`` off its
measurement contradicts them before it moves anything: the model's error on its network, which no parameter of the
GPU expresses, would otherwise pull every prediction after it. The worst such anchor is left out of the fit and
reported, and the rest are checked again while ``CONSENSUS`` remain. (Of one or two anchors none is left out: two
that disagree cannot say which one is wrong.)

    SPEC@BATCH=SAMPLES_PER_S         timm:resnet50@256=3100   (the last '@' separates the batch)
    CSV: model,batch,samples_per_s[,precision,backend,res,gpu]
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field, replace

import numpy as np

from utilscope.errors import UsageError
from utilscope.files import ANCHOR_FILE, read_text
from utilscope.models import zoo
from utilscope.predict.features import Gpu
from utilscope.predict.host import SPEED_RANGE
from utilscope.predict.options import check_anchor_numbers, split_anchor

ANCHOR_SD = 0.10  # the log error of one anchor: its measurement and the model's error on its network
PRIOR_SD = 0.15  # how far (in log) a datasheet parameter is from the GPU's own, before any anchor
CLOCK_RANGE = (0.4, 1.4)  # the fitted clock, over the datasheet-derived one
EFFICIENCY_RANGE = (0.3, 1.0)  # the fitted share of the datasheet bandwidth
CONTRADICTION = 0.15  # an anchor still further off (a factor 1.15 either way) after the fit contradicts the others
CONSENSUS = 3  # anchors needed before one that the fit to the others predicts beyond CONTRADICTION is left out
EAGER_MIN_BATCH = 64  # eager below this batch may run at the host's pace (Python, launches): without a host model
CSV_COLUMNS = ("model", "batch", "samples_per_s")
CSV_OPTIONAL = ("precision", "backend", "res", "gpu")


@dataclass(frozen=True)
class Anchor:
    """One measurement of ``model`` at ``batch`` on the target GPU: its samples/s, and the condition it says it was
    measured in (None: the prediction's)."""

    model: str
    batch: int
    samples_per_s: float
    resolution: int | None = None
    precision: str | None = None
    backend: str | None = None
    gpu: str | None = None

    def __post_init__(self) -> None:
        check_anchor_numbers(self.model, self.batch, self.samples_per_s)
        zoo.check_model(zoo.parse_spec(self.model))

    @property
    def label(self) -> str:
        return f"{self.model}@{self.batch}={self.samples_per_s:g}"


def parse_anchor(text: str) -> Anchor:
    """``SPEC@BATCH=SAMPLES_PER_S`` as an Anchor (``options.split_anchor``); UsageError saying the form when it is
    not of it."""
    return Anchor(*split_anchor(text))


def read_anchors(path: str) -> list[Anchor]:
    """The anchors of a CSV file (``CSV_COLUMNS``, and ``CSV_OPTIONAL``); UsageError naming a missing or unknown
    column, or the line of a bad value."""
    rows = list(csv.DictReader(io.StringIO(read_text(path, ANCHOR_FILE)), skipinitialspace=True))  # "a, b" too
    columns = set(rows[0]) if rows else set()
    missing = [c for c in CSV_COLUMNS if c not in columns]
    unknown = sorted(columns - set(CSV_COLUMNS) - set(CSV_OPTIONAL))
    if missing or unknown or not rows:
        what = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}" if unknown else "no rows"
        raise UsageError(f"{path}: {what}; expected the {ANCHOR_FILE}")
    anchors = []
    for line, row in enumerate(rows, start=2):
        try:
            anchors.append(
                Anchor(
                    row["model"].strip(),
                    int(row["batch"]),
                    float(row["samples_per_s"]),
                    int(row["res"]) if row.get("res") else None,
                    row.get("precision") or None,
                    row.get("backend") or None,
                    row.get("gpu") or None,
                )
            )
        except (ValueError, TypeError, AttributeError) as exc:
            raise UsageError(f"{path}, line {line}: {' '.join(str(exc).split()) or 'a bad value'}") from None
    return anchors


def check_anchors(anchors: list[Anchor], gpu_key: str, precision: str, backend: str) -> None:
    """UsageError for an anchor measured on another GPU or in another precision or backend than the prediction's."""
    from utilscope.hardware.specs import lookup_gpu

    for anchor in anchors:
        if anchor.gpu is not None and lookup_gpu(anchor.gpu).key != gpu_key:
            raise UsageError(f"anchor {anchor.label} was measured on {anchor.gpu}, not on --gpu {gpu_key}")
        for name, asked in (("precision", precision), ("backend", backend)):
            said = getattr(anchor, name)
            if said is not None and said != asked:
                raise UsageError(f"anchor {anchor.label} was measured with {name} {said}; the prediction is in {asked}")


@dataclass
class AnchorFit:
    """The fitted GPU (``target``) beside its datasheet-derived one (``before``), and per anchor its samples/s as
    measured, as predicted before the fit and after it."""

    before: Gpu
    target: Gpu
    anchors: list[Anchor]
    predicted_before: list[float] = field(default_factory=list)
    predicted_after: list[float] = field(default_factory=list)
    left_out: dict[int, float] = field(default_factory=dict)  # anchor index -> its samples/s by the others' fit
    backend: str = ""
    host_speed: float | None = None  # eager: the host's speed over the calibration host's, fitted to host anchors
    host_anchors: tuple[int, ...] = ()  # the anchors the host speed was fitted to (host-bound ones)
    host_modelled: bool = False  # eager with a host profile
    # host-bound anchors measured faster than the fitted GPU runs their kernels alone: index -> that GPU's samples/s
    faster_than_gpu: dict[int, float] = field(default_factory=dict)

    @property
    def device_anchors(self) -> list[int]:
        return [i for i in range(len(self.anchors)) if i not in self.host_anchors]

    @property
    def fitted(self) -> list[Anchor]:
        """The anchors the GPU's parameters were fitted to (all but ``left_out`` and the host's)."""
        return [self.anchors[i] for i in self.device_anchors if i not in self.left_out]

    @property
    def contradicting(self) -> list[str]:
        """The fitted anchors the fit leaves beyond ``CONTRADICTION`` of their measurement."""
        return [
            f"{anchor.label} (predicted {after:,.0f} after the fit)"
            for i, (anchor, after) in enumerate(zip(self.anchors, self.predicted_after, strict=True))
            if i not in self.left_out and off_by(after, anchor.samples_per_s) > 1 + CONTRADICTION
        ]

    def describe(self) -> list[str]:
        """What moved and to what; every anchor left out or contradicting, and every eager one below
        ``EAGER_MIN_BATCH``, as a warning."""
        clock = f"sustained clock {self.before.clock_hz / 1e6:.0f} -> {self.target.clock_hz / 1e6:.0f} MHz"
        memory = f"memory efficiency {self.before.memory_efficiency:.2f} -> {self.target.memory_efficiency:.2f}"
        device = self.device_anchors
        count = f"{len(self.fitted)} of {len(device)}" if self.left_out else f"{len(device)}"
        lines = [f"{self.target.key}: fitted to {count} anchor(s): {clock}, {memory}"] if device else []
        if self.host_speed is not None:
            lines.append(
                f"host speed 1.00 -> {self.host_speed:.2f}x the calibration host's, fitted to "
                f"{len(self.host_anchors)} anchor(s) that run at the host's pace"
            )
        for anchor, before, after in zip(self.anchors, self.predicted_before, self.predicted_after, strict=True):
            lines.append(f"  {anchor.label}: predicted {before:,.0f} before the fit, {after:,.0f} after")
        lines += [
            f"warning: anchor {self.anchors[i].label} contradicts the others: their fit predicts {others:,.0f}, a "
            f"factor of {off_by(others, self.anchors[i].samples_per_s):.2f} off, more than the GPU's clock and memory "
            "explain (the model's error on that network, or a measurement in another condition); left out of the fit"
            for i, others in self.left_out.items()
        ]
        lines += [
            f"warning: anchor {text} contradicts the others beyond the clock and memory" for text in self.contradicting
        ]
        lines += [
            f"warning: anchor {anchor.label} was measured in eager at batch {anchor.batch}: below batch "
            f"{EAGER_MIN_BATCH} eager may run at the host's pace (Python, kernel launches), which predict does not "
            f"model; an anchor at batch {EAGER_MIN_BATCH} or more measures the GPU"
            for anchor in self.anchors
            if self.backend == "eager" and anchor.batch < EAGER_MIN_BATCH and not self.host_modelled
        ]
        lines += [
            f"warning: anchor {self.anchors[i].label} contradicts the device anchors: the GPU they fit runs its "
            f"kernels alone at {gpu:,.0f} samples/s, slower than measured; left out of the host's fit"
            for i, gpu in self.faster_than_gpu.items()
        ]
        lines += [
            f"warning: anchor {anchor.label} was measured on graph at batch 1: a replay's time there is its kernels' "
            "floors and gaps more than the GPU's clock and memory, which it fits poorly; an anchor at a batch that "
            "fills the GPU measures them"
            for anchor in self.anchors
            if self.backend == "graph" and anchor.batch == 1
        ]
        return lines


def off_by(predicted: float, measured: float) -> float:
    """How far a prediction is off its measurement, as a factor of 1 or more either way (``CONTRADICTION``'s
    measure: a log distance)."""
    return math.exp(abs(math.log(predicted / measured)))


def scaled(gpu: Gpu, clock_scale: float, efficiency: float, note: str = "") -> Gpu:
    """``gpu`` with its sustained clock scaled and its memory efficiency set."""
    return replace(
        gpu, clock_hz=gpu.clock_hz * clock_scale, memory_efficiency=efficiency, clock_note=note or gpu.clock_note
    )


def fit_anchors(predictor, anchors: list[Anchor], target: Gpu, precision: str, backend: str, channels_last: bool):
    """The AnchorFit of ``target`` (and on eager the host's speed) to the anchors (the module's docstring); each
    anchor's network is counted once. UsageError for an anchor whose FLOP/s would exceed the GPU's peak (an absurd
    throughput), or a host speed out of its range."""
    if not anchors:
        raise UsageError("give at least one anchor to fit the GPU to")
    networks = [anchor_network(predictor, anchor, target, precision, channels_last) for anchor in anchors]
    host = predictor.host if backend == "eager" else None

    def samples_per_s(gpu: Gpu, chosen: list[int], speed: float = 1.0) -> np.ndarray:
        timed = replace(predictor, host=host.at_speed(speed)) if host is not None else predictor
        return np.array([anchors[i].batch / forward_ms(timed, networks[i], backend, gpu) * 1e3 for i in chosen])

    host_bound = [i for i in range(len(anchors)) if host is not None and is_host_bound(predictor, networks[i], target)]
    device = [i for i in range(len(anchors)) if i not in host_bound]
    left_out = contradicting_others(samples_per_s, anchors, target, device)
    fitted = fitted_gpu(samples_per_s, anchors, [i for i in device if i not in left_out], target) if device else target
    alone = {
        i: anchors[i].batch / forward_ms(replace(predictor, host=None), networks[i], backend, fitted) * 1e3
        for i in host_bound
    }  # samples/s of the fitted GPU's kernels without the host
    faster = {i: sps for i, sps in alone.items() if anchors[i].samples_per_s > sps * (1 + CONTRADICTION)}
    host_fit = [i for i in host_bound if i not in faster]
    speed = fitted_speed(samples_per_s, anchors, host_fit, fitted) if host_fit else None
    every = list(range(len(anchors)))
    before, after = list(samples_per_s(target, every)), list(samples_per_s(fitted, every, speed or 1.0))
    fit = AnchorFit(target, fitted, list(anchors), before, after, left_out, backend, speed, tuple(host_fit))
    return replace(fit, host_modelled=host is not None, faster_than_gpu=faster)


def forward_ms(predictor, network: tuple, backend: str, gpu: Gpu) -> float:
    """One forward's milliseconds of an anchor's network (``anchor_network``) on ``gpu``: forwards back to back,
    the host's pace on eager with a host profile (``Predictor.eager_timing``), else the GPU's."""
    rows, source_times, recorded = network
    ms, _, latency_ms, _ = predictor.compose(rows, backend, gpu, source_times)
    if backend != "eager" or predictor.host is None:
        return latency_ms
    return predictor.eager_timing(recorded, rows, ms).per_forward_ms


def is_host_bound(predictor, network: tuple, gpu: Gpu) -> bool:
    """Whether the calibration host is predicted slower than ``gpu`` on an anchor's network."""
    rows, source_times, recorded = network
    ms, *_ = predictor.compose(rows, "eager", gpu, source_times)
    return predictor.eager_timing(recorded, rows, ms).bound == "host"


def fitted_speed(samples_per_s, anchors: list[Anchor], chosen: list[int], gpu: Gpu) -> float:
    """The host speed whose predictions on the ``chosen`` anchors are nearest their measurements in log, on the
    fitted ``gpu``; UsageError at the edge of ``SPEED_RANGE`` (no CPU's speed explains them)."""
    from scipy.optimize import minimize_scalar

    measured = np.log([anchors[i].samples_per_s for i in chosen])

    def loss(log_speed: float) -> float:
        errors = np.log(samples_per_s(gpu, chosen, math.exp(log_speed))) - measured
        return float(errors @ errors)

    low, high = np.log(SPEED_RANGE)
    log_speed = minimize_scalar(loss, bounds=(low, high), method="bounded").x
    if min(log_speed - low, high - log_speed) < 0.01:
        labels = ", ".join(anchors[i].label for i in chosen)
        raise UsageError(
            f"anchors {labels} run at the host's pace, and no host speed within {SPEED_RANGE[0]}-{SPEED_RANGE[1]}x "
            "the calibration host's explains them: another condition, or a GPU bound the prediction does not see"
        )
    return math.exp(log_speed)


def contradicting_others(samples_per_s, anchors: list[Anchor], target: Gpu, candidates: list[int]) -> dict[int, float]:
    """The anchors left out of the fit (the module's docstring), each with its samples/s by the fit to the others:
    of the ``candidates``, while ``CONSENSUS`` remain, the one the others' fit predicts worst, when that is beyond
    ``CONTRADICTION``."""
    kept, left_out = list(candidates), {}
    while len(kept) >= CONSENSUS:
        by_others = {
            i: samples_per_s(fitted_gpu(samples_per_s, anchors, [j for j in kept if j != i], target), [i])[0]
            for i in kept
        }
        factor = {i: off_by(by_others[i], anchors[i].samples_per_s) for i in kept}
        worst = max(kept, key=factor.get)
        if factor[worst] <= 1 + CONTRADICTION:
            break
        kept.remove(worst)
        left_out[worst] = float(by_others[worst])
    return left_out


def anchor_network(predictor, anchor: Anchor, target: Gpu, precision: str, channels_last: bool) -> tuple:
    """The anchor's network as ``compose`` takes it (its rows, and their ``source_times``), and its trace (for the
    host's calls); UsageError for a throughput whose FLOP/s exceed the GPU's dense peak."""
    counted, recorded = predictor.count(anchor.model, anchor.batch, anchor.resolution, precision, channels_last)
    flops_per_s = counted.total.flops / anchor.batch * anchor.samples_per_s
    if flops_per_s > target.peak_flops:
        raise UsageError(
            f"anchor {anchor.label}: {flops_per_s / 1e12:,.0f} TFLOP/s, above {target.name}'s dense peak of "
            f"{target.peak_flops / 1e12:,.0f} TFLOP/s: not a measurement of this model at this batch"
        )
    rows = predictor.rows(recorded)
    return rows, predictor.source_times(rows), recorded


def fitted_gpu(samples_per_s, anchors: list[Anchor], chosen: list[int], target: Gpu) -> Gpu:
    """``target`` with the clock and memory efficiency of the MAP fit (the module's docstring) to the ``chosen``
    anchors; ``samples_per_s(gpu, chosen)`` predicts them."""
    from scipy.optimize import minimize

    measured = np.log([anchors[i].samples_per_s for i in chosen])
    base_efficiency = target.memory_efficiency

    def loss(theta: np.ndarray) -> float:
        gpu = scaled(target, math.exp(theta[0]), base_efficiency * math.exp(theta[1]))
        errors = (np.log(samples_per_s(gpu, chosen)) - measured) / ANCHOR_SD
        return float(errors @ errors + (theta @ theta) / PRIOR_SD**2)

    bounds = [np.log(CLOCK_RANGE), np.log(np.array(EFFICIENCY_RANGE) / base_efficiency)]
    theta = minimize(loss, np.zeros(2), method="L-BFGS-B", bounds=bounds).x
    clock_scale, efficiency = math.exp(theta[0]), base_efficiency * math.exp(theta[1])
    note = f"{target.key}: fitted to {len(chosen)} anchor(s): clock {target.clock_hz * clock_scale / 1e6:.0f} MHz"
    return scaled(target, clock_scale, efficiency, f"{note}, memory at {efficiency:.2f} of its bandwidth")
