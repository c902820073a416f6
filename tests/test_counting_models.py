"""Counting real zoo models: torchvision's published GMACs, timm coverage, an independent counter, scaling laws."""

from __future__ import annotations

import pytest
import torch
import torchvision.models as tvm
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from utilscope.counting import count
from utilscope.models import zoo

# torchvision's num_params for googlenet is of the model without its auxiliary classifiers (the weights
# builder drops them); built with weights=None they are there, and they hold parameters though eval never runs them.
_PARAMS_EXCEPTIONS = {"googlenet"}


@pytest.mark.slow
@pytest.mark.parametrize("name", tvm.list_models(module=tvm))
def test_torchvision_flops_match_published_gmacs(name):
    """Every weights entry's ``_ops`` (GMACs at its crop size) is 2e9 x our flops, within 1% or the rounding."""
    results = {}
    for entry in tvm.get_model_weights(name):
        crop = entry.transforms.keywords["crop_size"]
        if crop not in results:
            results[crop] = count(f"torchvision:{name}", batch=1, resolution=crop)
        result = results[crop]
        assert result.unsupported == {}
        gmacs, published = result.total.flops / 2e9, entry.meta["_ops"]
        tolerance = max(0.01 * published, 0.005 + 1e-9)  # the figures are rounded to 2 or 3 decimals
        assert abs(gmacs - published) <= tolerance, f"{entry} at {crop}px: {gmacs:.4f} GMACs vs {published}"
        if name not in _PARAMS_EXCEPTIONS:
            assert result.total.params == entry.meta["num_params"], f"{entry}"


TIMM_FAMILIES = {
    "resnet": ["resnet18", "resnet50", "resnet50d", "resnet26t", "resnet50_gn", "resnetv2_50"],
    "regnet": ["regnetx_002", "regnety_008", "regnetz_b16"],
    "efficientnet": ["efficientnet_b0", "efficientnet_es", "efficientnet_lite0", "efficientnetv2_rw_s"],
    "mobilenetv2": ["mobilenetv2_100", "mobilenetv2_110d"],
    "mobilenetv3": ["mobilenetv3_large_100", "mobilenetv3_small_050", "mobilenetv3_rw"],
    "mnasnet": ["mnasnet_100", "mnasnet_small"],
    "convnext": ["convnext_atto", "convnext_tiny", "convnextv2_atto"],
    "repvgg": ["repvgg_a0", "repvgg_b1g4"],
    "dla": ["dla34", "dla60x", "dla46_c"],
    "hrnet": ["hrnet_w18_small", "hrnet_w18_small_v2"],
}
TIMM_MODELS = [(family, name) for family, names in TIMM_FAMILIES.items() for name in names]


def test_timm_representatives_exist():
    """The handful per family are real members of it: a rename in timm fails here, not as an unknown model."""
    import timm

    for family, names in TIMM_FAMILIES.items():
        assert set(names) <= set(timm.list_models(f"{family}*")), family


@pytest.mark.slow
@pytest.mark.parametrize(("family", "name"), TIMM_MODELS, ids=[name for _, name in TIMM_MODELS])
def test_timm_cnn_families_have_no_unsupported_ops(family, name):
    result = count(f"timm:{name}")
    assert result.unsupported == {}
    assert result.total.flops > 0 and result.total.params > 0


def _flop_counter_mode_flops(text: str) -> tuple[int, int]:
    """(FlopCounterMode's flops of the real model on the CPU at batch 1, the resolution it ran at)."""
    spec = zoo.parse_spec(text)
    resolution = zoo.native_resolution(spec)
    model = zoo.build_model(spec, resolution)
    example = torch.randn(1, 3, resolution, resolution, generator=torch.Generator().manual_seed(0))
    # FlopCounterMode has no formula for the CPU flash-attention kernel: the math backend runs it as bmm's
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(example)
    return counter.get_total_flops(), resolution


@pytest.mark.parametrize(
    "text",
    [
        "timm:resnet50",
        "timm:efficientnet_b0",
        "timm:mobilenetv3_large_100",
        "timm:regnety_008",
        "timm:convnext_atto",
        "timm:dla34",
        "timm:hrnet_w18_small",
        "timm:vit_tiny_patch16_224",
        "torchvision:mobilenet_v3_small",
    ],
)
def test_flops_agree_with_flop_counter_mode(text):
    expected, resolution = _flop_counter_mode_flops(text)
    result = count(text, batch=1, resolution=resolution)
    assert result.total.flops == pytest.approx(expected, rel=0.005)


SCALING_MODELS = [
    "torchvision:resnet18",
    "torchvision:mobilenet_v3_small",
    "torchvision:efficientnet_b0",
    "torchvision:regnet_x_400mf",
    "torchvision:densenet121",
    "timm:convnext_atto",
]


@pytest.fixture(scope="module")
def counts():
    """Counts, cached across the tests of this module."""
    cache: dict[tuple, object] = {}

    def get(name: str, batch: int = 1, dtype: str = "fp32", resolution: int = 64):
        key = (name, batch, dtype, resolution)
        if key not in cache:
            cache[key] = count(name, batch=batch, resolution=resolution, dtype=dtype)
        return cache[key].total

    return get


@pytest.mark.parametrize("name", SCALING_MODELS)
def test_batch_scaling_is_exact(name, counts):
    one, eight = counts(name), counts(name, batch=8)
    assert eight.flops == 8 * one.flops
    assert eight.other_flops == 8 * one.other_flops
    assert eight.activation_bytes == 8 * one.activation_bytes
    assert eight.weight_bytes == one.weight_bytes
    assert eight.params == one.params


@pytest.mark.parametrize("name", SCALING_MODELS)
def test_fp16_halves_bytes_and_keeps_flops(name, counts):
    fp32, fp16 = counts(name), counts(name, dtype="fp16")
    assert (fp16.flops, fp16.other_flops, fp16.params) == (fp32.flops, fp32.other_flops, fp32.params)
    for field in ("bytes", "bytes_fused", "weight_bytes", "activation_bytes"):
        assert 2 * getattr(fp16, field) == getattr(fp32, field), field


# SDPA is recorded as one fused attention op on the meta device, so activation bytes scale exactly too
VIT = "timm:vit_tiny_patch16_224"


def test_vit_flops_scale_with_batch_and_ignore_dtype(counts):
    one, eight, half = counts(VIT, resolution=224), counts(VIT, 8, resolution=224), counts(VIT, 1, "fp16", 224)
    assert (eight.flops, eight.other_flops) == (8 * one.flops, 8 * one.other_flops)
    assert (half.flops, half.other_flops) == (one.flops, one.other_flops)
    assert eight.weight_bytes == one.weight_bytes == 2 * half.weight_bytes


def test_vit_activation_bytes_halve_in_fp16(counts):
    assert 2 * counts(VIT, 1, "fp16", 224).activation_bytes == counts(VIT, resolution=224).activation_bytes


def test_vit_activation_bytes_scale_with_batch(counts):
    assert counts(VIT, 8, resolution=224).activation_bytes == 8 * counts(VIT, resolution=224).activation_bytes
