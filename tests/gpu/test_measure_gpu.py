"""GPU-only behaviour of the measurement stack, run on the lent H200 (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from utilscope.measure import profile
from utilscope.measure.backends import BACKENDS
from utilscope.measure.precision import Precision, math_mode
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import make_input, prepare_module, prepare_sweep, run_sweep
from utilscope.models import zoo
from utilscope.models.sources import IMAGE_CHANNELS

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _randomize_batchnorm(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics, so that folding BatchNorm into convolutions is really exercised."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            c = module.num_features
            module.running_mean.copy_(torch.randn(c, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(c, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(c, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(c, generator=generator) * 0.1)
    return model


@pytest.fixture(scope="module")
def resnet18_fp16():
    spec = zoo.parse_spec("torchvision:resnet18")
    with torch.no_grad():
        model = _randomize_batchnorm(zoo.build_model(spec, 224))
    module = prepare_module(model, torch.device("cuda"), Precision.FP16, channels_last=True)
    x = make_input(8, 224, torch.device("cuda"), Precision.FP16, channels_last=True, channels=IMAGE_CHANNELS)
    with math_mode(Precision.FP16):
        reference = BACKENDS["eager"].prepare(module, x).run().float().clone()
    return module, x, reference


@pytest.mark.parametrize("backend", ["graph", "compile", "inference"])
def test_backend_computes_the_same_function_as_eager(backend, resnet18_fp16):
    """Folding BN, compiling and graph capture must not change the outputs beyond fp16 rounding."""
    module, x, reference = resnet18_fp16
    with math_mode(Precision.FP16):
        prepared = BACKENDS[backend].prepare(module, x)
        out = prepared.run().float().clone()
    relative_error = ((out - reference).norm() / reference.norm()).item()
    assert relative_error < 1e-2, f"{backend}: ‖out − eager‖/‖eager‖ = {relative_error:.2e}"
    assert prepared.graph == (backend in ("graph", "inference")), prepared.notes


def test_profile_rows_on_gpu():
    # the default GPU plan: >= 1 s of timed work, so that NVML readings remain after its settling time
    result = profile("torchvision:resnet18", batches=[1, 32], precision="fp16", backend="graph")
    assert [row.status for row in result.rows] == ["ok", "ok"]
    for row in result.rows:
        assert 0 < row.utilization < 1 and 0 < row.utilization_vs_ceiling < 1.2
        assert row.peak_source.startswith("datasheet") and row.cuda_graph
        assert row.nvml_util is not None and 0 <= row.nvml_util <= 100
    assert result.rows[1].samples_per_s > result.rows[0].samples_per_s
    assert result.environment["driver"] is not None and result.environment["device_uuid"].startswith("GPU-")


def test_oom_is_a_row_and_the_sweep_goes_on():
    """A batch far too large for the GPU's memory is recorded as oom; the next batch size still runs."""
    # batch 16384 at 512 px: the first conv's fp16 output alone is 16384*64*256*256*2 B = 137 GB
    result = profile("torchvision:resnet18", batches=[16384, 1], precision="fp16", backend="eager", resolution=512)
    assert [row.status for row in result.rows] == ["oom", "ok"]


def test_nvml_samples_the_gpu_torch_runs_on():
    import pynvml

    from utilscope.measure.nvml import nvml_handle

    pynvml.nvmlInit()
    for index in range(torch.cuda.device_count()):
        handle = nvml_handle(pynvml, torch.device("cuda", index))
        uuid = pynvml.nvmlDeviceGetUUID(handle)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        assert uuid == f"GPU-{torch.cuda.get_device_properties(index).uuid}"


def test_depthwise_heuristic_sweep_on_gpu():
    """Autotuning all but the depthwise convs (one primed pass, then the CUDA graph): rows are ok and say so."""
    request = MeasureRequest(
        "torchvision:mobilenet_v3_small", "fp16", "graph", cudnn=CudnnSettings(depthwise_heuristic=True)
    )
    sweep = prepare_sweep(request)
    rows = run_sweep(sweep, [1, 8])
    assert [row.status for row in rows] == ["ok", "ok"] and all(row.cuda_graph for row in rows)
    assert rows[1].samples_per_s > rows[0].samples_per_s
    assert sweep.environment["cudnn_depthwise_heuristic"] is True


def test_inference_backend_folds_timm_batchnormact_on_the_gpu():
    """timm's BatchNormAct2d (a functional F.batch_norm) and Conv2dSame are folded on the device, under the
    sweeps' math mode, with nothing left unfolded: the timm inference rows of session 30 onwards rely on it."""
    from utilscope.measure import folding
    from utilscope.measure.backends import fold_batchnorm

    model = zoo.build_model(zoo.parse_spec("timm:tf_mobilenetv3_small_minimal_100"), 224)
    module = prepare_module(model, torch.device("cuda"), Precision.FP16, channels_last=True)
    x = make_input(4, 224, torch.device("cuda"), Precision.FP16, channels_last=True, channels=IMAGE_CHANNELS)
    with math_mode(Precision.FP16):
        folded, notes = fold_batchnorm(module, x)
    assert notes == () and folding.count_batchnorm(module) > 0 and folding.count_batchnorm(folded) == 0
    with torch.no_grad():
        expected, actual = module(x).float(), folded(x).float()
    assert float((expected - actual).abs().max()) <= 0.05 * float(expected.abs().max())  # fp16 rounding


@pytest.mark.parametrize("backend", ["eager", "graph", "compile"])
def test_amp_runs_fp32_weights_under_autocast_like_timm(backend):
    """amp: fp32 weights and input, convolutions autocast to fp16 on every call (also when replayed or compiled),
    utilization against the fp16 tensor peak; the output matches an fp32 run to fp16 rounding."""
    spec = zoo.parse_spec("torchvision:resnet18")
    module = prepare_module(_randomize_batchnorm(zoo.build_model(spec, 64)), torch.device("cuda"), Precision.AMP, False)
    x = make_input(4, 64, torch.device("cuda"), Precision.AMP, channels_last=False, channels=IMAGE_CHANNELS)
    assert next(module.parameters()).dtype == torch.float32 and x.dtype == torch.float32
    with math_mode(Precision.FP32):
        reference = module(x).clone()
    with math_mode(Precision.AMP):
        out = BACKENDS[backend].prepare(module, x).run().clone()
    assert out.dtype == torch.float16  # the classifier's matmul ran in fp16
    assert ((out.float() - reference).norm() / reference.norm()).item() < 1e-2
    result = profile("torchvision:resnet18", batches=[8], precision="amp", backend=backend, channels_last=False)
    row = result.rows[0]
    assert row.status == "ok" and row.peak_tflops == pytest.approx(989.4) and result.precision == "amp"
