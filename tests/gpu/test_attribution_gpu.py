"""Attribution on the GPU (run on the lent H200; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from utilscope.attribute.attribution import attribute
from utilscope.attribute.explain import explain

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_graph_backend_layer_times_cover_the_kernels():
    a = attribute("torchvision:resnet18", batch=32, precision="fp16", backend="graph")
    assert a.attributed_ms == pytest.approx(a.kernel_time_ms, rel=0.10)
    assert all(layer.kernel_count > 0 for layer in a.layers if layer.op_class.endswith("conv"))
    gap = explain(a).gap
    assert gap["measured_utilization"] <= gap["unfused_utilization"] <= gap["fused_utilization"]


def test_inference_backend_regions_follow_the_convolutions():
    a = attribute("torchvision:resnet18", batch=32, precision="fp16", backend="inference")
    assert not any("grouped by kernel family" in note for note in a.notes), a.notes
    convs = [layer for layer in a.layers if layer.flops > 0]
    assert len(a.points) >= len(convs) and a.attributed_ms == pytest.approx(a.kernel_time_ms)
    assert all(layer.region for layer in a.layers[1:])
