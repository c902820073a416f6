"""What one grouped convolution costs the host in eager PyTorch, by channels a group (GPU): the call as
``predict.host_calibrate`` times a conv (batch 1 unless ``--batch`` says, channels_last, ``nn.Conv2d``, 200 calls
back to back, the median of 7 runs), for 3x3 convolutions of C channels at S x S (default 14) with 1 (depthwise), 2,
3, 4, 8, 16, 32 channels a group and dense, in fp16, with cuDNN's heuristics (``cudnn.benchmark`` off, as `nas
measure --no-cudnn-benchmark` and the host profile run) and with its autotuning (on, as `profile` and `layers` run by
default; ``--benchmark`` picks one). Beside it, from ``torch.profiler`` over 50 calls: the kernels' device
microseconds a call, the CUDA runtime calls the host makes a call (launches, memcpys, synchronizations, attribute
queries: where host time goes when it is not the launch) and the kernels a call runs.

    PYTHONPATH=src python3 benchmarks/host_conv_groups.py [--channels 64,256,1024] [--sizes 14] [--batch 1]
        [--benchmark both] [--out DIR]

Prints one row per convolution; with ``--out``, writes DIR/host_conv_groups.csv. Its numbers go into docs/predict.md
("Eager: the host side") with the GPU, driver, torch version and date.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from utilscope.predict.host_calibrate import grouped_call, host_us

GROUP_WIDTHS = (1, 2, 3, 4, 8, 16, 32, 0)  # channels a group; 0: dense (one group)
PROFILED_CALLS = 50


def profiled(call) -> tuple[float, Counter, Counter]:
    """Over ``PROFILED_CALLS`` calls: the kernels' device microseconds a call, the CUDA runtime calls a call and the
    kernels a call, by name."""
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_CALLS):
            call()
        torch.cuda.synchronize()
    device_us, runtime, kernels = 0.0, Counter(), Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            device_us += event.device_time
            kernels[event.name[:60]] += 1 / PROFILED_CALLS
        elif event.name.startswith("cu"):
            runtime[event.name] += 1 / PROFILED_CALLS
    return device_us / PROFILED_CALLS, runtime, kernels


def row(channels: int, width: int, size: int, batch: int, benchmark: bool, device: torch.device) -> dict:
    """One convolution's host microseconds a call, device microseconds, runtime calls and kernels."""
    torch.backends.cudnn.benchmark = benchmark
    groups = 1 if width == 0 else channels // width  # 0: dense
    call = grouped_call(channels // groups, groups, size, device, torch.float16, batch)
    host = host_us(call, device)
    device_us, runtime, kernels = profiled(call)
    return {
        "channels": channels,
        "group_width": "dense" if width == 0 else f"{width} a group",
        "groups": groups,
        "size": size,
        "batch": batch,
        "kernels_a_call": round(sum(kernels.values()), 2),
        "cudnn_benchmark": benchmark,
        "host_us": round(host, 2),
        "device_us": round(device_us, 2),
        "runtime_calls": " ".join(f"{name}={count:g}" for name, count in runtime.most_common(6)),
        "kernels": " | ".join(f"{name} x{count:g}" for name, count in kernels.most_common(3)),
    }


def rows(
    channels_list: list[int], sizes: list[int], batch: int, benchmarks: list[bool], device: torch.device, keep
) -> None:
    """One row per (channels, group width, size, cuDNN benchmark), printed and kept (``keep``) as it is measured."""
    for channels in channels_list:
        for width in (w for w in GROUP_WIDTHS if not w or channels % w == 0):
            for size in sizes:
                for benchmark in benchmarks:
                    r = row(channels, width, size, batch, benchmark, device)
                    keep(r)
                    print(
                        f"{channels:5d} {r['group_width']:>10} {size:3d}px benchmark {benchmark!s:5} host "
                        f"{r['host_us']:7.1f} us, device {r['device_us']:7.1f} us, {r['kernels_a_call']:g} kernels; "
                        f"{r['runtime_calls']}; {r['kernels']}",
                        flush=True,
                    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--channels", default="64,256,1024")
    parser.add_argument("--sizes", default="14", help="image sizes (px), comma-separated")
    parser.add_argument("--batch", type=int, default=1, help="images a call")
    parser.add_argument("--benchmark", choices=("off", "on", "both"), default="both", help="cuDNN autotuning")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("host_conv_groups.py: needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}")
    benchmarks = {"off": [False], "on": [True], "both": [False, True]}[args.benchmark]
    sizes = [int(s) for s in args.sizes.split(",")]
    channels = [int(c) for c in args.channels.split(",")]
    if not args.out:
        rows(channels, sizes, args.batch, benchmarks, torch.device("cuda"), lambda r: None)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "host_conv_groups.csv", "w", newline="") as handle:  # row by row: a cut run keeps its rows
        writer = None

        def keep(r: dict) -> None:
            nonlocal writer
            if writer is None:
                writer = csv.DictWriter(handle, fieldnames=list(r))
                writer.writeheader()
            writer.writerow(r)
            handle.flush()

        rows(channels, sizes, args.batch, benchmarks, torch.device("cuda"), keep)


if __name__ == "__main__":
    main()
