"""Experiment: inductor options on top of the `inference` backend (resnet50, fp16, one batch size).

Usage: python benchmarks/inference_variants.py [MODEL] [BATCH]
Prints latency and utilization per variant; used to choose the `inference` backend's settings.
"""

from __future__ import annotations

import sys

import torch

from utilscope import hardware
from utilscope.counting import count
from utilscope.hardware.utilization import achieved_tflops, utilization
from utilscope.measure.backends import BACKENDS
from utilscope.measure.precision import Precision, math_mode
from utilscope.measure.sweep import GPU_PLAN, make_input, prepare_module
from utilscope.measure.timing import CudaClock, measure
from utilscope.models import zoo

VARIANTS = {
    "default": {},
    "conv_1x1_as_mm": {"conv_1x1_as_mm": True},
    "coordinate_descent_tuning": {"coordinate_descent_tuning": True},
}


def main(model: str = "torchvision:resnet50", batch: str = "256") -> None:
    spec, device = zoo.parse_spec(model), torch.device("cuda")
    resolution = zoo.native_resolution(spec)
    flops = count(spec.id, resolution=resolution, dtype="fp16").total.flops
    peak = hardware.detect(torch.cuda.get_device_name()).peak_tflops("fp16")
    built = zoo.build_model(spec, resolution)
    module = prepare_module(built, device, Precision.FP16, channels_last=True)
    channels = zoo.input_channels(built, spec)
    x = make_input(int(batch), resolution, device, Precision.FP16, channels_last=True, channels=channels)
    for name, options in VARIANTS.items():
        with math_mode(Precision.FP16), torch._inductor.config.patch(options):
            prepared = BACKENDS["inference"].prepare(module, x)
            prepared.run()  # compiles with the options in force
            stats = measure(prepared.run, CudaClock(), GPU_PLAN)
        tflops = achieved_tflops(flops * int(batch), stats.median_ms)
        line = f"{model} b{batch} {name:28s} {stats.median_ms:8.3f} ms {tflops:7.1f} TFLOP/s"
        print(f"{line} {utilization(tflops, peak):6.2%} of peak, cv {stats.cv:.2%}")


if __name__ == "__main__":
    main(*sys.argv[1:])
