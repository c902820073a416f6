"""The RegNet design space of "Designing Network Design Spaces" (Radosavovic et al., 2020), as pycls builds it.

Six numbers define a network: depth ``d``, initial width ``w0``, slope ``wa``, width multiplier ``wm``, group width
``g`` and bottleneck ratio ``b``; ``se`` adds RegNetY's squeeze-excite (ratio 0.25 of the block input width).
Block ``j`` gets the continuous width ``u_j = w0 + wa * j``, quantized in log space to ``w0 * wm^round(s_j)`` with
``s_j = log(u_j / w0) / log(wm)`` and rounded to a multiple of 8; blocks of equal width form a stage. Each stage's
bottleneck width ``w / b`` is then rounded to a multiple of ``g`` (``g`` capped at ``w / b``), exactly as pycls's
``generate_regnet`` and ``adjust_block_compatibility`` do (Python's round, half to even). torchvision's
``BlockParams`` rounds half up and adds a 10% floor, so a few configurations differ there (regnet_x_400mf's last
stage: 384 here and in pycls, 400 in torchvision). Only networks with exactly 4 stages, one per width step, belong to
the space, as in the paper's sweeps.

Sampling follows pycls's ``regnet_sampler``: ``d`` uniform, ``w0``, ``wa`` and ``wm`` log-uniform quantized to 8,
0.1 and 0.001, ``g``, ``b`` and ``se`` uniform over their choices; draws with other than 4 stages are redrawn.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from torch import nn
from torchvision.models.regnet import BlockParams, RegNet, ResBottleneckBlock, SimpleStemIN

from utilscope.counting.formulas import conv_output_size
from utilscope.errors import UsageError
from utilscope.models import zoo
from utilscope.nas.costs import conv_cost, linear_cost
from utilscope.nas.space import (
    PASSED_THROUGH,
    Arch,
    Complexity,
    FunctionSpace,
    Layer,
    LayerCost,
    Networks,
    check_fields,
    field_error,
    int_choice,
    register_space,
)

NAME = "regnet"
FIELDS = ("space", "resolution", "depth", "w0", "wa", "wm", "group_width", "bottleneck_ratio", "se")
FIELD_SET = frozenset(FIELDS)
RECORD_KEYS = FIELD_SET | set(PASSED_THROUGH)  # a record's fields and what the sampler stores next to them

DEPTH_RANGE = (12, 28)  # blocks in the network
W0_RANGE, W0_QUANTUM = (8, 256), 8
WA_RANGE, WA_QUANTUM, WA_DECIMALS = (8.0, 256.0), 0.1, 2  # canonical: 2 decimals (published configs, 24.48)
WM_RANGE, WM_QUANTUM, WM_DECIMALS = (1.5, 3.0), 0.001, 3
GROUP_WIDTHS = (1, 2, 4, 8, 16, 32)  # AnyNetX's g
BOTTLENECK_RATIOS = (1, 2, 4)  # AnyNetX's b: a block's inner width is w / b
DEFAULT_RESOLUTION = 224
NUM_STAGES = 4
WIDTH_QUANTUM = 8
SE_RATIO = 0.25
STEM_WIDTH = 32
NUM_CLASSES = 1000
MAX_DRAWS = 10_000  # draws per sample before giving up on finding a 4-stage network (about 1 in 6 draws has 4)


# --- widths and depths ----------------------------------------------------------------------------------------


def generate_regnet(wa: float, w0: int, wm: float, depth: int, q: int = WIDTH_QUANTUM) -> tuple[list, list, int]:
    """pycls's ``generate_regnet``: (stage widths, stage depths, width steps ``max(k) + 1``) of the quantized linear
    width rule ``w_j = q * round(w0 * wm^k_j / q)``, ``k_j = round(log((w0 + wa * j) / w0) / log(wm))``."""
    log_wm = math.log(wm)
    steps = [round(math.log((j * wa + w0) / w0) / log_wm) for j in range(depth)]
    step_widths = {k: round(w0 * wm ** float(k) / q) * q for k in set(steps)}
    block_widths = [step_widths[k] for k in steps]
    widths = sorted(set(block_widths))
    return widths, [block_widths.count(w) for w in widths], max(steps) + 1


def adjust_block_compatibility(widths: list[int], ratio: int, group_width: int) -> tuple[list[int], list[int]]:
    """pycls's ``adjust_block_compatibility`` for bottleneck multiplier ``1 / ratio``: (stage widths whose inner
    width ``w / ratio`` is a multiple of its group width, per-stage group widths ``min(g, w / ratio)``)."""
    adjusted, group_widths = [], []
    for width in widths:
        inner = max(1, int(width / ratio))
        group = min(group_width, inner)
        inner = max(group, int(round(inner / group) * group))
        adjusted.append(inner * ratio)
        group_widths.append(group)
    return adjusted, group_widths


@dataclass(frozen=True)
class Stages:
    """The derived network: per-stage output widths, depths and group widths (the same bottleneck ratio in all)."""

    widths: list[int]
    depths: list[int]
    group_widths: list[int]
    bottleneck_ratio: int
    width_steps: int  # max(k) + 1 of the width rule; equal to the stage count when no step is skipped or merged


def stages(arch: Arch) -> Stages:
    """The stages of a (validated or sampled) record, before the 4-stage check."""
    return _stages(arch["wa"], arch["w0"], arch["wm"], arch["depth"], arch["bottleneck_ratio"], arch["group_width"])


@functools.lru_cache(maxsize=1 << 16)  # validation, layers, cost and features all need them; shared: read only
def _stages(wa: float, w0: int, wm: float, depth: int, ratio: int, group_width: int) -> Stages:
    widths, depths, steps = generate_regnet(wa, w0, wm, depth)
    widths, group_widths = adjust_block_compatibility(widths, ratio, group_width)
    return Stages(widths, depths, group_widths, ratio, steps)


def stage_problem(derived: Stages) -> str | None:
    """Why the derived network is outside the space (not exactly 4 stages, one per width step), or None."""
    count = len(derived.widths)
    if count == NUM_STAGES == derived.width_steps:
        return None
    return (
        f"its widths form {count} stage(s) from {derived.width_steps} width step(s) (stage widths {derived.widths}, "
        f"depths {derived.depths}); the {NAME} space keeps only networks with exactly {NUM_STAGES} stages, one per "
        f"width step, as the RegNet paper does: change depth, w0, wa or wm"
    )


# --- validation -----------------------------------------------------------------------------------------------


def _fail(field: str, expected: str, got) -> UsageError:
    return field_error(NAME, field, expected, got)


def _integer(value, field: str, low: int, high: int, multiple: int = 1) -> int:
    expected = f"an integer in [{low}, {high}]" + (f", a multiple of {multiple}" if multiple > 1 else "")
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise _fail(field, expected, value)
    if not low <= int(value) <= high or int(value) % multiple:
        raise _fail(field, expected, value)
    return int(value)


def _real(value, field: str, bounds: tuple[float, float], decimals: int) -> float:
    expected = f"a number in [{bounds[0]}, {bounds[1]}] (kept to {decimals} decimals)"
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise _fail(field, expected, value)
    rounded = round(float(value), decimals)
    if not bounds[0] <= rounded <= bounds[1]:
        raise _fail(field, expected, value)
    return rounded


def _choice(value, field: str, choices: tuple[int, ...]) -> int:
    return int_choice(NAME, value, field, choices)


def _check_fields(arch) -> None:
    check_fields(NAME, arch, FIELDS)


def validate(arch: Arch) -> Arch:
    """The canonical record (plain ints, ``wa``/``wm`` rounded to 2/3 decimals, no ``id``/``seed``); UsageError
    naming the bad field and its allowed values, or saying why the derived network does not have 4 stages."""
    record = {key: arch[key] for key in FIELDS} if is_canonical(arch) else _normalized(arch)
    problem = stage_problem(stages(record))
    if problem is not None:
        raise UsageError(f"{NAME} architecture {_summary(record)}: {problem}")
    return record


def _normalized(arch) -> Arch:
    """The record's fields checked one by one and normalized; UsageError naming the first bad one."""
    _check_fields(arch)
    if not isinstance(arch["se"], bool):
        raise _fail("se", "true (RegNetY) or false (RegNetX)", arch["se"])
    try:
        resolution = zoo.check_resolution(arch["resolution"])
    except UsageError as exc:
        raise _fail(
            "resolution", f"an integer in [{zoo.MIN_RESOLUTION}, {zoo.MAX_RESOLUTION}]", arch["resolution"]
        ) from exc
    return {
        "space": NAME,
        "resolution": resolution,
        "depth": _integer(arch["depth"], "depth", *DEPTH_RANGE),
        "w0": _integer(arch["w0"], "w0", *W0_RANGE, multiple=W0_QUANTUM),
        "wa": _real(arch["wa"], "wa", WA_RANGE, WA_DECIMALS),
        "wm": _real(arch["wm"], "wm", WM_RANGE, WM_DECIMALS),
        "group_width": _choice(arch["group_width"], "group_width", GROUP_WIDTHS),
        "bottleneck_ratio": _choice(arch["bottleneck_ratio"], "bottleneck_ratio", BOTTLENECK_RATIOS),
        "se": arch["se"],
    }


def is_canonical(arch) -> bool:
    """Whether ``arch`` already is a canonical record (as ``draw`` and ``validate`` make them: plain ints, a bool,
    ``wa`` and ``wm`` floats kept to their decimals, every value allowed), with at most the sampler's id and seed.
    ``validate`` keeps such a record's fields as they are, without the per-field checks that name a bad field (the
    predictor validates many sampled records); whatever else it gets takes those checks."""
    if type(arch) is not dict or not FIELD_SET <= arch.keys() <= RECORD_KEYS:
        return False
    return (
        type(arch["space"]) is str
        and arch["space"] == NAME
        and type(arch["se"]) is bool
        and _plain_int(arch["resolution"], zoo.MIN_RESOLUTION, zoo.MAX_RESOLUTION)
        and _plain_int(arch["depth"], *DEPTH_RANGE)
        and _plain_int(arch["w0"], *W0_RANGE)
        and arch["w0"] % W0_QUANTUM == 0
        and _plain_float(arch["wa"], WA_RANGE, WA_DECIMALS)
        and _plain_float(arch["wm"], WM_RANGE, WM_DECIMALS)
        and type(arch["group_width"]) is int
        and arch["group_width"] in GROUP_WIDTHS
        and type(arch["bottleneck_ratio"]) is int
        and arch["bottleneck_ratio"] in BOTTLENECK_RATIOS
    )


def _plain_int(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _plain_float(value, bounds: tuple[float, float], decimals: int) -> bool:
    return type(value) is float and bounds[0] <= value <= bounds[1] and round(value, decimals) == value


def _summary(record: Arch) -> str:
    keys = ("depth", "w0", "wa", "wm")
    return "(" + ", ".join(f"{key}={record[key]}" for key in keys) + ")"


# --- sampling -------------------------------------------------------------------------------------------------


def log_uniform(rng: np.random.Generator, low: float, high: float, quantum: float) -> float:
    """pycls's ``log_uniform``: log-uniform in (low - q*, high], q* = min(quantum, low / 2), rounded up to a
    multiple of ``quantum`` (so each value in [low, high] gets the log-width of its rounding interval)."""
    value = math.exp(-rng.uniform(-math.log(high), -math.log(low - min(quantum, low / 2))))
    return min(high, max(low, math.ceil(value / quantum) * quantum))


def draw(rng: np.random.Generator) -> Arch:
    """One draw in a fixed order (depth, w0, wa, wm, group width, bottleneck ratio, se), before the stage check."""
    return {
        "space": NAME,
        "resolution": DEFAULT_RESOLUTION,
        "depth": int(rng.integers(DEPTH_RANGE[0], DEPTH_RANGE[1] + 1)),
        "w0": int(log_uniform(rng, *W0_RANGE, W0_QUANTUM)),
        "wa": round(log_uniform(rng, *WA_RANGE, WA_QUANTUM), WA_DECIMALS),
        "wm": round(log_uniform(rng, *WM_RANGE, WM_QUANTUM), WM_DECIMALS),
        "group_width": GROUP_WIDTHS[int(rng.integers(len(GROUP_WIDTHS)))],
        "bottleneck_ratio": BOTTLENECK_RATIOS[int(rng.integers(len(BOTTLENECK_RATIOS)))],
        "se": bool(rng.integers(2)),
    }


# --- cost and network -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16384)  # a pure function of a few ints; networks of a space share many blocks
def block_cost(size: int, w_in: int, w_out: int, stride: int, group_width: int, ratio: int, se: bool):
    """(output size, flops, params) of one X block (Y block with ``se``): 1x1, 3x3 group conv [+ SE], 1x1, with a
    1x1 projection shortcut when the shape changes. SE: pool, 1x1 conv w_b -> w_se and back, both with bias."""
    inner = w_out // ratio
    _, flops, params = conv_cost(size, w_in, inner, 1, bn=True)
    out, f, p = conv_cost(size, inner, inner, 3, stride, groups=inner // group_width, bn=True)
    flops, params = flops + f, params + p
    if se:
        squeeze = int(round(SE_RATIO * w_in))
        for c_in, c_out in ((inner, squeeze), (squeeze, inner)):  # on the pooled 1x1 map
            _, f, p = conv_cost(1, c_in, c_out, 1, bias=True)
            flops, params = flops + f, params + p
    _, f, p = conv_cost(out, inner, w_out, 1, bn=True)
    flops, params = flops + f, params + p
    if w_in != w_out or stride != 1:
        _, f, p = conv_cost(size, w_in, w_out, 1, stride, bn=True)
        flops, params = flops + f, params + p
    return out, flops, params


def complexity(arch: Arch) -> Complexity:
    """Analytic FLOPs (2 x MACs of convs and the classifier) and params of a record, from its derived stages."""
    return _complexity(validate(arch))


def _complexity(arch: Arch) -> Complexity:
    return _network(arch)[1]


def _network(arch: Arch) -> tuple[list[Layer], Complexity]:
    """The layers of a validated record (stem, every block with its widths, stride, group width, bottleneck ratio,
    SE and input size, head) and its FLOPs and params, in one walk over the derived stages."""
    derived = stages(arch)
    ratio, se = arch["bottleneck_ratio"], arch["se"]
    size, flops, params = conv_cost(arch["resolution"], 3, STEM_WIDTH, 3, stride=2, bn=True)
    result = [Layer("stem", (arch["resolution"],), 3, arch["resolution"])]
    width = STEM_WIDTH
    for w_out, depth, group_width in zip(derived.widths, derived.depths, derived.group_widths, strict=True):
        for index in range(depth):
            stride = 2 if index == 0 else 1
            result.append(Layer("block", (width, w_out, stride, group_width, ratio, int(se), size), width, size))
            size, f, p = block_cost(size, width, w_out, stride, group_width, ratio, se)
            flops, params, width = flops + f, params + p, w_out
    result.append(Layer("head", (width, size), width, size))
    classifier_flops, classifier_params = linear_cost(width, NUM_CLASSES)
    return result, Complexity(flops=flops + classifier_flops, params=params + classifier_params)


def build(arch: Arch) -> nn.Module:
    """torchvision's RegNet (3x3 stem of 32, X/Y bottleneck blocks with torchvision's SqueezeExcitation, average
    pool, linear classifier) with the record's derived stages; random weights."""
    arch = validate(arch)
    derived = stages(arch)
    params = BlockParams(
        depths=list(derived.depths),  # copies: the cached stages are shared
        widths=list(derived.widths),
        group_widths=list(derived.group_widths),
        bottleneck_multipliers=[1 / derived.bottleneck_ratio] * NUM_STAGES,
        strides=[2] * NUM_STAGES,
        se_ratio=SE_RATIO if arch["se"] else None,
    )
    return RegNet(params, num_classes=NUM_CLASSES, stem_width=STEM_WIDTH)


# --- the layers of the latency table -------------------------------------------------------------------------


def layers(arch: Arch) -> list[Layer]:
    """Stem, every block (widths, stride, group width, bottleneck ratio, SE, input size) and head of a record."""
    return _network(validate(arch))[0]


def layer_cost(kind: str, config: tuple) -> LayerCost:
    """FLOPs, params and activation elements (inputs and outputs of its convolutions) of a layer at batch 1."""
    if kind == "stem":
        out, flops, params = conv_cost(config[0], 3, STEM_WIDTH, 3, stride=2, bn=True)
        return LayerCost(flops, params, 3 * config[0] ** 2 + STEM_WIDTH * out**2)
    if kind == "head":
        width, size = config
        return LayerCost(*linear_cost(width, NUM_CLASSES), width * size**2 + width)
    w_in, w_out, stride, group_width, ratio, se, size = config
    out, flops, params = block_cost(size, w_in, w_out, stride, group_width, ratio, bool(se))
    inner = w_out // ratio
    shortcut = w_out * out**2 if (w_in != w_out or stride != 1) else 0
    return LayerCost(flops, params, w_in * size**2 + inner * (size**2 + out**2) + w_out * out**2 + shortcut)


def build_layer(layer: Layer) -> nn.Module:
    if layer.kind == "stem":
        return SimpleStemIN(3, STEM_WIDTH, nn.BatchNorm2d, nn.ReLU)
    if layer.kind == "head":
        return nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(1), nn.Linear(layer.config[0], NUM_CLASSES))
    if layer.kind == "block":
        w_in, w_out, stride, group_width, ratio, se, _ = layer.config
        return ResBottleneckBlock(
            w_in, w_out, stride, nn.BatchNorm2d, nn.ReLU, group_width, 1 / ratio, SE_RATIO if se else None
        )
    raise UsageError(f"{NAME} has no layer kind {layer.kind!r}")


# --- many networks at once (the predictor's path) -------------------------------------------------------------

SLOT_STEM, SLOT_BLOCK, SLOT_HEAD = 0, 1, 2  # kind codes of the layer slot rows
SLOT_COLUMNS = 8  # kind code, then the layer's config (a block's 7 values; the stem's and head's padded with 0)


def networks(archs: list[Arch]) -> Networks:
    """The records' networks: each record validated once, the layer slots of all networks built together as arrays
    (``_layer_slots``), and each distinct layer made and costed once. A network's FLOPs and params are its layers'
    (they add up to ``complexity``'s, tested)."""
    records = [validate(arch) for arch in archs]
    derived = [stages(record) for record in records]
    rows, counts = _layer_slots(records, derived)
    held = counts.ravel() > 0  # a stage of depth 1 has no repeated block
    rows, count = rows.reshape(-1, SLOT_COLUMNS)[held], counts.ravel()[held]
    network = np.repeat(np.arange(len(records)), counts.shape[1])[held]
    slot_frame = pd.DataFrame(rows)
    layer = slot_frame.groupby(list(slot_frame.columns), sort=False).ngroup().to_numpy()  # numbered as first seen
    first_rows = rows[np.unique(layer, return_index=True)[1]]  # each distinct layer's first slot row
    distinct = [_slot_layer(row) for row in first_rows.tolist()]
    costs = [layer_cost(item.kind, item.config) for item in distinct]
    flops = _network_totals([cost.flops for cost in costs], network, layer, count, len(records))
    params = _network_totals([cost.params for cost in costs], network, layer, count, len(records))
    costs_of = zip(records, flops.tolist(), params.tolist(), strict=True)
    features = [_features(record, Complexity(f, p)) for record, f, p in costs_of]
    return Networks(distinct, costs, network, layer, count, flops, pd.DataFrame(features, index=range(len(records))))


def _layer_slots(records: list[Arch], derived: list[Stages]) -> tuple[np.ndarray, np.ndarray]:
    """Per network, the rows of its layer slots (networks x slots x ``SLOT_COLUMNS``) and how many times it holds
    each (networks x slots): the stem, per stage its first block (stride 2) and its other blocks (alike, depth - 1
    of them), the head; as ``_network`` builds them, for all networks at once."""
    resolution = np.array([record["resolution"] for record in records], dtype=np.int64)
    ratio = np.array([record["bottleneck_ratio"] for record in records], dtype=np.int64)
    se = np.array([record["se"] for record in records], dtype=np.int64)
    widths = np.array([stage.widths for stage in derived], dtype=np.int64).reshape(-1, NUM_STAGES)
    depths = np.array([stage.depths for stage in derived], dtype=np.int64).reshape(-1, NUM_STAGES)
    groups = np.array([stage.group_widths for stage in derived], dtype=np.int64).reshape(-1, NUM_STAGES)
    one = np.ones_like(resolution)
    size, width = conv_output_size(resolution, 3, 2, padding=1), np.full_like(resolution, STEM_WIDTH)
    slots = [([SLOT_STEM, resolution], one)]
    for stage in range(NUM_STAGES):
        w_out, group, out = widths[:, stage], groups[:, stage], conv_output_size(size, 3, 2, padding=1)
        slots.append(([SLOT_BLOCK, width, w_out, 2, group, ratio, se, size], one))
        slots.append(([SLOT_BLOCK, w_out, w_out, 1, group, ratio, se, out], depths[:, stage] - 1))
        size, width = out, w_out
    slots.append(([SLOT_HEAD, width, size], one))
    rows = np.zeros((len(records), len(slots), SLOT_COLUMNS), dtype=np.int64)
    for index, (values, _) in enumerate(slots):
        for column, value in enumerate(values):
            rows[:, index, column] = value
    return rows, np.stack([count for _, count in slots], axis=1)


def _slot_layer(row: list[int]) -> Layer:
    """The layer of a slot row, equal to the one ``_network`` builds."""
    kind, *config = row
    if kind == SLOT_STEM:
        return Layer("stem", (config[0],), 3, config[0])
    if kind == SLOT_HEAD:
        return Layer("head", (config[0], config[1]), config[0], config[1])
    return Layer("block", tuple(config), config[0], config[-1])


def _network_totals(per_layer: list[int], network: np.ndarray, layer: np.ndarray, count: np.ndarray, size: int):
    """Per network, the sum of a per-layer number over its layers, in exact integers."""
    totals = np.zeros(size, dtype=np.int64)
    np.add.at(totals, network, np.array(per_layer, dtype=np.int64)[layer] * count)
    return totals


# --- the space ------------------------------------------------------------------------------------------------


def sample(rng: np.random.Generator) -> Arch:
    """A 4-stage network drawn with ``rng`` (draws with other stage counts are redrawn, as in pycls's sweeps)."""
    if not isinstance(rng, np.random.Generator):
        raise UsageError(f"sampling needs a numpy.random.Generator (numpy.random.default_rng(seed)), got {rng!r}")
    for _ in range(MAX_DRAWS):
        arch = draw(rng)
        if stage_problem(stages(arch)) is None:
            return arch
    raise RuntimeError(f"no {NUM_STAGES}-stage {NAME} network in {MAX_DRAWS} draws")  # a bug, not bad input


def covering_archs() -> list[Arch]:
    return []  # widths are continuous: the table holds the layers of the architectures it is built for


def features(arch: Arch) -> dict[str, float]:
    record = validate(arch)
    return _features(record, _complexity(record))


STAGE_FEATURES = [(f"stage{i + 1}_width", f"stage{i + 1}_depth") for i in range(NUM_STAGES)]


def _features(arch: Arch, cost: Complexity) -> dict[str, float]:
    """The design choices, per-stage widths and depths, mean group count per block, GFLOPs and Mparams."""
    derived = stages(arch)
    features = {key: float(arch[key]) for key in FIELDS if key != "space"}
    for (width_name, depth_name), width, depth in zip(STAGE_FEATURES, derived.widths, derived.depths, strict=True):
        features[width_name] = float(width)
        features[depth_name] = float(depth)
    stage_groups = zip(derived.widths, derived.depths, derived.group_widths, strict=True)
    block_groups = sum(depth * ((width // derived.bottleneck_ratio) // group) for width, depth, group in stage_groups)
    features["groups_mean"] = block_groups / sum(derived.depths)  # per block (a stage's blocks have its groups)
    features["gflops"] = cost.flops / 1e9
    features["mparams"] = cost.params / 1e6
    return features


# RegNetX/RegNetY: depth, w0, wa, wm, group width, bottleneck ratio and squeeze-excite; 4 stages
SPACE = register_space(FunctionSpace.of_module(NAME, globals()))
