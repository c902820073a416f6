"""The input's channels (``zoo.input_channels``, the rule of ``models.sources``): a zoo's model is fed RGB images; a
model of the user's own as many channels as its first 2-D convolution expects; a model file the channels its input
records. Single layers are counted, measured and predicted through it."""

from __future__ import annotations

import json

import pytest
import torch
from model_file_helpers import CONV_OUT, SIDE, onnx_graph
from torch import nn

import utilscope.api as api
from utilscope.advise.rewrites import check_inputs
from utilscope.cli import main
from utilscope.counting import count
from utilscope.models import zoo
from utilscope.models.sources import IMAGE_CHANNELS, first_conv_channels, module_channels

CONVS = """
from torch import nn

def conv():
    return nn.Conv2d(64, 128, 3, padding=1, bias=False)

def pointwise():
    return nn.Conv2d(32, 16, 1, stride=2, bias=False)

def small():
    return nn.Conv2d(32, 32, 3, padding=1, bias=False)

def large():
    return nn.Conv2d(256, 256, 3, padding=1, bias=False)

def norm_first():
    return nn.Sequential(nn.BatchNorm2d(24), nn.Conv2d(24, 8, 3), nn.Conv2d(8, 8, 3))

def no_conv():
    return nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1))
"""


@pytest.fixture(scope="module")
def convs(write_factory) -> str:
    return str(write_factory(CONVS, "convs"))


def test_a_factory_conv_is_fed_the_channels_it_expects(convs):
    result = count(f"{convs}:conv", batch=2, resolution=8)
    # 3x3 conv 64 -> 128, padding 1, 8x8 output, batch 2: 2 * (2*128*8*8) * (64*3*3) = 18_874_368
    assert result.total.flops == 2 * 2 * 128 * 8 * 8 * 64 * 9
    assert result.input_channels == 64 and result.layers[0].input_shapes == [[2, 64, 8, 8]]
    assert result.to_dict()["input_channels"] == 64


def test_a_strided_pointwise_conv_counts_its_output_pixels(convs):
    result = count(f"{convs}:pointwise", batch=1, resolution=8)
    # 1x1 conv 32 -> 16, stride 2: 4x4 output: 2 * (16*4*4) * 32 = 16_384
    assert result.total.flops == 2 * 16 * 4 * 4 * 32
    assert result.layers[0].output_shapes == [[1, 16, 4, 4]]


def test_the_first_conv_in_registration_order_sets_the_channels_else_rgb(convs):
    assert count(f"{convs}:norm_first", resolution=8).input_channels == 24  # a norm before the conv reads them too
    assert count(f"{convs}:no_conv", resolution=8).input_channels == IMAGE_CHANNELS
    assert module_channels(nn.ConvTranspose2d(10, 4, 2)) == 10
    assert module_channels(nn.Sequential(nn.LazyConv2d(8, 3), nn.Conv2d(8, 8, 3))) == 8  # a lazy conv has none yet


def test_a_torchscript_modules_first_conv_gives_the_channels_scripted_or_traced():
    conv = nn.Sequential(nn.Conv2d(12, 4, 3))
    with pytest.warns(FutureWarning):  # torch deprecates TorchScript
        scripted, traced = torch.jit.script(conv), torch.jit.trace(conv, torch.randn(1, 12, 8, 8))
    assert first_conv_channels(scripted) == first_conv_channels(traced) == 12  # traced: from its weight


def test_zoo_models_take_rgb_images_whatever_module_they_are_given():
    assert zoo.input_channels(nn.Conv2d(64, 64, 1), zoo.parse_spec("torchvision:resnet18")) == IMAGE_CHANNELS
    assert count("torchvision:resnet18", resolution=32).input_channels == IMAGE_CHANNELS


def test_a_module_given_to_the_api_is_fed_its_own_channels():
    result = api.count(nn.Conv2d(48, 8, 1, bias=False), batch=1, resolution=4)
    assert result.input_channels == 48 and result.total.flops == 2 * 8 * 4 * 4 * 48  # 2 * (8*4*4) * 48


@pytest.mark.parametrize("dims", [(1, 16, SIDE, SIDE), (1, "C", SIDE, SIDE)], ids=["fixed", "free"])
def test_an_onnx_file_is_fed_its_inputs_channels(tmp_path, dims):
    path = onnx_graph(tmp_path / "sixteen.onnx", dims=dims, channels=16)  # free: its conv's 16
    result = count(str(path), resolution=SIDE)
    assert result.input_channels == 16
    # conv 16 -> 4, 3x3, padding 1, at 16x16, batch 1: 2 * (4*16*16) * (16*3*3)
    assert result.total.flops == 2 * CONV_OUT * SIDE * SIDE * 16 * 9


def test_a_torch_export_file_is_fed_its_inputs_channels(tmp_path):
    path = tmp_path / "five.pt2"
    torch.export.save(torch.export.export(nn.Conv2d(5, 4, 3, bias=False), (torch.randn(1, 5, 8, 8),)), path)
    result = count(str(path))  # the file fixes its input: 1 x 5 x 8 x 8
    # conv 5 -> 4, 3x3, no padding: 6x6 output: 2 * (4*6*6) * (5*3*3)
    assert (result.input_channels, result.total.flops) == (5, 2 * 4 * 6 * 6 * 5 * 9)


def test_the_count_says_a_non_rgb_input_in_its_title_and_json(convs, capsys):
    assert main(["count", f"{convs}:conv", "--res", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["input_channels"] == 64
    assert main(["count", f"{convs}:conv", "--res", "8"]) == 0
    assert "8px · 64 channels" in capsys.readouterr().out


def test_a_profile_on_the_cpu_feeds_a_single_conv_its_channels(convs):
    result = api.profile(f"{convs}:small", [1], device="cpu", resolution=8, ceilings="skip")
    assert result.input_channels == 32 and [row.status for row in result.rows] == ["ok"]


def test_the_advisors_check_inputs_have_the_models_channels():
    assert {tuple(x.shape[1:]) for x in check_inputs(8, 64)} == {(64, 8, 8)}


@pytest.fixture(scope="module")
def conv_predictions(convs):
    """A small and a large 3x3 conv predicted on the V100 in fp32, NCHW (the shipped profile, by transfer)."""
    specs = [f"{convs}:small", f"{convs}:large"]
    return api.predict(specs, "v100_sxm2", batches=(1, 64), precision="fp32", channels_last=False, resolution=56)


def test_a_single_conv_is_predicted_with_its_channels(conv_predictions):
    frame = conv_predictions.to_frame()
    assert conv_predictions.failures == [] and len(frame) == 4
    assert (frame["samples_per_s"] > 0).all() and set(frame["input_channels"]) == {32, 256}
    latency = frame.assign(size=frame["model"].str.contains(":large")).set_index(["size", "batch"])["latency_ms"]
    assert all(latency[True, batch] > latency[False, batch] for batch in (1, 64))  # 64x the FLOPs: slower
