"""Where the GPU time of one backend goes: CUDA kernel time by kernel family, from torch.profiler.

Usage: python benchmarks/kernel_breakdown.py [MODEL] [BATCH] [BACKEND]
Families (utilscope.attribute.kernels): triton (inductor's fused kernels), convolution (cuDNN/CUTLASS), gemm,
attention, batchnorm, elementwise (PyTorch's own), other. Prints total kernel time per inference and each
family's share.
"""

from __future__ import annotations

import sys
from collections import Counter

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from utilscope.attribute.kernels import kernel_family
from utilscope.measure.backends import get_backend
from utilscope.measure.precision import Precision, math_mode
from utilscope.measure.sweep import make_input, prepare_module
from utilscope.models import zoo


def main(model: str = "torchvision:resnet50", batch: str = "256", backend: str = "inference", iters: int = 10) -> None:
    spec, device = zoo.parse_spec(model), torch.device("cuda")
    resolution = zoo.native_resolution(spec)
    built = zoo.build_model(spec, resolution)
    module = prepare_module(built, device, Precision.FP16, channels_last=True)
    channels = zoo.input_channels(built, spec)
    x = make_input(int(batch), resolution, device, Precision.FP16, channels_last=True, channels=channels)
    with math_mode(Precision.FP16):
        run = get_backend(backend).prepare(module, x).run
        for _ in range(5):
            run()
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                run()
            torch.cuda.synchronize()
    per_family_us, kernels = Counter(), Counter()
    for event in prof.key_averages():
        if event.device_type.name == "CUDA" and event.device_time_total > 0:
            per_family_us[kernel_family(event.key)] += event.device_time_total / iters
            kernels[kernel_family(event.key)] += event.count // iters
    total_us = sum(per_family_us.values())
    print(f"{model} batch {batch} {backend} fp16: {total_us / 1e3:.3f} ms of kernel time per inference")
    for name, us in per_family_us.most_common():
        print(f"  {name:12s} {us / 1e3:8.3f} ms {us / total_us:6.1%}  ({kernels[name]} kernels)")


if __name__ == "__main__":
    main(*sys.argv[1:])
