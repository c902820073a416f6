"""Predict a CNN's inference latency, throughput and FLOP utilization on a GPU from its device profile, without it.

The network is counted (``counting.count_traced``, the engine ``count`` uses, so every spec ``count`` takes works),
each op that launches work becomes a row (``features.op_row``; the ops inside a squeeze-excite module become one
gate row), the layer models (``predict.layers``) give each row's time, and the network's time is their sum plus
``gap_ms`` per row: the launch gap, fitted on residual chains (which no layer model saw) of the profile's GPU and
backend (``fit_cache.launch_gaps``). On ``eager``, with a host profile of the machine that timed the profile
(``predict.host``), the host's calls and the GPU's kernels run as two timelines: the GPU waits for a host behind
it. Which profile predicts a request is ``predict.selection``'s; fitting a profile's predictor is
``predict.fitting``'s, keeping and reading the fits ``predict.fit_cache``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from utilscope.counting.counter import count_traced, fusion_savings
from utilscope.counting.formulas import Kind
from utilscope.errors import UsageError
from utilscope.hardware.utilization import achieved_tflops, utilization
from utilscope.measure.precision import parse_precision
from utilscope.models.sources import IMAGE_CHANNELS
from utilscope.predict import network_scales
from utilscope.predict.conditions import FUSED_BACKENDS, backend_problem, condition_problem, precision_problem
from utilscope.predict.features import Gpu, bias_add_row, fold_casts, kept_events, layout_copy_row, op_row
from utilscope.predict.host import FORWARD, EagerTiming, HostProfile, eager_timing, host_timeline, last_kernel_end_ms
from utilscope.predict.layers import LayerModels, se_row
from utilscope.predict.transfer import fused_stream_ms, sm_scaled_ms, transfer

FREEZING_BACKENDS = ("inference",)  # inductor's freezing folds batch norms into the convs' weights
FUSED_AWAY = 0.05  # an op left with less of its bytes than this launches no kernel of its own
INDUCTOR_MAX_POINTWISE_CAT_INPUTS = 8  # torch._inductor.config.max_pointwise_cat_inputs, its default


@dataclass
class Prediction:
    model: str
    gpu: str
    batch: int
    precision: str
    backend: str
    resolution: int
    flops: int  # per batch
    latency_ms: float
    samples_per_s: float
    utilization: float
    extrapolated: bool
    gpu_key: str = ""
    bound: str = ""  # of the most predicted time: sm, tensor (fp32: fp32 units), memory, launch (``transfer``), host
    transferred_from: str = ""  # the profile's GPU when the prediction is for another GPU, else ""
    memory_format: str = "channels_last"
    layers: list[dict] = field(default_factory=list)
    sustained_clock_mhz: float = 0.0  # the SM clock assumed (``predict.sustained``)
    clock_estimated: bool = False  # below the boost clock: estimated from the board power
    memory_efficiency: float = 0.0  # the share of the bandwidth a streaming op reaches, as assumed
    gpu_note: str = ""  # one line: the clock and memory efficiency assumed, and why
    validation: str | None = None  # the validation's error on this GPU in this condition (``profiles.validation_of``)
    host: str = ""  # eager: the host assumed (``HostProfile.describe``); "" where no host is modelled
    host_ms: float = 0.0  # eager: the host's work of one forward
    input_channels: int = IMAGE_CHANNELS  # the input is batch x this x resolution x resolution (``zoo.input_channels``)
    measured_ratio: float = 1.0  # measured over predicted where a whole-network measurement served (``measured``)
    measured: str = ""  # that measurement's provenance, in words; "" where none served

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Predictor:
    profile_path: str
    device: str
    precision: str
    backend: str
    gpu: Gpu
    layer_models: LayerModels
    gap_ms: float
    memory_format: str = "channels_last"  # the profile's configs' layout (``DeviceProfile.memory_format``)
    # told before another profile's predictor is fitted for this one (``profile_ms``); given by ``load_predictor``
    on_fit: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    # the layer models of the GPU's channels_last profile, for an NCHW profile's channels_last-fed convs
    # (``profile_ms``; ``fit_cache.channels_last_models``); given by ``load_predictor``, None: none
    channels_last_models: Callable[[], LayerModels | None] | None = field(default=None, repr=False, compare=False)
    # per op category, the scale of its times inside whole networks (``predict.network_scales``), from the file kept
    # beside the profile; given by ``load_predictor``, None: the profile has none
    category_scales: dict[str, float] | None = field(default=None, repr=False, compare=False)
    # the host profile of the machine that timed the profile (``profiles.host_of``), for eager; None: none shipped,
    # and eager is its device time alone
    host: HostProfile | None = field(default=None, repr=False, compare=False)

    def predict(
        self,
        model,
        batch: int,
        resolution: int | None = None,
        backend: str | None = None,
        target: Gpu | None = None,
        precision: str | None = None,
        channels_last: bool = True,
    ) -> Prediction:
        """One network at one batch size. ``model``: any spec ``count`` accepts, or a module. ``backend``
        ``inference`` or ``compile`` (a graph profile only): the fused-execution model (``fused``). ``target``:
        another GPU's datasheet (``transfer``); ``precision``: the profile's, or ``amp`` over an fp16 profile."""
        self.check_condition(precision, backend, channels_last)  # before the count: a bad one costs nothing
        counted, recorded = self.count(model, batch, resolution, precision, channels_last)
        return self.predict_counted(counted, recorded, backend, target=target, precision=precision)

    def predict_on(
        self,
        model,
        batch: int,
        targets: list[Gpu | None],
        resolution: int | None = None,
        backend: str | None = None,
        precision: str | None = None,
        channels_last: bool = True,
    ) -> list[Prediction]:
        """``predict`` on several GPUs (None: the profile's), the network counted (``counted_network``), and its
        ops' times on the profile's GPU predicted, once (``predict_network``)."""
        self.check_condition(precision, backend, channels_last)
        network = self.counted_network(model, batch, resolution, precision, channels_last)
        return self.predict_network(network, targets, backend, precision)

    def counted_network(
        self, model, batch: int, resolution: int | None = None, precision: str | None = None, channels_last: bool = True
    ) -> tuple:
        """``count``'s result and trace, and the trace's ``network_rows``: what ``predict_network`` takes, the same
        for every predictor of this profile (with its network scales or without them)."""
        counted, recorded = self.count(model, batch, resolution, precision, channels_last)
        return counted, recorded, network_rows(recorded, self.gpu)

    def predict_network(
        self, network: tuple, targets: list[Gpu | None], backend: str | None = None, precision: str | None = None
    ) -> list[Prediction]:
        """A ``counted_network`` predicted on several GPUs (None: the profile's), its ops' times on the profile's
        GPU predicted once."""
        counted, recorded, rows = network
        profile_ms = self.source_times(rows)
        return [
            self.predict_counted(counted, recorded, backend, rows, target, precision, profile_ms) for target in targets
        ]

    def count(
        self, model, batch: int, resolution: int | None = None, precision: str | None = None, channels_last: bool = True
    ):
        """``count_traced`` of a network as ``predict_counted`` takes it: in the precision (amp: under autocast's
        casts), channels_last as `profile` runs it unless said otherwise."""
        parsed = self.check_precision(precision)
        return count_traced(
            model,
            batch,
            resolution,
            parsed.count_dtype,
            channels_last=channels_last,
            autocast=parsed.autocast_dtype is not None and self.timed_casts,
        )

    @property
    def timed_casts(self) -> bool:
        """Whether the profile timed autocast's casts and fp32 norms (a profile calibrated under autocast): only
        then are they in a network's rows. An fp16 profile predicts amp by its fp16 kernels: it has no timed
        dtype casts, and its layer models put them, and fp32 norms, far from their times (docs/predict.md)."""
        return parse_precision(self.precision).autocast_dtype is not None

    def check_precision(self, precision: str | None):
        """The precision (None: the profile's) if this profile predicts it: its own, or autocast to its unit."""
        parsed = parse_precision(precision or self.precision)
        problem = precision_problem(self.precision, parsed.value)
        if problem:
            raise UsageError(f"the device profile {self.profile_path} {problem}")
        return parsed

    def rows(self, recorded) -> pd.DataFrame:
        """``network_rows`` of a traced network, on the profile's GPU."""
        return network_rows(recorded, self.gpu)

    def check_condition(self, precision: str | None, backend: str | None, channels_last: bool) -> None:
        """UsageError unless this profile predicts the condition (``condition_problem``)."""
        own = (self.precision, self.memory_format, self.backend)
        asked = (precision or self.precision, backend or self.backend, channels_last)
        problem = condition_problem(*own, *asked)
        if problem:
            raise UsageError(f"the device profile {self.profile_path} {problem}")

    def check_backend(self, backend: str | None) -> str:
        """``backend`` (None: the profile's) if this profile predicts it; UsageError otherwise."""
        backend = backend or self.backend
        problem = backend_problem(self.backend, backend)
        if problem:
            raise UsageError(f"the device profile {self.profile_path} {problem}")
        return backend

    def predict_counted(
        self,
        counted,
        recorded,
        backend: str | None = None,
        rows: pd.DataFrame | None = None,
        target: Gpu | None = None,
        precision: str | None = None,
        profile_ms: tuple | None = None,
    ) -> Prediction:
        """``predict`` of a network already counted (``count_traced``'s result and trace); ``rows``: its
        ``network_rows``, and ``profile_ms``: the layer models' times and reasons of those rows, when the caller
        has them (one trace predicted on several backends or GPUs)."""
        backend = self.check_backend(backend)
        parsed = self.check_precision(precision)
        rows = network_rows(recorded, self.gpu) if rows is None else rows
        target = target or self.gpu
        ms, reasons, latency_ms, bound = self.compose(rows, backend, target, profile_ms)
        flops, batch = counted.total.flops, counted.batch
        per_forward_ms, main_bound = latency_ms, pd.Series(ms).groupby(bound).sum().idxmax() if len(ms) else ""
        eager = self.eager_timing(recorded, rows, ms) if backend == "eager" else None
        if eager is not None:
            latency_ms, per_forward_ms = eager.latency_ms, eager.per_forward_ms
            main_bound = "host" if eager.bound == "host" else main_bound
        return Prediction(
            counted.model,
            target.name,
            batch,
            parsed.value,
            backend,
            counted.resolution,
            flops,
            latency_ms,
            batch / per_forward_ms * 1e3,
            utilization(achieved_tflops(flops, per_forward_ms), target.peak_flops / 1e12),
            any(reasons),
            target.key,
            str(main_bound),
            "" if target == self.gpu else self.device,
            "channels_last" if counted_channels_last(recorded) else "contiguous",
            per_layer(rows, ms, reasons, counted, bound),
            target.clock_hz / 1e6,
            target.clock_hz < target.boost_hz,
            target.memory_efficiency,
            target.clock_note,
            host=self.host.describe() if eager is not None else "",
            host_ms=eager.host_ms if eager is not None else 0.0,
            input_channels=counted.input_channels,
        )

    def eager_timing(self, recorded, rows: pd.DataFrame, ms: np.ndarray) -> EagerTiming | None:
        """One eager forward of a traced network (its ``rows`` and their predicted ``ms`` on the target) on the
        host profile's host and the GPU (``host.eager_timing``); None without a host profile."""
        if self.host is None:
            return None
        issued, host_total_ms = host_timeline(self.host, recorded, rows["layers"] if len(rows) else [])
        return eager_timing(issued, ms + self.gap_ms, host_total_ms, self.host.call_ms(FORWARD))

    def compose(
        self, rows: pd.DataFrame, backend: str | None = None, target: Gpu | None = None, profile_ms: tuple | None = None
    ):
        """Each row's milliseconds, extrapolation reason and bound (``row_times``), and their composition: the sum
        plus ``gap_ms`` per kernel launched."""
        ms, reasons, bound, launched = self.row_times(rows, backend, target, profile_ms)
        return ms, reasons, float(ms.sum() + self.gap_ms * launched.sum()), bound

    def row_times(
        self, rows: pd.DataFrame, backend: str | None = None, target: Gpu | None = None, profile_ms: tuple | None = None
    ) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
        """Each row's milliseconds on ``target`` (None: the profile's GPU), extrapolation reason, bound, and whether
        it launches a kernel of its own: every row does, but on a fused backend (one ``check_backend`` passed:
        ``fused``'s times and kernels). On another GPU the times are ``transfer``'s of the layer models'
        (``profile_ms``, ``source_times``'s, when given). The rows may be of several networks one after another."""
        ms, reasons, *known = self.profile_ms(rows) if profile_ms is None else profile_ms
        target = target or self.gpu
        known = [np.zeros(len(ms))] if target == self.gpu else known  # on its own GPU a profile has no overhead
        overhead = known[0] if known else self.layout_overhead_ms(rows, ms)
        moved, bound = transfer(rows, ms - overhead, self.gpu, target)
        if target != self.gpu:
            ms = moved + sm_scaled_ms(overhead, self.gpu, target)
        launched = np.ones(len(rows), dtype=bool)
        if (backend or self.backend) in FUSED_BACKENDS:
            ms, launched = fused(rows, ms, self.gpu, target, backend or self.backend)
        return ms, reasons, bound, launched

    def profile_ms(self, rows: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """Each row's milliseconds on the profile's GPU and its extrapolation reason: ``routed_ms``'s, times the
        row's category's scale where the profile has them (``category_scales``: how much faster or slower the
        profile's GPU ran that category inside whole networks than its layer models say)."""
        ms, reasons = self.routed_ms(rows)
        if self.category_scales:
            ms = network_scales.apply(rows, ms, self.category_scales)
        return ms, reasons

    def routed_ms(self, rows: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """Each row's layer-model milliseconds and extrapolation reason (``LayerModels.times_ms``). A profile timed
        NCHW (the amp one) has no conv timed on a channels_last input, which cuDNN runs channels_last (ConvNeXt's
        depthwise convs after its blocks' permutes): those rows (``channels_last_input``) are the layer models' of
        the shipped channels_last profile of the GPU and unit (``channels_last_models``), when there is one."""
        ms, reasons = self.layer_models.times_ms(rows)
        if self.memory_format == "channels_last" or "channels_last_input" not in rows:
            return ms, reasons
        routed = rows["channels_last_input"].eq(1).to_numpy()
        models = self.channels_last_models() if routed.any() and self.channels_last_models else None
        if models is None:
            return ms, reasons
        ms[routed], routed_reasons = models.times_ms(rows[routed])
        for i, reason in zip(np.flatnonzero(routed), routed_reasons, strict=True):
            reasons[i] = reason
        return ms, reasons

    def source_times(self, rows: pd.DataFrame) -> tuple[np.ndarray, list[str], np.ndarray]:
        """``profile_ms``'s times and reasons, and the rows' ``layout_overhead_ms``: what ``compose`` takes as
        ``profile_ms`` to predict one network on several GPUs."""
        ms, reasons = self.profile_ms(rows)
        return ms, reasons, self.layout_overhead_ms(rows, ms)

    def layout_overhead_ms(self, rows: pd.DataFrame, ms: np.ndarray) -> np.ndarray:
        """Each row's share of ``ms`` that its NCHW layout costs on the profile's GPU: for a conv of a profile timed
        NCHW, its time above the same conv's in the channels_last profile of the GPU (``channels_last_models``),
        the layout transforms cuDNN runs around a tensor-core conv on NCHW tensors; 0 elsewhere. ``compose``
        carries it to another GPU as per-SM work (``transfer.sm_scaled_ms``)."""
        overhead = np.zeros(len(ms))
        if self.memory_format == "channels_last" or not self.channels_last_models or not len(rows):
            return overhead
        convs = (rows["group"] == "conv").to_numpy()
        if "channels_last_input" in rows:  # those take the channels_last models' times already (``profile_ms``)
            convs = convs & rows["channels_last_input"].eq(0).to_numpy()
        models = self.channels_last_models() if convs.any() else None
        if models is not None:
            channels_last_ms, _ = models.times_ms(rows[convs])
            overhead[convs] = np.maximum(ms[convs] - channels_last_ms, 0.0)
        return overhead

    def parts_ms(self, traced: list, backend: str | None = None, target: Gpu | None = None) -> list[tuple[float, int]]:
        """The public entry for pieces of networks (NAS's layers, blocks): each traced piece's predicted
        milliseconds on ``target`` (None: the profile's GPU) without the launch gaps, and its rows (kernels), with
        one layer-model call for all of them. A network of pieces takes ``with_gaps`` of their sums."""
        _, ms, owner = self.parts_rows(traced, backend, target)
        return _piece_sums(ms, owner, len(traced))

    def parts_eager(self, traced: list, target: Gpu | None = None) -> list[tuple[float, int, float, float]]:
        """``parts_ms``'s milliseconds and rows of each piece on ``eager`` (one layer-model call, as there), with
        the piece's host milliseconds and when, after its host work began, its last kernel ends if the GPU was idle
        then (``host.last_kernel_end_ms``). A network's timeline chains them (``nas.population``). Needs a host
        profile."""
        rows, ms, owner = self.parts_rows(traced, "eager", target)
        device_ms = ms + self.gap_ms
        out = []
        for index, (recorded, (piece_ms, count)) in enumerate(
            zip(traced, _piece_sums(ms, owner, len(traced)), strict=True)
        ):
            mine = owner == index
            layers = rows["layers"][mine].tolist() if count else []
            issued, host_total_ms = host_timeline(self.host, recorded, layers)
            out.append((piece_ms, count, host_total_ms, last_kernel_end_ms(issued, device_ms[mine])))
        return out

    def parts_rows(
        self, traced: list, backend: str | None, target: Gpu | None
    ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """The rows of traced pieces one after another, their milliseconds on ``target`` (``compose``'s, without
        gaps), and each row's piece."""
        records, counts = [], []
        for recorded in traced:
            piece = network_records(recorded, self.gpu)
            records += piece
            counts.append(len(piece))
        rows = rows_frame(records)
        ms, *_ = self.compose(rows, backend, target, self.source_times(rows))
        return rows, ms, np.repeat(np.arange(len(traced)), counts)

    def with_gaps(self, ms, rows):
        """A network's latency from its pieces' summed ``parts_ms`` and rows: one launch gap per row."""
        return ms + self.gap_ms * rows

    def compose_many(self, networks: list[pd.DataFrame]) -> np.ndarray:
        """``compose``'s latency of each network (on the profile's backend), with one layer-model call for all of
        their rows: the trees' per-call cost dominates for small networks such as single blocks."""
        rows = pd.concat([frame.assign(network=i) for i, frame in enumerate(networks)], ignore_index=True)
        ms, _ = self.profile_ms(rows)
        per_network = pd.Series(ms).groupby(rows["network"]).agg(["sum", "size"])
        return (per_network["sum"] + self.gap_ms * per_network["size"]).to_numpy()


def _piece_sums(ms: np.ndarray, owner: np.ndarray, pieces: int) -> list[tuple[float, int]]:
    """Each piece's summed milliseconds and its rows (``owner``: each row's piece)."""
    summed = np.bincount(owner, weights=ms, minlength=pieces)
    return list(zip(summed.tolist(), np.bincount(owner, minlength=pieces).tolist(), strict=True))


def channels_last_input(event) -> int:
    """1 for a conv whose input arrives channels_last-strided (``OpEvent.layouts``), else 0."""
    return int(event.kind is Kind.CONV and event.layouts[:1] == ("channels_last",))


def counted_channels_last(recorded) -> bool:
    """Whether the traced network's convs saw channels_last inputs (the first conv's)."""
    conv = next((event for event in recorded.events if event.layouts), None)
    return conv is not None and conv.layouts[0] == "channels_last"


def fused(
    rows: pd.DataFrame, ms: np.ndarray, source: Gpu, target: Gpu, backend: str = "inference"
) -> tuple[np.ndarray, np.ndarray]:
    """A first model of fused execution (the ``inference`` backend: BN folded, elementwise ops fused by inductor;
    ``compile``: the same without the folding, ``unfolded_left``): a memory-bound op becomes part of a generated
    kernel that streams what fusion leaves of its bytes (``fused_left``) as ``transfer.fused_stream_ms`` times it
    on the target (an op fused away entirely takes no time and launches nothing); convs, GEMMs and gates keep their
    times. Returns the times and which rows still launch a kernel."""
    memory = (rows["group"] == "memory").to_numpy()
    column = "fused_left" if backend in FREEZING_BACKENDS else "unfolded_left"
    left = np.where(memory, rows[column].to_numpy(float), 1.0)
    ref_ms = fused_stream_ms(rows["ref_ms"].to_numpy(float), source, target)
    return np.where(memory, ref_ms * left, ms), left > FUSED_AWAY


def network_rows(recorded, gpu: Gpu) -> pd.DataFrame:
    """The rows of a traced network (``network_records``) as a frame."""
    return rows_frame(network_records(recorded, gpu))


def rows_frame(records: list[dict]) -> pd.DataFrame:
    """Rows (``network_records``: of one network, or of several one after another) as a frame."""
    frame = pd.DataFrame(records)
    if "channels_last_input" in frame:  # 0 on the rows of no conv (copies, bias adds, gates)
        frame["channels_last_input"] = frame["channels_last_input"].fillna(0).astype(int)
    return frame


def network_records(recorded, gpu: Gpu) -> list[dict]:
    """The rows of a traced network: one per op that launches work, one per squeeze-excite gate (its ops' run),
    each with the index of its layer (a gate's: its first op's), the indices of all its layers, and the share of
    its bytes left when elementwise and norm ops fuse into their producers (``counting.counter.fusion_savings``);
    before a conv whose NCHW input the GPU converts to channels_last, that copy's row (``layout_copy_row``); after a
    conv with a bias, the bias's add (``bias_add_row``); ``channels_last_input``: 1 on a conv fed a channels_last
    input (``profile_ms``), else 0."""
    savings = fusion_savings(recorded.events, recorded.output_keys, inductor_fuses_into)
    saved = dict(zip(map(id, recorded.events), savings, strict=True))
    rows, gate = [], []
    for event, casts in fold_casts(kept_events(recorded.events)):
        if recorded.layers[event.layer].in_se:
            gate.append((event, casts))
            continue
        if gate:
            rows.append(_gate(gate, gpu))
            gate = []
        left = fused_left(event, saved[id(event)])
        unfolded = fused_left(event, saved[id(event)], folds_batch_norm=False)
        copy = layout_copy_row(event, gpu)
        if copy is not None:  # its conv's layer's, and not fused away
            rows.append(
                {**copy, "layer": event.layer, "layers": (event.layer,), "fused_left": 1.0, "unfolded_left": 1.0}
            )
        rows.append(
            {
                **op_row(event, gpu, casts),
                "layer": event.layer,
                "layers": (event.layer,),
                "fused_left": left,
                "unfolded_left": unfolded,
                "channels_last_input": channels_last_input(event),
            }
        )
        bias = bias_add_row(event, gpu)
        if bias is not None:  # inductor fuses the peeled-off bias into the op that reads the conv's output
            rows.append(
                {**bias, "layer": event.layer, "layers": (event.layer,), "fused_left": 0.0, "unfolded_left": 0.0}
            )
    if gate:
        rows.append(_gate(gate, gpu))
    return rows


# norms whose statistics are a reduction over the whole input: fused execution still reads their input once
STATISTICS_NORMS = ("aten.native_group_norm", "aten.native_layer_norm")
# batch norms: folded into the conv's weights under freezing (inference), a pointwise kernel without it (compile)
BATCH_NORMS = ("aten.native_batch_norm", "aten._native_batch_norm_legit_no_training", "aten.cudnn_batch_norm")


def inductor_fuses_into(event) -> bool:
    """Whether inductor fuses a consumer into ``event``: not into a concatenation of more than
    ``INDUCTOR_MAX_POINTWISE_CAT_INPUTS`` tensors, which it copies into a buffer of its own (a DenseNet layer's cat
    of every feature map before it), read again by the norm after it."""
    if event.op != "aten.cat":
        return True
    return sum(not ref.is_weight for ref in event.inputs) <= INDUCTOR_MAX_POINTWISE_CAT_INPUTS


def fused_left(event, saved_bytes: int, folds_batch_norm: bool = True) -> float:
    """The share of an op's bytes fused execution leaves (``counting.counter.fusion_savings``'s saving taken off);
    at least its input for a group or layer norm: its statistics need a pass over the input of their own (inductor
    cannot fold them into the producer as it folds a batch norm's constants), only the normalization fuses. Without
    freezing (``folds_batch_norm`` False: torch.compile's default) a batch norm is not folded into its conv either:
    the pointwise kernel it becomes (with the activations after it) reads the conv's output."""
    if not event.bytes:
        return 1.0
    left = 1 - saved_bytes / event.bytes
    if event.op in STATISTICS_NORMS or (event.op in BATCH_NORMS and not folds_batch_norm):
        read = sum(ref.bytes for ref in event.inputs if not ref.is_weight)
        left = max(left, read / event.bytes)
    return left


def _gate(events, gpu: Gpu) -> dict:
    """The row of a squeeze-excite gate's ops (each with its folded casts' bytes)."""
    layers = tuple(dict.fromkeys(event.layer for event, _ in events))
    return {
        **se_row([op_row(event, gpu, casts) for event, casts in events], gpu),
        "layer": layers[0],
        "layers": layers,
        "fused_left": 1.0,
        "unfolded_left": 1.0,
    }


def per_layer(rows: pd.DataFrame, ms: np.ndarray, reasons: list[str], counted, bounds) -> list[dict]:
    """Predicted milliseconds per layer of the count (a gate's time split evenly over its layers), largest first,
    each with the bound of the most of its time."""
    per = {}
    for layers, row_ms, reason, bound in zip(rows["layers"], ms, reasons, bounds, strict=True):
        for index in layers:
            entry = per.setdefault(index, {"predicted_ms": 0.0, "extrapolated": "", "bounds": {}})
            entry["predicted_ms"] += row_ms / len(layers)
            entry["bounds"][bound] = entry["bounds"].get(bound, 0.0) + row_ms
            entry["extrapolated"] = entry["extrapolated"] or reason
    total = float(ms.sum()) or 1.0
    out = []
    for index, entry in per.items():
        layer, layer_ms = counted.layers[index], float(entry["predicted_ms"])
        out.append(
            {
                "name": layer.name,
                "type": layer.type,
                "op_class": layer.op_class,
                "flops": layer.flops,
                "bytes": layer.bytes,
                "predicted_ms": layer_ms,
                "time_share": layer_ms / total,
                "bound": max(entry["bounds"], key=entry["bounds"].get),
                "extrapolated": entry["extrapolated"],
            }
        )
    return sorted(out, key=lambda layer: -layer["predicted_ms"])
