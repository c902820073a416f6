"""Diagnosis rules on tiny real models: each rule fires on a model built to trigger it and stays quiet on one built
not to.

Every attribution is built from a real count (``utilscope.count`` on the CPU, no GPU) with per-layer times from the
roofline of the test roofs (max of tensor, vector and memory time) plus a 2 us launch each, unless a test picks
times itself. The roofs' ridge is 989.4e12 / 4800e9 = 206.1 FLOP/B; the device has 132 SMs.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from torch import nn
from torchvision.ops import SqueezeExcitation

import utilscope
from utilscope.attribute import diagnose as dg
from utilscope.attribute.records import Attribution, LayerTime, Point, Roofs
from utilscope.hardware import alignment
from utilscope.units import si

ROOFS = Roofs(tensor_tflops=989.4, vector_tflops=66.9, bandwidth_gbs=4800, label="test")
SM_COUNT = 132
LAUNCH_MS = 0.002


def roofline_ms(flops: int, other_flops: int, nbytes: int) -> float:
    seconds = max(flops / (ROOFS.tensor_tflops * 1e12), other_flops / (ROOFS.vector_tflops * 1e12))
    return max(seconds, nbytes / (ROOFS.bandwidth_gbs * 1e9)) * 1e3 + LAUNCH_MS


def attribution_of(
    result,
    *,
    precision="fp16",
    backend="eager",
    idle_share=0.0,
    times=None,
    regions=None,
    sm_count=SM_COUNT,
    roofs=ROOFS,
) -> Attribution:
    """An attribution of a CountResult: roofline times (or ``times[name]``); ``regions`` maps a fused region's
    name to its layers (their time becomes the region's, counted with fused bytes); the rest run one kernel each."""
    times, regions = times or {}, regions or {}
    region_of = {name: region for region, names in regions.items() for name in names}
    layers, points = [], []
    for lay in result.layers:
        region = region_of.get(lay.name)
        ms = times.get(lay.name, roofline_ms(lay.flops, lay.other_flops, lay.bytes))
        layers.append(LayerTime(lay, time_ms=None if region else ms, kernel_count=0 if region else 1, region=region))
        if region is None:
            points.append(Point(lay.name, lay.op_class, lay.flops, lay.other_flops, lay.bytes, ms, [lay.name]))
    for region, names in regions.items():
        members = [lay for lay in result.layers if lay.name in names]
        flops, other = sum(m.flops for m in members), sum(m.other_flops for m in members)
        nbytes = sum(m.bytes_fused for m in members)
        op_class = max(members, key=lambda m: m.flops).op_class
        points.append(Point(region, op_class, flops, other, nbytes, roofline_ms(flops, other, nbytes), names))
    kernel_ms = sum(p.time_ms for p in points)
    return Attribution(
        model=result.model,
        device_name="test GPU",
        device_type="cuda",
        backend=backend,
        precision=precision,
        batch=result.batch,
        resolution=result.resolution,
        layers=layers,
        points=points,
        kernel_time_ms=kernel_ms,
        attributed_ms=kernel_ms,
        end_to_end_ms=kernel_ms / (1 - idle_share),
        flops=result.total.flops,
        peak_tflops=ROOFS.tensor_tflops,
        roofs=roofs,
        ceiling_roofs=None,
        sm_count=sm_count,
    )


def count(module: nn.Module, batch: int, resolution: int, precision: str = "fp16"):
    dtype = precision if precision in ("fp16", "bf16") else "fp32"
    return utilscope.count(module, batch=batch, resolution=resolution, dtype=dtype)


def run(attribution: Attribution, rule: str, thresholds: dg.Thresholds | None = None) -> list[dg.Finding]:
    findings = dg.diagnose(attribution, thresholds, rules=rule)
    assert all(f.rule == rule for f in findings)
    return findings


def at(findings: list[dg.Finding], layer: str | None) -> dg.Finding:
    matches = [f for f in findings if f.layer == layer]
    assert len(matches) == 1, [(f.rule, f.layer) for f in findings]
    return matches[0]


def layer_of(result, name: str):
    return next(lay for lay in result.layers if lay.name == name)


# --- tiny models ----------------------------------------------------------------------------------------------------


class Net(nn.Module):
    """Named children run in order, so that layer names read like the test."""

    def __init__(self, **layers: nn.Module):
        super().__init__()
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, x):
        for layer in self.children():
            x = layer(x)
        return x


class ConvBnAct(nn.Module):
    """conv -> bn -> act -> conv2 -> bn2 -> (+ skip) -> act2: two BatchNorms, two ReLUs, one residual add."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.conv, self.conv2 = nn.Conv2d(3, width, 3, padding=1), nn.Conv2d(width, width, 3, padding=1)
        self.bn, self.bn2 = nn.BatchNorm2d(width), nn.BatchNorm2d(width)
        self.act, self.act2 = nn.ReLU(), nn.ReLU()

    def forward(self, x):
        x = self.act(self.bn(self.conv(x)))
        return self.act2(self.bn2(self.conv2(x)) + x)


def separable(width: int = 32) -> nn.Module:
    return Net(
        stem=nn.Conv2d(3, width, 3, padding=1),
        dw=nn.Conv2d(width, width, 3, padding=1, groups=width),
        pw=nn.Conv2d(width, 2 * width, 1),
    )


def with_se(se: bool = True) -> nn.Module:
    middle = {"se": SqueezeExcitation(32, 8)} if se else {}
    return Net(conv=nn.Conv2d(3, 32, 3, padding=1), **middle, conv2=nn.Conv2d(32, 32, 3, padding=1))


# --- memory_bound_low_intensity ---------------------------------------------------------------------------------


def test_memory_bound_fires_on_depthwise_and_narrow_pointwise():
    result = count(separable(), batch=8, resolution=32)
    attribution = attribution_of(result)
    findings = run(attribution, "memory_bound_low_intensity")
    assert sorted(f.layer for f in findings) == ["dw", "pw"]  # the dense stem is not a candidate
    for name, op_class in (("dw", "depthwise_conv"), ("pw", "pointwise_conv")):
        finding, lay = at(findings, name), layer_of(result, name)
        assert finding.op_class == op_class
        # pw: 2*32*64 FLOP per pixel over (32+64)*2 bytes per pixel ~ 21 FLOP/B, well under the ridge
        assert f"intensity {lay.flops / lay.bytes:.1f} FLOP/B < ridge 206.1 FLOP/B" in finding.evidence
        assert f"{dg.pct(lay.flops / result.total.flops)} of FLOPs" in finding.evidence
        assert f"{dg.pct(finding.time_share)} of time" in finding.evidence
        assert "fuse" in finding.advice


def test_memory_bound_advice_fuses_a_batchnorm_only_where_the_network_has_one():
    """A network without BatchNorms (an ONNX file's: its exporter folded them) is advised to fuse what follows the
    layer, never a BatchNorm it does not have."""
    without = at(run(attribution_of(count(separable(), batch=8, resolution=32)), "memory_bound_low_intensity"), "dw")
    assert "fuse the activation and elementwise ops after it into it" in without.advice
    assert "BatchNorm" not in without.advice
    normed = Net(
        stem=nn.Conv2d(3, 32, 3, padding=1), dw=nn.Conv2d(32, 32, 3, padding=1, groups=32), bn=nn.BatchNorm2d(32)
    )
    advice = at(run(attribution_of(count(normed, batch=8, resolution=32)), "memory_bound_low_intensity"), "dw").advice
    assert "fuse its BatchNorm and activation into it" in advice


def test_memory_bound_quiet_on_wide_pointwise_and_without_roofs():
    # pw 1024 -> 1024 at fp16, 8 x 32 x 32 pixels: 2*1024*1024*8192 FLOP / (2048*8192*2 + 1024*1024*2) B ~ 484 FLOP/B
    result = count(Net(stem=nn.Conv2d(3, 1024, 3, padding=1), pw=nn.Conv2d(1024, 1024, 1)), batch=8, resolution=32)
    assert layer_of(result, "pw").flops / layer_of(result, "pw").bytes > ROOFS.ridge_intensity
    assert run(attribution_of(result), "memory_bound_low_intensity") == []
    no_roofs = attribution_of(count(separable(), batch=8, resolution=32), roofs=None)
    assert run(no_roofs, "memory_bound_low_intensity") == []


# --- unaligned_channels ---------------------------------------------------------------------------------------------


def test_unaligned_channels_fires_on_30_channels():
    result = count(Net(conv=nn.Conv2d(3, 30, 3, padding=1), conv2=nn.Conv2d(30, 32, 3, padding=1)), 2, 16)
    findings = run(attribution_of(result), "unaligned_channels")
    assert sorted(f.layer for f in findings) == ["conv", "conv2"]
    conv, conv2 = at(findings, "conv"), at(findings, "conv2")
    assert conv.op_class == conv2.op_class == "dense_conv"
    assert "output channels 30 (next multiple 32): not a multiple of 8 for fp16" in conv.evidence
    assert "input channels" not in conv.evidence  # the image's 3 channels are fixed by the data
    assert "input channels 30 (next multiple 32): not a multiple of 8" in conv2.evidence
    assert "output channels" not in conv2.evidence
    assert "pad channels to a multiple of 8" in conv.advice


def penalty_table(*rows) -> pd.DataFrame:
    """Rows of (gpu, precision, kernel, channels, batch, unaligned_ms, padded_ms) as the penalty file holds them."""
    full = [
        (gpu, prec, k, c, -(-c // 8) * 8, 28, b, u, p, "2.11", 91900, "2026-12-01") for gpu, prec, k, c, b, u, p in rows
    ]
    return pd.DataFrame(full, columns=list(alignment.COLUMNS))


def test_the_measured_penalty_is_the_nearest_kernel_and_batch_median():
    gpu = "test GPU"
    table = penalty_table(
        (gpu, "fp16", 3, 60, 256, 3.5, 1.0),
        (gpu, "fp16", 3, 126, 256, 2.7, 1.0),
        (gpu, "fp16", 3, 250, 256, 1.8, 1.0),
        (gpu, "fp16", 3, 60, 1, 9.0, 1.0),
        (gpu, "fp16", 1, 250, 256, 2.0, 1.0),
        ("other", "fp16", 3, 60, 256, 5.0, 1.0),
    )
    # kernel 3 at batch 128: the nearest timed batch in log scale is 256 (log2 distance 1, against 7 for batch 1)
    penalty = alignment.penalty_for("test GPU", "fp16", 3, 128, table)
    assert (penalty.kernel, penalty.batch, penalty.shapes) == (3, 256, 3)
    assert (penalty.median, penalty.low, penalty.high) == (2.7, 1.8, 3.5)  # the ratios 3.5, 2.7 and 1.8
    assert alignment.penalty_for("test GPU", "fp16", 1, 256, table).median == 2.0
    assert alignment.penalty_for("test GPU", "fp16", 5, 2, table).batch == 1  # kernel 5: the nearest timed, 3
    assert alignment.penalty_for("test GPU", "bf16", 3, 256, table) is None


def test_unaligned_channels_cites_the_penalty_measured_on_this_gpu(monkeypatch):
    result = count(Net(conv=nn.Conv2d(3, 30, 3, padding=1), conv2=nn.Conv2d(30, 32, 3, padding=1)), 2, 16)
    unmeasured = at(run(attribution_of(result), "unaligned_channels"), "conv2").advice
    assert "no penalty measured for this GPU and precision" in unmeasured
    table = penalty_table(("test GPU", "fp16", 3, 60, 1, 3.0, 1.0), ("test GPU", "fp16", 3, 60, 256, 1.5, 1.0))
    monkeypatch.setattr(alignment, "load_penalties", lambda: table)
    advice = at(run(attribution_of(result), "unaligned_channels"), "conv2").advice  # batch 2: the batch-1 row
    assert "measured on the test GPU in fp16: 3×3 convs with unaligned channels ran 3.00× slower" in advice
    assert "at batch 1 (median of 1 shapes)" in advice and "utilscope advise" in advice


def test_unaligned_channels_quiet_when_aligned():
    result = count(Net(conv=nn.Conv2d(3, 8, 3, padding=1), conv2=nn.Conv2d(8, 32, 3, padding=1)), 2, 16)
    assert run(attribution_of(result), "unaligned_channels") == []


def test_unaligned_channels_leaves_depthwise_convs_out():
    # depthwise convs run no tensor cores and the cited penalty is of dense convs: only the stem's 30 is reported
    model = Net(conv=nn.Conv2d(3, 30, 1), dw=nn.Conv2d(30, 30, 9, padding=4, groups=30))
    assert [f.layer for f in run(attribution_of(count(model, 2, 16)), "unaligned_channels")] == ["conv"]


def test_unaligned_channels_alignment_follows_precision():
    # 12 channels: 12 % 8 = 4 (unaligned for fp16), 12 % 4 = 0 (aligned for fp32)
    model = Net(conv=nn.Conv2d(3, 12, 3, padding=1), conv2=nn.Conv2d(12, 16, 3, padding=1))
    loud = run(attribution_of(count(model, 2, 16, "fp16")), "unaligned_channels")
    assert "output channels 12 (next multiple 16): not a multiple of 8" in at(loud, "conv").evidence
    assert run(attribution_of(count(model, 2, 16, "fp32"), precision="fp32"), "unaligned_channels") == []


def test_unaligned_channels_on_a_linear_layer():
    model = Net(conv=nn.Conv2d(3, 32, 3), pool=nn.AdaptiveAvgPool2d(1), flat=nn.Flatten(), fc=nn.Linear(32, 100))
    result = count(model, 2, 8)
    times = {lay.name: 1.0 for lay in result.layers}
    finding = at(run(attribution_of(result, times=times), "unaligned_channels"), "fc")
    assert finding.op_class == "linear"
    assert "output channels 100 (next multiple 104)" in finding.evidence  # 100 % 8 = 4


# --- too_little_work ------------------------------------------------------------------------------------------------


def test_too_little_work_fires_on_a_1x1_output_at_batch_1():
    # 8x8 kernel on an 8x8 image: a 1x1 output, M = 1 x 1 x 1 = 1, N = 64 -> ceil(1/128) * ceil(64/128) = 1 block
    result = count(Net(conv=nn.Conv2d(3, 64, 8)), batch=1, resolution=8)
    finding = at(run(attribution_of(result), "too_little_work"), "conv")
    assert finding.op_class == "dense_conv"
    assert "M = 1 rows (batch x output pixels) x N = 64 channels -> ~1 thread block(s) of 128x128" in (finding.evidence)
    assert "for 132 SMs (0.8% busy)" in finding.evidence  # 1 / 132
    assert "a batch of ~132 would give every SM a block" in finding.evidence and "larger batch" in finding.advice


def test_too_little_work_quiet_on_a_large_layer_and_on_cpu():
    # M = 8 x 64 x 64 = 32768 -> 256 row tiles, N = 256 -> 2 column tiles: 512 blocks >= 132 SMs
    result = count(Net(conv=nn.Conv2d(3, 256, 3, padding=1)), batch=8, resolution=64)
    assert run(attribution_of(result), "too_little_work") == []
    tiny = count(Net(conv=nn.Conv2d(3, 64, 8)), batch=1, resolution=8)
    assert run(attribution_of(tiny, sm_count=None), "too_little_work") == []


# --- unfused_elementwise ------------------------------------------------------------------------------------------


def test_unfused_elementwise_fires_on_eager_batchnorm_relu_add():
    result = count(ConvBnAct(), batch=4, resolution=32)
    attribution = attribution_of(result)
    context = dg.Context.build(attribution)
    findings = run(attribution, "unfused_elementwise")
    network = at(findings, None)
    unfused = [lay for lay in attribution.layers if lay.op_class in ("norm", "activation", "elementwise")]
    assert sorted(lay.name for lay in unfused) == ["act", "act2", "add", "bn", "bn2"]
    share = {c: sum(context.layer_share(lay) for lay in unfused if lay.op_class == c) for c in dg.UNFUSED_CLASSES}
    assert network.time_share == pytest.approx(sum(share.values()))
    assert f"{dg.pct(network.time_share)} of time in 5 separate kernels" in network.evidence
    assert f"norm {dg.pct(share['norm'])} (2 layers)" in network.evidence
    assert f"activation {dg.pct(share['activation'])} (2 layers)" in network.evidence
    assert f"elementwise {dg.pct(share['elementwise'])} (1 layer)" in network.evidence
    saved = result.total.bytes - result.total.bytes_fused
    assert f"cut memory traffic by {si(saved, 'B')} of {si(result.total.bytes, 'B')}" in network.evidence
    assert "fold BatchNorm" in network.advice
    bn = at(findings, "bn")
    assert bn.op_class == "norm" and "fold this BatchNorm" in bn.advice
    assert f"BatchNorm2d: {dg.pct(bn.time_share)} of time in 1 kernel(s)" in bn.evidence
    assert at(findings, "add").op_class == "elementwise" and "epilogue" in at(findings, "add").advice
    assert len(findings) == 1 + dg.Thresholds().max_layer_findings  # the 5 biggest of 5 unfused layers


def test_unfused_elementwise_says_nothing_of_folding_without_a_batchnorm():
    """A network whose BatchNorms are gone (an ONNX file's: its exporter folded them) is advised to fuse, not fold."""
    folded = ConvBnAct()
    folded.bn, folded.bn2 = nn.Identity(), nn.Identity()
    findings = run(attribution_of(count(folded, batch=4, resolution=32)), "unfused_elementwise")
    assert findings and "fuse activations and adds" in at(findings, None).advice
    assert not any("BatchNorm" in finding.advice for finding in findings)


def test_unfused_elementwise_quiet_when_fused_or_without_norms():
    model = ConvBnAct()
    result = count(model, batch=4, resolution=32)
    regions = {"r0": ["conv", "bn", "act"], "r1": ["conv2", "bn2", "add", "act2"]}
    assert [lay.name for lay in result.layers] == [*regions["r0"], *regions["r1"]]
    assert run(attribution_of(result, backend="inference", regions=regions), "unfused_elementwise") == []
    plain = count(Net(conv=nn.Conv2d(3, 32, 3, padding=1), conv2=nn.Conv2d(32, 32, 3, padding=1)), 4, 32)
    assert {lay.op_class for lay in plain.layers} == {"dense_conv"}
    assert run(attribution_of(plain), "unfused_elementwise") == []


def test_fused_layers_are_charged_their_region():
    result = count(Net(conv=nn.Conv2d(3, 30, 3, padding=1), act=nn.ReLU()), 2, 16)
    attribution = attribution_of(result, backend="compile", regions={"r0": ["conv", "act"]})
    finding = at(run(attribution, "unaligned_channels"), "conv")
    assert "(its fused region r0, an upper bound)" in finding.evidence
    assert finding.time_share == pytest.approx(attribution.points[0].time_ms / attribution.end_to_end_ms)


# --- squeeze_excite -------------------------------------------------------------------------------------------------


def test_squeeze_excite_fires_on_an_se_block():
    result = count(with_se(), batch=2, resolution=16)
    attribution = attribution_of(result)
    se_layers = [lay for lay in result.layers if lay.op_class == "se_gate"]
    assert [lay.name for lay in se_layers] == [
        "se.avgpool",
        "se.fc1",
        "se.activation",
        "se.fc2",
        "se.scale_activation",
        "se.mul",
    ]
    context = dg.Context.build(attribution)
    time_share = sum(context.share(context.layer_ms[lay.name]) for lay in se_layers)
    flop_share = sum(lay.flops for lay in se_layers) / result.total.flops  # (2*32*8 + 2*8*32) * 2 / ~1.2 MFLOP
    findings = run(attribution, "squeeze_excite")
    network, block = at(findings, None), at(findings, "se")
    assert network.op_class == block.op_class == "se_gate"
    assert f"1 SE block: {dg.pct(time_share)} of time for {dg.pct(flop_share)} of FLOPs" in network.evidence
    assert "M = batch = 2 rows" in network.evidence
    assert f"6 layers: {dg.pct(time_share)} of time" in block.evidence and "se.fc1" in block.evidence
    assert block.time_share == pytest.approx(time_share) and "fewer SE blocks" in block.advice


def test_squeeze_excite_counts_a_fused_region_once():
    result = count(with_se(), batch=2, resolution=16)
    se_names = [lay.name for lay in result.layers if lay.op_class == "se_gate"]
    # regions are named after the layer they start at
    attribution = attribution_of(result, backend="compile", regions={se_names[0]: se_names})
    region_ms = next(p.time_ms for p in attribution.points if p.name == se_names[0])
    block = at(run(attribution, "squeeze_excite"), "se")
    assert block.time_share == pytest.approx(region_ms / attribution.end_to_end_ms)  # not 6x the region


def test_squeeze_excite_ignores_a_region_that_only_absorbed_its_pool():
    """A compiler fuses the SE pool into the convolution before it: that region is the convolution's time."""
    result = count(with_se(), batch=2, resolution=16)
    names = [lay.name for lay in result.layers]
    se_names = [lay.name for lay in result.layers if lay.op_class == "se_gate"]
    before = names[names.index(se_names[0]) - 1]
    regions = {before: [before, se_names[0]], se_names[1]: se_names[1:]}
    attribution = attribution_of(result, backend="compile", regions=regions)
    region_ms = next(p.time_ms for p in attribution.points if p.name == se_names[1])
    block = at(run(attribution, "squeeze_excite"), "se")
    assert block.time_share == pytest.approx(region_ms / attribution.end_to_end_ms)


def test_squeeze_excite_quiet_without_se_or_when_cheap():
    assert run(attribution_of(count(with_se(False), batch=2, resolution=16)), "squeeze_excite") == []
    result = count(with_se(), batch=2, resolution=16)
    times = {lay.name: (1e-6 if lay.op_class == "se_gate" else 1.0) for lay in result.layers}
    assert run(attribution_of(result, times=times), "squeeze_excite") == []  # 6 us of 2 ms: under 5%


# --- launch_bound ---------------------------------------------------------------------------------------------------


def test_launch_bound_fires_on_idle_time():
    result = count(ConvBnAct(), batch=1, resolution=16)
    attribution = attribution_of(result, idle_share=0.4)
    finding = at(run(attribution, "launch_bound"), None)
    assert finding.time_share == pytest.approx(0.4)
    e2e, kernels = attribution.end_to_end_ms, attribution.kernel_time_ms
    assert f"idle 40.0% of the {e2e:.3f} ms end-to-end: kernels run {kernels:.3f} ms; 7 kernels" in finding.evidence
    assert "batch 1" in finding.evidence and "CUDA graphs" in finding.advice
    graphed = run(attribution_of(result, idle_share=0.4, backend="graph"), "launch_bound")
    assert "already in use" in at(graphed, None).advice


def test_launch_bound_quiet_below_threshold():
    result = count(ConvBnAct(), batch=1, resolution=16)
    assert run(attribution_of(result, idle_share=0.05), "launch_bound") == []
    assert run(attribution_of(result, idle_share=0.4), "launch_bound", dg.Thresholds(idle_share=0.5)) == []


# --- registry, diagnose, summarize ----------------------------------------------------------------------------------


def everything() -> Attribution:
    """Unaligned 30-channel stem, BN + ReLU, depthwise + pointwise, SE, linear head, batch 1, 30% idle."""
    model = Net(
        stem=nn.Conv2d(3, 30, 3, padding=1),
        bn=nn.BatchNorm2d(30),
        act=nn.ReLU(),
        dw=nn.Conv2d(30, 30, 3, padding=1, groups=30),
        pw=nn.Conv2d(30, 64, 1),
        se=SqueezeExcitation(64, 16),
        pool=nn.AdaptiveAvgPool2d(1),
        flat=nn.Flatten(),
        fc=nn.Linear(64, 10),
    )
    return attribution_of(count(model, batch=1, resolution=16), idle_share=0.3)


@pytest.mark.parametrize("name", dg.list_rules())
def test_every_rule_fires_on_the_kitchen_sink_and_leaves_it_unchanged(name):
    attribution = everything()
    before = copy.deepcopy(attribution.to_dict())
    findings = dg.RULES[name](attribution, dg.Context.build(attribution))
    assert findings and all(f.rule == name for f in findings)
    assert all(f.evidence and f.advice and f.time_share >= 0 for f in findings)
    assert attribution.to_dict() == before


def test_registry_rejects_duplicates_and_unknown_globs():
    assert dg.list_rules() == [
        "memory_bound_low_intensity",
        "unaligned_channels",
        "too_little_work",
        "unfused_elementwise",
        "squeeze_excite",
        "launch_bound",
    ]
    with pytest.raises(ValueError, match="registered twice"):
        dg.register_rule("launch_bound")(lambda attribution, context: [])
    assert dg.list_rules("un*") == ["unaligned_channels", "unfused_elementwise"]
    with pytest.raises(ValueError, match="no diagnosis rule matches 'nope'; rules: memory_bound_low_intensity"):
        dg.diagnose(everything(), rules="nope")


@pytest.mark.parametrize(
    "kwargs", [{"min_layer_share": 1.5}, {"idle_share": -0.1}, {"tile_m": 0}, {"alignment": {"fp16": 0}}]
)
def test_thresholds_reject_nonsense(kwargs):
    with pytest.raises(ValueError):
        dg.Thresholds(**kwargs)


def test_unknown_precision_is_an_error():
    attribution = everything()
    attribution.precision = "fp8"
    with pytest.raises(
        ValueError, match="no channel alignment for precision 'fp8'; known: fp32, fp32_strict, tf32, fp16, bf16"
    ):
        dg.diagnose(attribution)


def test_diagnose_sorts_by_time_share_and_summarize_groups():
    findings = dg.diagnose(everything())
    shares = [f.time_share for f in findings]
    assert shares == sorted(shares, reverse=True)
    assert {f.rule for f in findings} == set(dg.RULES)
    summary = dg.summarize(findings)
    assert list(summary.columns) == dg.SUMMARY_COLUMNS
    launch = summary[summary.rule == "launch_bound"].iloc[0]
    assert (launch.op_class, launch.scope, launch.layers) == ("all", "network", 0)
    assert launch.time_share == pytest.approx(0.3)
    memory = summary[(summary.rule == "memory_bound_low_intensity") & (summary.scope == "layer")]
    per_layer = [f for f in findings if f.rule == "memory_bound_low_intensity"]
    assert memory.layers.sum() == len(per_layer)
    assert memory.time_share.sum() == pytest.approx(sum(f.time_share for f in per_layer))
    assert summary.time_share.is_monotonic_decreasing
    assert dg.summarize([]).empty and list(dg.summarize([]).columns) == dg.SUMMARY_COLUMNS


# --- hints: findings grouped per rule, advice that fits the run -------------------------------------------------


def stacked_separables(blocks: int = 4) -> nn.Module:
    """A stem, then ``blocks`` depthwise + pointwise pairs: every pair is memory-bound for the same reason."""
    layers = {"stem": nn.Conv2d(3, 32, 3, padding=1)}
    for i in range(blocks):
        layers[f"dw{i}"] = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        layers[f"pw{i}"] = nn.Conv2d(32, 32, 1)
    return Net(**layers)


def test_hints_group_a_rules_findings_into_one_with_its_layers_and_total_share():
    from utilscope.attribute.explain import explain
    from utilscope.attribute.hints import hints
    from utilscope.present.layers_view import findings_text

    attribution = attribution_of(count(stacked_separables(), batch=8, resolution=32))
    per_layer = run(attribution, "memory_bound_low_intensity")
    assert len(per_layer) == 8  # 4 depthwise + 4 pointwise layers
    grouped = hints(attribution, rules="memory_bound_low_intensity")
    assert len(grouped) == 1
    hint = grouped[0]
    assert sorted(hint.layers) == sorted(f.layer for f in per_layer)
    assert hint.time_share == pytest.approx(sum(f.time_share for f in per_layer))
    assert [f.time_share for f in hint.details] == sorted((f.time_share for f in per_layer), reverse=True)
    text = findings_text(explain(attribution))
    assert text.count(hint.advice[:40]) == 1  # the advice once, not once per layer
    assert text.count("[memory_bound_low_intensity]") == 1 and "8 flagged" in text
    assert "also: " in text  # 3 layers with their evidence, the other 5 by name


def test_hints_are_ordered_by_time_at_stake_and_json_lists_their_layers():
    import json

    from utilscope.attribute.explain import explain

    explanation = explain(everything())
    shares = [hint.time_share for hint in explanation.findings]
    assert shares == sorted(shares, reverse=True)
    assert len({hint.rule for hint in explanation.findings}) == len(explanation.findings)  # one hint per rule
    doc = json.loads(json.dumps(explanation.to_dict()))
    for hint in doc["findings"]:
        assert {"rule", "time_share", "advice", "evidence", "layers", "details"} <= hint.keys()
        assert all({"layer", "op_class", "time_share", "evidence"} <= d.keys() for d in hint["details"])
    unfused = next(hint for hint in doc["findings"] if hint["rule"] == "unfused_elementwise")
    assert set(unfused["layers"]) == {"bn", "act"}  # every layer the network-level finding covers


def test_a_fused_region_counts_once_in_a_hints_time_at_stake():
    from utilscope.attribute.hints import hints

    result = count(Net(conv=nn.Conv2d(3, 30, 3, padding=1), conv2=nn.Conv2d(30, 30, 3, padding=1)), 2, 16)
    attribution = attribution_of(result, backend="compile", regions={"r0": ["conv", "conv2"]})
    (hint,) = hints(attribution, rules="unaligned_channels")
    assert sorted(hint.layers) == ["conv", "conv2"]  # both charged the region's time, an upper bound each
    assert hint.time_share == pytest.approx(1.0)  # the region's share once (it is all the time), not twice


def on_cpu(attribution: Attribution) -> Attribution:
    attribution.device_type, attribution.device_name, attribution.sm_count = "cpu", "test CPU (2 threads)", None
    return attribution


def test_advice_never_recommends_the_backend_in_use():
    separables = count(separable(), batch=8, resolution=32)
    eager = at(run(attribution_of(separables), "memory_bound_low_intensity"), "dw")
    assert "the `inference` backend" in eager.advice
    fused = attribution_of(separables, backend="inference", regions={"dw": ["dw", "pw"]})
    advice = run(fused, "memory_bound_low_intensity")[0].advice
    assert "even with its elementwise neighbours fused (the `inference` backend fuses them)" in advice
    assert "fuse its BatchNorm" not in advice
    idle = count(ConvBnAct(), batch=1, resolution=16)
    compiled = run(attribution_of(idle, idle_share=0.4, backend="compile"), "launch_bound")[0].advice
    assert "`inference`" in compiled and "`graph`" not in compiled  # graph would undo compile's fusion


def test_advice_fits_the_device_and_precision():
    separables = count(separable(), batch=8, resolution=32, precision="fp32")
    fp32 = at(run(attribution_of(separables, precision="fp32"), "memory_bound_low_intensity"), "dw")
    assert "fp16 or bf16 (half the bytes of fp32)" in fp32.advice
    fp16 = at(run(attribution_of(count(separable(), batch=8, resolution=32)), "memory_bound_low_intensity"), "dw")
    assert "half the bytes" not in fp16.advice
    cpu = on_cpu(attribution_of(separables, precision="fp32"))
    for finding in dg.diagnose(cpu):
        assert "CUDA" not in finding.advice and "tensor-core" not in finding.advice, finding
    assert "bf16 (where this CPU has native bf16 kernels)" in at(run(cpu, "memory_bound_low_intensity"), "dw").advice
    idle = on_cpu(attribution_of(count(ConvBnAct(), batch=1, resolution=16, precision="fp32"), idle_share=0.4))
    launch = run(idle, "launch_bound")[0]
    assert "Python" in launch.advice and "7 ops" in launch.evidence and "kernel" not in launch.evidence
    unaligned = count(Net(conv=nn.Conv2d(3, 30, 3, padding=1), conv2=nn.Conv2d(30, 32, 3, padding=1)), 2, 16)
    assert run(on_cpu(attribution_of(unaligned)), "unaligned_channels") == []  # tile widths of a GPU's kernels
    assert "fp16 tensor-core kernels on the test GPU" in run(attribution_of(unaligned), "unaligned_channels")[0].advice
