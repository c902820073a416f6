"""First-call cost of new networks on the GPU: the first three forward passes of a few sampled architectures.

The first pass of a network whose conv shapes this process has not seen pays cuDNN's per-shape set-up (and its
autotuning when cudnn.benchmark is on); this shows how much, per search space and memory format.
Run: PYTHONPATH=src python3 benchmarks/first_forward.py   (needs CUDA; results in benchmarks/results/*/logs/)
"""

import time

import torch

from utilscope.nas.sampler import load_jsonl
from utilscope.nas.spaces import get_space


def forward_times_s(model, x, calls: int = 3) -> list[float]:
    times = []
    with torch.inference_mode():
        for _ in range(calls):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    torch.backends.cudnn.benchmark = False
    for name in ("regnet", "mbv3"):
        space = get_space(name)
        for arch in load_jsonl(f"data/h200/{name}_archs.jsonl")[590:593]:
            for memory_format in ("channels_last", "nchw"):
                model = space.build(arch).cuda().half().eval()
                res = arch["resolution"]
                x = torch.randn(256, 3, res, res, device="cuda", dtype=torch.half)
                if memory_format == "channels_last":
                    model = model.to(memory_format=torch.channels_last)
                    x = x.contiguous(memory_format=torch.channels_last)
                times = forward_times_s(model, x)
                print(name, memory_format, arch["id"], [f"{t:.3f}" for t in times], flush=True)


if __name__ == "__main__":
    main()
