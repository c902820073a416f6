"""Measurement settings: CudnnSettings and MeasureRequest are checked once, when made, and applied as asked."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import ConvRecorder
from torch import nn

from utilscope.errors import UsageError
from utilscope.measure.settings import CudnnSettings, MeasureRequest, as_request, timing_window
from utilscope.torch_flags import heuristic_for_depthwise

HAS_CUDNN = torch.backends.cudnn.is_available()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"benchmark_limit": -1}, "must be 0 (all algorithms) or more, got -1"),
        ({"benchmark_limit": 2.5}, "must be 0 (all algorithms) or more"),
        ({"benchmark": False, "benchmark_limit": 3}, "--no-cudnn-benchmark turns off: give one"),
        ({"benchmark": False, "depthwise_heuristic": True}, "--no-cudnn-benchmark turns off: give one"),
        ({"benchmark": "yes"}, "must be true or false"),
    ],
)
def test_cudnn_settings_refuse_what_cannot_be_measured(kwargs, message):
    with pytest.raises(UsageError) as error:
        CudnnSettings(**kwargs)
    assert message in str(error.value)


def test_cudnn_settings_labels_and_dict_round_trip():
    cases = {
        CudnnSettings(): "",
        CudnnSettings(benchmark=False): "cudnn.benchmark off",
        CudnnSettings(benchmark_limit=3): "cudnn.benchmark_limit 3",
        CudnnSettings(depthwise_heuristic=True): "depthwise heuristic",
        CudnnSettings(True, 0, True): "cudnn.benchmark_limit 0 · depthwise heuristic",
    }
    for settings, label in cases.items():
        assert settings.label() == label
        assert CudnnSettings.from_dict(settings.to_dict()) == settings
    assert CudnnSettings.from_dict({}) == CudnnSettings()  # an environment recorded before the settings existed


def test_depthwise_heuristic_applies_to_backends_running_the_models_convs():
    CudnnSettings(depthwise_heuristic=True).check_backend("graph")
    with pytest.raises(UsageError, match="not inference"):
        CudnnSettings(depthwise_heuristic=True).check_backend("inference")
    with pytest.raises(UsageError, match="not compile"):
        MeasureRequest("m", backend="compile", cudnn=CudnnSettings(depthwise_heuristic=True))


@pytest.mark.skipif(not HAS_CUDNN, reason="cuDNN's benchmark_limit needs cuDNN")
def test_applied_sets_autotuning_and_its_limit_inside_only(cudnn_flags):
    torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit = False, 10
    model = nn.Conv2d(3, 4, 3)
    with CudnnSettings(benchmark_limit=3).applied(), ConvRecorder() as recorder:
        model(torch.randn(1, 3, 8, 8))
    assert recorder.calls == [(1, True, 3)]
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit) == (False, 10)
    with pytest.raises(RuntimeError), CudnnSettings(benchmark=True).applied():
        model(torch.randn(1, 5, 8, 8))  # restored even when the block raises
    assert torch.backends.cudnn.benchmark is False


def test_applied_with_the_depthwise_exception_runs_depthwise_convs_without_autotuning(cudnn_flags):
    """One pass inside ``applied(module, x)`` runs the depthwise conv with benchmark off, the others on."""
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 8, 3, groups=2))
    with ConvRecorder() as recorder, CudnnSettings(depthwise_heuristic=True).applied(model, torch.randn(1, 3, 8, 8)):
        pass
    assert [(groups, benchmark) for groups, benchmark, _ in recorder.calls] == [(1, True), (8, False), (2, True)]
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in model)


def test_heuristic_for_depthwise_restores_hooks_and_flags_when_a_conv_raises(cudnn_flags):
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 3, groups=8))
    torch.backends.cudnn.benchmark = True
    with pytest.raises(RuntimeError), heuristic_for_depthwise(model):
        model(torch.randn(1, 5, 8, 8))  # a wrong channel count: the first conv raises
    with pytest.raises(RuntimeError), heuristic_for_depthwise(model[1:]):
        model[1:](torch.randn(1, 4, 8, 8))  # the depthwise conv itself raises
    assert torch.backends.cudnn.benchmark and not any(m._forward_pre_hooks or m._forward_hooks for m in model)


@pytest.mark.parametrize("peak", [math.nan, math.inf, -math.inf, 0.0, -1.0, True])
def test_a_request_refuses_a_peak_that_is_not_a_positive_finite_number(peak):
    with pytest.raises(UsageError, match="--peak must be a positive, finite number"):
        MeasureRequest("torchvision:resnet18", peak_tflops=peak)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "tensorrt"}, "unknown backend 'tensorrt'"),
        ({"precision": "fp8"}, "unknown precision 'fp8'"),
        ({"resolution": 0}, "resolution must be between 8 and"),
        ({"ceilings": False}, "ceilings must be measured Ceilings or one of"),
        ({"cudnn": {"benchmark": False}}, "cudnn must be CudnnSettings"),
    ],
)
def test_a_request_is_checked_when_made(kwargs, message):
    with pytest.raises(UsageError) as error:
        MeasureRequest("torchvision:resnet18", **kwargs)
    assert message in str(error.value)


def test_as_request_takes_a_request_or_a_model_and_fields():
    request = MeasureRequest("a.py:make", backend="eager", device="cpu")
    assert as_request(request) is request
    assert as_request(request, backend="graph") == MeasureRequest("a.py:make", device="cpu")
    assert as_request("a.py:make", backend="eager", device="cpu") == request


def test_timing_window():
    assert timing_window(None) is None
    plan = timing_window(500)
    assert (plan.warmup_ms, plan.min_total_ms) == (100.0, 500.0)
    assert timing_window(40).warmup_ms == 40.0  # the warm-up never exceeds the window
    for bad in (0, -5, math.nan, math.inf):
        with pytest.raises(UsageError, match="--min-time-ms must be"):
            timing_window(bad)
