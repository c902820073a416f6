"""Which convolutions of a network receive their input outside channels_last on the device, and what that costs.

`utilscope predict` missed the pointwise and grouped convs of GroupNorm and NF networks by 2-10x at batch 256
(benchmarks/results/predict/op_classes_timm_layers_h200.md); the meta device it traces on lays tensors out as no
GPU does (its convs return NCHW whatever their input). This probe runs each model once on
the device (fp16, channels_last, eval, random weights), records every aten.convolution's input and weight layout,
then times the first conv that receives an NCHW input twice, with that input as it came and as channels_last (CUDA
events, median of REPEATS). One JSON line per model:

    python3 scripts/layout_probe.py [--batch 256] timm:resnet50_gn torchvision:shufflenet_v2_x1_0 ... > probe.jsonl

(`utilscope predict` now traces channels_last and adds a copy row per conv whose input arrives NCHW; the probe
checks that on the GPU, where ResNet50-GN's convs are predicted close and the ShuffleNets' copies too dear.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from utilscope.models.zoo import build_model, parse_spec, resolve_resolution

REPEATS = 20


class ConvLayouts(TorchDispatchMode):
    """Records each convolution's arguments and whether its input and weight are channels_last."""

    def __init__(self):
        super().__init__()
        self.convs: list[dict] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.convolution.default:
            x, weight = args[0], args[1]
            self.convs.append(
                {
                    "args": args,
                    "input": list(x.shape),
                    "weight": list(weight.shape),
                    "input_cl": x.is_contiguous(memory_format=torch.channels_last),
                    "weight_cl": weight.is_contiguous(memory_format=torch.channels_last),
                }
            )
        return func(*args, **(kwargs or {}))


def conv_ms(args: tuple) -> float:
    """Median milliseconds of one aten.convolution call on these arguments."""
    for _ in range(3):
        torch.ops.aten.convolution.default(*args)
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.ops.aten.convolution.default(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def probe(spec: str, device: str, batch: int) -> dict:
    parsed = parse_spec(spec)
    resolution = resolve_resolution(parsed, None)
    model = build_model(parsed, resolution).eval()
    model = model.to(device=device, dtype=torch.half, memory_format=torch.channels_last)
    x = torch.randn(batch, 3, resolution, resolution, device=device, dtype=torch.half)
    mode = ConvLayouts()
    with torch.no_grad(), mode:
        model(x.to(memory_format=torch.channels_last))
    convs = mode.convs
    nchw = [c for c in convs if not c["input_cl"] and c["input"][2] * c["input"][3] > 1]  # (B, C, 1, 1) is both
    result = {
        "model": spec,
        "batch": batch,
        "convs": len(convs),
        "nchw_input": len(nchw),
        "nchw_weight": sum(not c["weight_cl"] for c in convs),
    }
    if nchw and device == "cuda":
        first = nchw[0]
        with torch.no_grad():
            as_came = conv_ms(first["args"])
            converted = (first["args"][0].contiguous(memory_format=torch.channels_last), *first["args"][1:])
            result.update(
                first_nchw={
                    "input": first["input"],
                    "weight": first["weight"],
                    "ms_as_came": as_came,
                    "ms_channels_last": conv_ms(converted),
                }
            )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="model specs, as `utilscope count` takes them")
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for spec in args.models:
        print(json.dumps(probe(spec, device, args.batch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
