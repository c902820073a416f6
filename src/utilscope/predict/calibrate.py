"""Calibration: time a seeded sample of layer configurations (``predict.ops``) on a device, into a device profile.

Each config is timed as the ``graph`` backend runs a network's layers: its module in the precision (channels-last
for 4-D tensors, cuDNN set as asked), ``REPEATS`` calls captured into one CUDA graph (so the replay's own launch is
spread over them), the median of the timed replays divided by ``REPEATS``. On a CPU the calls run eagerly. On a
GPU the calls cycle through copies of the module whose weights together exceed twice its L2 cache: in a network
each layer's weights are read from memory once per pass, while its input was just written by the layer before
(the input stays the same, as in a network it is warm). A config
that runs out of memory or fails is recorded with its reason, not timed again. The profile is one JSON file with the
environment it was measured in; it is saved every ``SAVE_EVERY`` configs, and calibrating into an existing profile of
the same configuration times only what it lacks (resume).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from utilscope import hardware
from utilscope.errors import UsageError
from utilscope.files import DEVICE_PROFILE_FILE as PROFILE_FILE  # noqa: F401  (fit_cache, profile_rows')
from utilscope.files import write_json
from utilscope.limits import check_seed
from utilscope.measure.backends import capture_cuda_graph
from utilscope.measure.environment import device_label, environment
from utilscope.measure.precision import Precision, check_precision, math_mode, parse_precision
from utilscope.measure.settings import CudnnSettings
from utilscope.measure.sweep import default_precision, first_line, is_out_of_memory
from utilscope.measure.timing import CpuClock, CudaClock, TimingPlan, measure
from utilscope.predict.ops import SAMPLE_VERSION, OpConfig, build_op, input_dtypes, laid_out, sample_configs
from utilscope.predict.profile_format import PROFILE_FORMAT, REMEDY, read_profile

REPEATS = 20  # calls per timed replay
OP_PLAN = TimingPlan(warmup_iters=2, warmup_ms=5.0, samples=5, min_total_ms=20.0)
SAVE_EVERY = 25
COLD_CACHE_FACTOR = 2  # the copies' weights cover this many times the L2 cache
DEFAULT_L2_BYTES = 50 << 20  # when torch does not say
# what a resumed profile must match (it keeps the configs it timed from an earlier sample version too: the harness
# is the profile's format)
CONFIGURATION = ("device", "precision", "backend", "cudnn", "seed", "memory_format")


@dataclass
class DeviceProfile:
    device: str
    precision: str
    backend: str
    cudnn: dict
    seed: int
    environment: dict
    sample_version: int = SAMPLE_VERSION
    memory_format: str = "channels_last"  # the configs' images and weights: channels_last, or contiguous (NCHW)
    configs: dict[str, dict] = field(default_factory=dict)  # key -> OpConfig fields
    latency_ms: dict[str, float] = field(default_factory=dict)  # key -> median ms per call
    failed: dict[str, str] = field(default_factory=dict)  # key -> "oom: ..." / "error: ..."

    def save(self, path: str | Path) -> Path:
        return write_json(path, {"format": PROFILE_FORMAT, **asdict(self)})

    @classmethod
    def load(cls, path: str | Path) -> DeviceProfile:
        data = read_profile(path)
        data.pop("format")
        try:
            return cls(**data)
        except TypeError as exc:
            raise UsageError(f"{path} is a damaged device profile ({exc}); {REMEDY}") from None

    def describe(self) -> str:
        cudnn = CudnnSettings.from_dict(self.cudnn).label() or "cudnn.benchmark on"
        return f"{self.device}, {self.precision}, {self.backend}, {self.memory_format}, {cudnn}, seed {self.seed}"

    @property
    def channels_last(self) -> bool:
        return self.memory_format == "channels_last"


def op_inputs(config: OpConfig, shapes, device, precision: Precision, channels_last: bool = True) -> list[torch.Tensor]:
    """Random inputs of the config's op (``shapes``: ``build_op``'s) in the layout and dtype a network feeds it:
    images channels_last, as ``profile`` runs a model; a linear layer's (B, H, W, C) tokens contiguous, as the
    permute of a channels_last image is (made channels_last, F.linear would copy them first, and the copy would be
    timed as the linear's); a layout copy's image NCHW, the layout it converts from. Under autocast (amp) in
    autocast's dtype, as the activations between a network's layers are (its weights stay fp32): a conv is timed
    with the cast of its weights, not of its input, and a batch norm on fp16 with fp32 parameters. A cast's
    (``ops.input_dtypes``): its image in the dtype it casts from."""
    dtypes = input_dtypes(config, shapes, precision.autocast_dtype or precision.dtype)
    tensors = [torch.randn(shape, device=device).to(dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    return laid_out(config, tensors, channels_last)


def time_module_ms(
    module: torch.nn.Module | list[torch.nn.Module],
    inputs: list[torch.Tensor],
    device: torch.device,
    precision: Precision,
    cudnn: CudnnSettings,
    example: torch.Tensor | None = None,
) -> float:
    """Median milliseconds of one call of ``module(*inputs)`` (both already on the device, in the precision),
    ``REPEATS`` calls per timed CUDA-graph replay (eager calls on a CPU); a list of modules: the calls cycle
    through them. ``example``: the input on which the depthwise exception of ``cudnn`` decides the conv algorithms
    (none: cuDNN as set). Raises."""
    modules = module if isinstance(module, list) else [module]

    def calls():
        with torch.inference_mode():
            for index in range(REPEATS):
                out = modules[index % len(modules)](*inputs)
        return out

    with math_mode(precision), cudnn.applied(modules[0], example):
        run = capture_cuda_graph(calls) if device.type == "cuda" else calls
        clock = CudaClock(device) if device.type == "cuda" else CpuClock()
        stats = measure(run, clock, OP_PLAN)
    return stats.median_ms / REPEATS


def time_op_ms(
    config: OpConfig, device: torch.device, precision: Precision, cudnn: CudnnSettings, channels_last: bool = True
) -> float:
    """Median milliseconds of one call of the config's module, ``REPEATS`` calls per timed replay (under amp, its
    autocast casts included). Raises."""
    with device:  # weights initialized where they run (a 25,088 x 4,096 head takes a second on a CPU)
        module, shapes = build_op(config)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    module = module.to(device=device, dtype=precision.dtype, memory_format=layout).eval()
    inputs = op_inputs(config, shapes, device, precision, channels_last)
    example = inputs[0] if len(inputs) == 1 else None  # the depthwise exception decides per conv on one pass
    return time_module_ms(cold_copies(module, device), inputs, device, precision, cudnn, example)


def cold_copies(module: torch.nn.Module, device: torch.device) -> list[torch.nn.Module]:
    """The module and copies of it (at most REPEATS in all) whose weights together cover COLD_CACHE_FACTOR times
    the GPU's L2 cache, so that a cycle through them reads each call's weights from memory; on a CPU the module."""
    if device.type != "cuda":
        return [module]
    weight_bytes = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or DEFAULT_L2_BYTES
    return [module] + [copy.deepcopy(module) for _ in range(cold_copy_count(weight_bytes, l2_bytes) - 1)]


def cold_copy_count(weight_bytes: int, l2_bytes: int) -> int:
    """How many copies of a module's weights cover COLD_CACHE_FACTOR x the L2 cache (1 to REPEATS)."""
    if weight_bytes <= 0:
        return 1
    return max(1, min(REPEATS, math.ceil(COLD_CACHE_FACTOR * l2_bytes / weight_bytes)))


def open_profile(
    device: str | None,
    precision: str | None,
    cudnn: CudnnSettings,
    seed: int,
    existing: DeviceProfile | None = None,
    channels_last: bool = True,
) -> DeviceProfile:
    """A new profile for this device and configuration, or ``existing`` when it matches them (resume)."""
    dev = hardware.resolve_device(device)
    check_seed(seed)
    prec = check_precision(parse_precision(default_precision(dev) if precision is None else precision), dev)
    env = environment(dev, prec.value, "graph", channels_last, cudnn)
    profile = DeviceProfile(
        device_label(env),
        prec.value,
        "graph",
        cudnn.to_dict(),
        seed,
        env,
        memory_format="channels_last" if channels_last else "contiguous",
    )
    if existing is None:
        return profile
    if any(getattr(existing, name) != getattr(profile, name) for name in CONFIGURATION):
        raise UsageError(f"the existing profile is for {existing.describe()}, not {profile.describe()}")
    existing.sample_version = SAMPLE_VERSION  # what it times next; what it timed before stays
    return existing


def calibrate(
    profile: DeviceProfile,
    count: int,
    out: str | Path,
    device: str | None = None,
    on_op: Callable[[int, int], None] | None = None,
) -> DeviceProfile:
    """Time the first ``count`` configs of the profile's seeded sample that it lacks; saved to ``out`` as it goes."""
    dev = hardware.resolve_device(device)
    prec, cudnn = parse_precision(profile.precision), CudnnSettings.from_dict(profile.cudnn)
    todo = [
        c
        for c in sample_configs(count, profile.seed)
        if c.key not in profile.latency_ms and c.key not in profile.failed
    ]
    try:
        for done, config in enumerate(todo, start=1):
            _time_into(profile, config, dev, prec, cudnn)
            if done % SAVE_EVERY == 0:
                profile.save(out)
            if on_op is not None:
                on_op(done, len(todo))
    finally:  # also when interrupted: what was timed is kept, and a rerun resumes after it
        profile.save(out)
    return profile


def _time_into(profile: DeviceProfile, config: OpConfig, dev: torch.device, prec: Precision, cudnn: CudnnSettings):
    """Time one config into the profile, or record why it failed (an interrupt records nothing)."""
    try:
        profile.latency_ms[config.key] = time_op_ms(config, dev, prec, cudnn, profile.channels_last)
    except Exception as exc:  # a calibration is a runner: record the config's failure and go on
        kind = "oom" if is_out_of_memory(exc) else "error"
        profile.failed[config.key] = f"{kind}: {type(exc).__name__}: {first_line(exc)}"
    finally:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    profile.configs[config.key] = asdict(config)
