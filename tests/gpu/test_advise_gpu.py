"""``advise`` on the GPU (run on the lent H200; skipped without CUDA): an unaligned network gains from padding."""

from __future__ import annotations

import pytest
import torch

from utilscope.advise.advisor import AdviseRequest, advise
from utilscope.measure.settings import MeasureRequest

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# 3x3 convs of 60 channels at 56x56: cuDNN runs them 1.35-3.6x slower than the same convs padded to 64 (issue #18)
UNALIGNED = """
import torch.nn as nn
RESOLUTION = 56


def make():
    layers = [nn.Conv2d(3, 60, 3, padding=1), nn.BatchNorm2d(60), nn.ReLU()]
    for _ in range(6):
        layers += [nn.Conv2d(60, 60, 3, padding=1), nn.BatchNorm2d(60), nn.ReLU()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(60, 10))
"""


def test_padding_an_unaligned_network_is_exact_and_faster_on_the_gpu(write_factory):
    spec = f"{write_factory(UNALIGNED, 'unaligned_gpu')}:make"
    advice = advise(AdviseRequest(MeasureRequest(spec), (128,), backends=("graph",), precisions=("fp16",), ladder=()))
    pad = next(t for t in advice.trials if t.change == "pad channels to 8")
    assert pad.status == "ok" and pad.exact and pad.max_rel_diff <= 1e-4
    assert pad.speedup > 1.1, advice.trials
    assert advice.gpu_measurement and advice.best[128].speedup >= pad.speedup
