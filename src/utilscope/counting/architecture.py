"""Which architectures are CNNs: the rule that sorts timm's architectures into the kinds of ``timm_models.csv``
(``utilscope.models.timm_sets`` reads the table; ``scripts/build_timm_table.py`` writes it).

Every architecture ``timm.list_models()`` names is built with random weights at its default pretrained config's
native resolution and counted (batch 1, fp32, on the meta device, else the CPU). Its *kind* is then:

- ``attention``: it mixes tokens by attention: a scaled-dot-product attention, or an op-level matmul between
  activations (``bmm``, ``matmul``, ``einsum``) whose result is a matrix (both last dimensions above 1, as
  ``q @ k.T`` and ``weights @ v`` are); a transformer or a conv/attention hybrid. A matmul to a column (GCNet's
  global-context pooling, ``[C, HW] @ [HW, 1]``) is a pooling, not attention, and the network stays a CNN.
- ``no_spatial_conv``: no convolution mixes neighbouring pixels (every conv is 1x1 or a patchify conv whose stride
  equals its kernel): MLP-mixers, ResMLP, gMLP and the like.
- ``cnn``: the rest, i.e. spatial mixing by convolutions (or pooling after an overlapping conv stem) and no
  attention;
- ``test``: one of timm's tiny ``test_*`` models, made for timm's own tests;
- ``failed``: it could not be built or counted; the reason is recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from torch import nn

from utilscope.counting.counter import count
from utilscope.errors import describe
from utilscope.models import zoo

MATMUL_OPS = ("bmm", "matmul", "einsum", "aten.mm")


@dataclass(frozen=True)
class Verdict:
    model: str
    kind: str
    reason: str
    resolution: int
    gflops: float
    params_m: float
    attention_share: float
    unsupported: str  # "op:count" pairs, ";"-separated


def mixes_space(module: nn.Module) -> bool:
    """True if some convolution mixes neighbouring positions: a kernel larger than 1 and larger than its stride in
    some dimension (a patchify conv, kernel == stride, only reshapes patches)."""
    for layer in module.modules():
        pairs = zip(layer.kernel_size, layer.stride, strict=True) if isinstance(layer, nn.modules.conv._ConvNd) else ()
        if any(k > 1 and k > s for k, s in pairs):
            return True
    return False


def is_attention(layer) -> bool:
    """An op-level layer (outside nn.Linear/conv modules) that is attention: scaled-dot-product attention, or a
    matmul of activations to a matrix (both last dimensions of its output above 1)."""
    if not layer.type.startswith("aten.") or layer.op_class != "linear":
        return False
    if any("scaled_dot_product" in op for op in layer.ops):
        return True
    matrix = bool(layer.output_shapes) and len(layer.output_shapes[0]) >= 2 and min(layer.output_shapes[0][-2:]) > 1
    return matrix and any(part in op for op in layer.ops for part in MATMUL_OPS)


def attention_share(result) -> float:
    """The share of a count's FLOPs in attention layers (``is_attention``)."""
    attention = sum(layer.flops for layer in result.layers if is_attention(layer))
    return attention / result.total.flops if result.total.flops else 0.0


CONV_CLASSES = ("dense", "grouped", "depthwise", "attention-hybrid")  # how the GPU atlas groups networks
DEPTHWISE_SHARE = 0.005  # depthwise convolutions carrying this share of FLOPs make a depthwise(-separable) network
GROUPED_SHARE = 0.05  # grouped (not depthwise) convolutions carrying this share make a grouped one (ResNeXt, RegNet)


def conv_class(result) -> str:
    """A counted network's class in ``CONV_CLASSES``: ``attention-hybrid`` when attention carries any FLOPs
    (``attention_share``), else ``depthwise`` when depthwise convolutions carry at least ``DEPTHWISE_SHARE`` of them
    (MobileNets, EfficientNets, ConvNeXts: depthwise FLOPs are few, their time is not), else ``grouped`` at
    ``GROUPED_SHARE`` of grouped convolutions, else ``dense`` (MLP-only networks too)."""
    if attention_share(result) > 0:
        return "attention-hybrid"
    flops = result.total.flops or 1
    shares = {
        cls: sum(layer.flops for layer in result.layers if layer.op_class == cls) / flops
        for cls in ("depthwise_conv", "grouped_conv")
    }
    if shares["depthwise_conv"] >= DEPTHWISE_SHARE:
        return "depthwise"
    return "grouped" if shares["grouped_conv"] >= GROUPED_SHARE else "dense"


def kind_of(share: float, spatial: bool) -> tuple[str, str]:
    """The kind and its reason, from the attention share and whether a conv mixes space."""
    if share > 0:
        return "attention", f"attention carries {share:.2%} of FLOPs"
    if not spatial:
        return "no_spatial_conv", "no convolution mixes neighbouring positions"
    return "cnn", "spatial convolutions, no attention"


def classify(name: str) -> Verdict:
    """The verdict on one timm architecture; a model that cannot be built or counted is ``failed``, with why."""
    model_id = f"timm:{name}"
    resolution = 0
    try:
        spec = zoo.parse_spec(model_id)
        resolution = zoo.native_resolution(spec)
        module, _ = zoo.build_on_meta(spec, resolution)
        result = count(module, resolution=resolution)
    except Exception as exc:  # a verdict records any failure
        reason = " ".join(describe(exc).replace("#", "").split())[:300]
        return Verdict(model_id, "failed", reason, resolution, 0.0, 0.0, 0.0, "")
    share = attention_share(result)
    kind, reason = kind_of(share, mixes_space(module))
    if name.startswith("test_"):
        kind, reason = "test", f"one of timm's models for its own tests ({reason})"
    unsupported = ";".join(f"{op}:{n}" for op, n in sorted(result.unsupported.items()))
    return Verdict(
        model_id, kind, reason, resolution, result.total.flops / 1e9, result.total.params / 1e6, share, unsupported
    )


def classify_all(names: list[str], processes: int = 1):
    """Verdicts on ``names`` as dicts, in completion order; ``processes`` > 1 classifies in a process pool."""
    if processes <= 1:
        yield from (asdict(classify(name)) for name in names)
        return
    from multiprocessing import get_context

    with get_context("spawn").Pool(processes, maxtasksperchild=20) as pool:
        yield from (asdict(v) for v in pool.imap_unordered(classify, names, chunksize=1))
