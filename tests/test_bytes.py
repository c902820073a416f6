"""Closed-form checks of the byte counts: every tensor input read once, every output written once, at its dtype
(a norm or a pool writes only its first output: saved statistics and max-pool indices are not needed at inference).

Each expected value has its arithmetic in a comment. Unless stated, ``count`` runs at batch 2, resolution 8,
fp32: the input x is (2, 3, 8, 8) = 384 elements = 1536 bytes.
"""

from __future__ import annotations

import pytest
import torch
from counting_helpers import Lambda, count, count_on_cpu, layer
from torch import nn

from utilscope.counting.tracer import tensor_bytes


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    )


# --- tensor_bytes ---------------------------------------------------------------------------------------------


def test_tensor_bytes():
    x = torch.empty(2, 3, 4, 4)
    assert tensor_bytes(x) == 384  # 96 elements * 4
    assert tensor_bytes(x.half()) == 192  # 96 * 2
    assert tensor_bytes(x.long()) == 768  # 96 * 8
    assert tensor_bytes(x[:, :, ::2]) == 192  # (2, 3, 2, 4) = 48 elements * 4: strided, not the span
    # expand gives stride-0 dims: only the 2*3 distinct elements count, 6 * 4 = 24
    assert tensor_bytes(x[:, :, :1, :1].expand(2, 3, 4, 4)) == 24
    assert tensor_bytes(torch.empty(3).expand(5, 3)) == 12  # 3 * 4


# --- closed-form bytes per layer ------------------------------------------------------------------------------


def test_conv_bytes_fp32():
    result = count(nn.Sequential(nn.Conv2d(3, 8, 3)))
    conv = layer(result, "0")
    # x 384 + weight 8*3*3*3 = 216 + bias 8 + y (2, 8, 6, 6) = 576 -> 1184 elements * 4 = 4736
    assert conv.bytes == result.total.bytes == 4736
    # weight + bias: (216 + 8) * 4 = 896; activations: (384 + 576) * 4 = 3840
    assert conv.weight_bytes == result.total.weight_bytes == 896
    assert result.total.activation_bytes == 3840


def test_conv_bytes_fp16_is_half():
    result = count(nn.Sequential(nn.Conv2d(3, 8, 3)), dtype="fp16")
    # 1184 elements * 2 = 2368; weights 224 * 2 = 448; activations 960 * 2 = 1920
    assert (result.total.bytes, result.total.weight_bytes, result.total.activation_bytes) == (2368, 448, 1920)


def test_linear_bytes():
    result = count(nn.Sequential(nn.Flatten(), nn.Linear(192, 10)))
    # x (2, 192) = 384 + weight 1920 + bias 10 + y (2, 10) = 20 -> 2334 * 4 = 9336
    assert layer(result, "1").bytes == 9336
    # (1920 + 10) * 4 = 7720
    assert result.total.weight_bytes == 7720


def test_batch_norm_bytes():
    result = count(nn.Sequential(nn.BatchNorm2d(3)))
    # x 384 + weight, bias, running mean, running var 4*3 = 12 + y 384 -> 780 * 4 = 3120
    assert layer(result, "0").bytes == 3120
    assert result.total.weight_bytes == 48  # 12 * 4


NORM_BYTES_CASES = {
    # name: (norm, bytes, weight_bytes); a norm's saved statistics (mean, rstd) are not written at inference
    # x 384 + weight, bias 2*8 = 16 + y 384 -> 784 * 4 = 3136 (not + mean and rstd (2, 3, 8, 1) fp32, 2*48)
    # weight bytes 16 * 4 = 64
    "layer_norm": (nn.LayerNorm(8), 3136, 64),
    # x 384 + y 384 -> 768 * 4 = 3072
    "layer_norm_no_affine": (nn.LayerNorm(8, elementwise_affine=False), 3072, 0),
    # x 384 + weight, bias 2*3 = 6 + y 384 -> 774 * 4 = 3096 (not + mean and rstd (2, 1), 2*2)
    # weight bytes 6 * 4 = 24
    "group_norm": (nn.GroupNorm(1, 3), 3096, 24),
    # batch statistics (no running ones): native_batch_norm(training=True); x 384 + 6 + y 384 -> 3096; weights 24
    "batch_norm_batch_stats": (nn.BatchNorm2d(3, track_running_stats=False), 3096, 24),
    # instance norm: batch norm of the (1, 6, 8, 8) view; x 384 + y 384 -> 3072 (not + mean, rstd (6,), 2*6)
    "instance_norm": (nn.InstanceNorm2d(3), 3072, 0),
    # affine: weight and bias (3,) are repeated to (6,) first, each repeat reads 3 and writes 6 -> 2 * 9 = 18;
    # batch norm reads x 384 + weight, bias 2*6 = 12, writes y 384 -> 780; (18 + 780) * 4 = 3192
    # weight bytes: the repeats' reads 2*3 + batch norm's reads of the repeated weights 2*6 = 18 * 4 = 72
    "instance_norm_affine": (nn.InstanceNorm2d(3, affine=True), 3192, 72),
}


@pytest.mark.parametrize("case", list(NORM_BYTES_CASES))
def test_norm_bytes_exclude_statistics(case):
    module, total_bytes, weight_bytes = NORM_BYTES_CASES[case]
    result = count(nn.Sequential(module))
    assert (result.total.bytes, result.total.weight_bytes) == (total_bytes, weight_bytes)


def test_pool_bytes():
    # max pool writes only y, not its int64 indices: x 1536 + y (2, 3, 3, 3) 54*4 = 216 -> 1752
    assert count(nn.Sequential(nn.MaxPool2d(3, 2))).total.bytes == 1752
    # adaptive max pool, likewise: x 1536 + y (2, 3, 1, 1) 6*4 = 24 -> 1560 (not + indices 6*8 = 48)
    assert count(nn.Sequential(nn.AdaptiveMaxPool2d(1))).total.bytes == 1560
    # x 1536 + y (2, 3, 4, 4) 96*4 = 384 -> 1920
    assert count(nn.Sequential(nn.AvgPool2d(2))).total.bytes == 1920
    # x 1536 + y (2, 3, 1, 1) 6*4 = 24 -> 1560
    assert count(nn.Sequential(nn.AdaptiveAvgPool2d(1))).total.bytes == 1560


def test_elementwise_bytes():
    # relu: read 1536 + write 1536 = 3072
    assert count(nn.Sequential(nn.ReLU())).total.bytes == 3072
    # in place: the same read and write, 3072
    assert count(nn.Sequential(nn.ReLU(inplace=True))).total.bytes == 3072
    # x * x: both operands read, 2 * 1536, + write 1536 = 4608
    assert count(Lambda(lambda x: x * x)).total.bytes == 4608


# --- views and broadcasts -------------------------------------------------------------------------------------


def _views(x):
    y = x.flatten(1).reshape(2, 3, 64).permute(2, 0, 1).transpose(0, 1)
    return y.unsqueeze(0).squeeze(0).view(2, 64, 3).narrow(1, 0, 32)


def test_views_cost_nothing():
    result = count(Lambda(_views))
    assert (result.total.bytes, result.total.flops, result.total.other_flops) == (0, 0, 0)
    assert layer(result, "Lambda").ops == {}


def test_views_after_conv_add_nothing():
    result = count(nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Unflatten(1, (8, 36))))
    # the conv alone: (384 + 216 + 8 + 576) * 4 = 4736
    assert result.total.bytes == 4736
    assert layer(result, "1").bytes == layer(result, "2").bytes == 0


def test_broadcast_add_reads_expanded_operand_once():
    result = count(Lambda(lambda x: x + x[:, :, :1, :1].expand(-1, -1, 8, 8)))
    # read x 1536 + the expanded (2, 3, 1, 1) 6*4 = 24 + write 1536 = 3096
    assert result.total.bytes == 3096


def test_broadcast_add_reads_small_operand_once():
    result = count(Lambda(lambda x: x + x.mean((2, 3), keepdim=True)))
    # mean: read 1536 + write 24 = 1560; add: read 1536 + 24, write 1536 = 3096 -> 4656
    assert result.total.bytes == 1560 + 3096


class AddParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(3, 1, 1))

    def forward(self, x):
        return x + self.shift


def test_broadcast_parameter_is_weight_bytes():
    result = count(AddParameter())
    # read x 1536 + shift 3*4 = 12 + write 1536 = 3084
    assert result.total.bytes == 3084
    assert (result.total.weight_bytes, result.total.activation_bytes) == (12, 3072)


# --- weights vs activations -----------------------------------------------------------------------------------


def test_weight_bytes_are_parameters_and_buffers_read_once():
    model = small_cnn()
    result = count(model)
    # each parameter and float buffer is read once: conv 216 + bn 4*8 = 32 + linear 40 + 5 = 293 -> 1172 bytes
    assert result.total.weight_bytes == 1172
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    assert sum(t.numel() for t in tensors) * 4 == 1172
    assert result.total.weight_bytes + result.total.activation_bytes == result.total.bytes


def test_fp16_halves_every_byte_count():
    # max-pool indices (int64) and norm statistics (fp32 even at fp16) would not shrink with the dtype, but only
    # the first output of a pool or norm is written, so every byte count halves exactly
    def model():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3),  # (2, 8, 6, 6)
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (2, 8, 3, 3)
            nn.GroupNorm(2, 8),
            nn.AvgPool2d(3),  # (2, 8, 1, 1)
            nn.Flatten(),
            nn.LayerNorm(8),
            nn.Linear(8, 5),
        )

    fp32, fp16 = count(model()).total, count(model(), dtype="fp16").total
    assert (fp16.flops, fp16.other_flops) == (fp32.flops, fp32.other_flops)
    for field in ("bytes", "bytes_fused", "weight_bytes", "activation_bytes"):
        assert 2 * getattr(fp16, field) == getattr(fp32, field), field


# --- fused bytes ----------------------------------------------------------------------------------------------


def test_bytes_fused_conv_bn_relu():
    result = count(nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU()))
    # y (2, 8, 6, 6) = 576 elements = 2304 bytes at every stage
    # conv: x 384 + w 216 + y 576 = 1176 * 4 = 4704
    # bn:   y 576 + params 4*8 = 32 + y 576 = 1184 * 4 = 4736
    # relu: y 576 + y 576 = 1152 * 4 = 4608
    assert result.total.bytes == 4704 + 4736 + 4608
    # fused: conv input, weights, bn params and the final output: (384 + 216 + 32 + 576) * 4 = 4832
    assert result.total.bytes_fused == 4832


class Residual(nn.Module):
    """h = conv0(x); y = conv1(h); out = h + y (or y + h): h has two consumers, y one."""

    def __init__(self, h_first: bool = True):
        super().__init__()
        self.h_first = h_first
        self.conv0 = nn.Conv2d(3, 4, 1, bias=False)
        self.conv1 = nn.Conv2d(4, 4, 1, bias=False)

    def forward(self, x):
        h = self.conv0(x)
        y = self.conv1(h)
        return h + y if self.h_first else y + h


@pytest.mark.parametrize("h_first", [True, False], ids=["h+y", "y+h"])
def test_bytes_fused_residual_add_fuses_into_the_latest_producer(h_first):
    result = count(Residual(h_first=h_first))
    # h, y (2, 4, 8, 8) = 512 elements = 2048 bytes
    # conv0: x 384 + w 12 + h 512 = 908 * 4 = 3632; conv1: h 512 + w 16 + y 512 = 1040 * 4 = 4160
    # add: h 512 + y 512 + out 512 = 1536 * 4 = 6144
    assert result.total.bytes == 3632 + 4160 + 6144
    # h and y are equally large: the add fuses into conv1, the producer of y (the most recent), whatever the
    # operand order; y has no other consumer, so its write and the add's read of it go: 2 * 2048 = 4096
    assert result.total.bytes_fused == 3632 + 4160 + 6144 - 4096


def test_bytes_fused_broadcast_add_with_shared_input():
    result = count(nn.Sequential(nn.Conv2d(3, 3, 1), Lambda(lambda y: y + y.mean((2, 3), keepdim=True))))
    # conv: x 384 + w 9 + b 3 + y 384 = 780 * 4 = 3120; mean: 1536 + 24 = 1560; add: 1536 + 24 + 1536 = 3096
    assert result.total.bytes == 3120 + 1560 + 3096
    # the add's largest input is y (1536 > 24), which also feeds the mean: only the add's read of y (1536) is saved
    assert result.total.bytes_fused == 3120 + 1560 + 3096 - 1536


def test_bytes_fused_does_not_depend_on_operand_order():
    assert count(Residual(h_first=True)).total.bytes_fused == count(Residual(h_first=False)).total.bytes_fused


def test_bytes_fused_keeps_network_outputs():
    result = count(Lambda(lambda x: (x * 2.0, (x * 2.0).relu())))
    # mul 1: x 1536 + out 1536 (a network output); mul 2: the same; relu: 1536 + 1536 -> 9216
    # fusing: mul 1 and 2 read the network input (nothing to fuse into); relu saves the read and the write of
    # the second mul's output (one consumer, not an output): 2 * 1536 = 3072
    assert result.total.bytes == 9216
    assert result.total.bytes_fused == 9216 - 3072


# --- batch scaling --------------------------------------------------------------------------------------------


def test_batch_scaling_is_exact():
    one, eight = count(small_cnn(), batch=1).total, count(small_cnn(), batch=8).total
    assert eight.flops == 8 * one.flops
    assert eight.other_flops == 8 * one.other_flops
    assert eight.activation_bytes == 8 * one.activation_bytes
    assert eight.bytes_fused - eight.weight_bytes == 8 * (one.bytes_fused - one.weight_bytes)
    assert eight.weight_bytes == one.weight_bytes
    # conv 2 * (8*8*8 = 512 outputs) * 27 = 27648; linear 2 * 8 * 5 = 80 -> 27728 per image
    assert one.flops == 27728


# --- count() leaves the caller's module alone -------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_count_does_not_change_the_module(device):
    model = small_cnn().to(device).train()
    before = {name: (t.device, t.dtype, t.clone()) for name, t in model.state_dict().items()}
    result = count(model, dtype="fp16")
    assert result.traced_on == "meta"
    # still in training mode, and every parameter and buffer keeps its device, dtype and (on the CPU) its values:
    # no .eval(), no .to(fp16), no running-statistics update, no num_batches_tracked increment
    assert all(m.training for m in model.modules())
    after = model.state_dict()
    assert list(after) == list(before)
    for name, (dev, dtype, values) in before.items():
        assert (after[name].device, after[name].dtype) == (dev, dtype), name
        if device == "cpu":
            assert torch.equal(after[name], values), name


# --- meta-device tracing agrees with CPU tracing ---------------------------------------------------------------


def _conv_bn_relu() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())


def test_meta_module_is_traced_in_eval_mode(monkeypatch):
    cpu, on_meta = count_on_cpu(_conv_bn_relu(), monkeypatch), count(_conv_bn_relu().to("meta"))
    assert (cpu.traced_on, on_meta.traced_on) == ("cpu", "meta")
    # inference batch norm, as on the CPU: no aten.add_ on num_batches_tracked, no batch statistics
    assert layer(on_meta, "1").ops == layer(cpu, "1").ops
    assert "aten.add_" not in layer(on_meta, "1").ops
    # y (2, 8, 8, 8) = 1024: batch norm 2 * 1024 = 2048 + relu 1024 = 3072
    assert on_meta.total.other_flops == cpu.total.other_flops == 3072


class PermutedLayerNorm(nn.Module):
    """ConvNeXt-style: channels-last layer norm, then a reshape that is a view of a contiguous tensor."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).reshape(x.shape[0], -1)


MATCH_MODELS = {
    "conv_bn_relu": _conv_bn_relu,
    "small_cnn": small_cnn,  # batch norm, max pool (indices), adaptive pool
    "permuted_layer_norm": PermutedLayerNorm,
    "group_and_instance_norm": lambda: nn.Sequential(nn.GroupNorm(1, 3), nn.InstanceNorm2d(3, affine=True)),
}


@pytest.mark.parametrize("name", list(MATCH_MODELS))
def test_meta_trace_matches_cpu_trace(name, monkeypatch):
    make = MATCH_MODELS[name]
    cpu = count_on_cpu(make(), monkeypatch)
    on_meta, meta_module = count(make()), count(make().to("meta"))
    assert (cpu.traced_on, on_meta.traced_on, meta_module.traced_on) == ("cpu", "meta", "meta")
    # the same ops, costs and bytes: saved statistics and indices, whose shapes differ between the meta and the
    # CPU kernels (batch norm's save_mean is (C,) on meta and (0,) on the CPU), are not written
    assert on_meta.total == meta_module.total == cpu.total
    assert [lay.to_dict() for lay in on_meta.layers] == [lay.to_dict() for lay in cpu.layers]


@pytest.mark.parametrize("on_meta", [False, True], ids=["cpu", "meta"])
def test_permuted_layer_norm_bytes(on_meta, monkeypatch):
    result = count(PermutedLayerNorm().to("meta")) if on_meta else count_on_cpu(PermutedLayerNorm(), monkeypatch)
    assert result.traced_on == ("meta" if on_meta else "cpu")
    # x 384 + weight, bias 6 + y 384 -> 774 * 4 = 3096 (mean, rstd (2, 8, 8, 1) are not written); the layer norm
    # output is contiguous on meta as on the CPU, so the reshape is a view and records no aten.clone
    assert result.total.bytes == 3096
    assert layer(result, "norm").ops == {"aten.native_layer_norm": 1}
    assert [lay.name for lay in result.layers] == ["norm"]


class _DataDependent(nn.Module):
    """Reads a value (``.item()``), which the meta device cannot: tracing falls back to the CPU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return y * 2 if y.sum().item() > -1e30 else y


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_data_dependent_module_falls_back_to_cpu(device):
    result = count(_DataDependent().to(device), batch=2, resolution=8)
    assert result.traced_on == "cpu"
    # conv 3->4 1x1 on 2x8x8: 2 * (2*4*8*8) * 3 = 3072 flops
    assert result.total.flops == 3072
