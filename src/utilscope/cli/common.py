"""What the verb modules share: exit codes, option groups, and turning options into the library's objects (whose
modules are imported when a command runs, never while it is parsed)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from utilscope.cli.values import BACKEND, BENCHMARK_LIMIT, DEVICE, PEAK, PRECISION, RES, THREADS, one_model
from utilscope.measure.backends import BACKENDS
from utilscope.precision import MEASURED

if TYPE_CHECKING:
    from utilscope.measure.settings import CudnnSettings, MeasureRequest

EXIT_OK = 0
EXIT_PARTIAL = 1  # a multi-model command ran, and some of its models (or cells) failed: each failure is printed
# (a merge: some keys conflicted, each printed)
EXIT_USAGE = 2  # bad input (unknown model, batch <= 0, --peak nan, a store of a newer schema, ...): one line
EXIT_INTERNAL = 3  # an unexpected exception, a bug: its traceback is printed
EXIT_STORAGE = 74  # the machine refused a write (no space left, an I/O error): the line names the path, what was
# stored stays (sysexits' EX_IOERR)
EXIT_INCOMPLETE = 75  # a survey stopped before every planned cell was stored (its Ray cluster was lost, or cells
# have no row): what it stored stays, the same command resumes (sysexits' EX_TEMPFAIL: "try again later")
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)
EXIT_BROKEN_PIPE = 128 + 13  # the reader of stdout went away (``| head``): quiet, the shell's code for SIGPIPE


def add_measurement_options(p: argparse.ArgumentParser, verb: str) -> None:
    """The options ``profile`` and ``layers`` share: what to run, where, against which peak, with which cuDNN."""
    p.add_argument(
        "model", type=one_model(verb), help="torchvision:NAME, timm:NAME, path/file.py:factory or archs.jsonl:ID"
    )
    p.add_argument(
        "--precision", type=PRECISION, default=None, help=f"{' | '.join(MEASURED)} (default: fp16 on GPU, fp32 on CPU)"
    )
    p.add_argument(
        "--backend", type=BACKEND, default="graph", help=f"{' | '.join(BACKENDS.names())} (default: %(default)s)"
    )
    p.add_argument("--device", type=DEVICE, default=None, help="cuda, cuda:N or cpu (default: cuda if present)")
    p.add_argument("--res", type=RES, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument(
        "--peak",
        type=PEAK,
        default=None,
        help="peak TFLOP/s to measure utilization against (default: the GPU's dense datasheet peak for the "
        "precision, see `utilscope devices`; on a CPU its measured GEMM ceiling)",
    )
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false", help="keep NCHW-contiguous")
    add_threads_option(p)
    add_cudnn_options(p)


def add_threads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=THREADS,
        default=None,
        metavar="N",
        help="torch's intra-op thread count (torch.set_num_threads): a condition of a CPU measurement, "
        "stored with it; on a GPU only the host's work uses it (default: torch's own)",
    )


def add_cudnn_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cudnn-benchmark",
        dest="cudnn_benchmark",
        action="store_false",
        help="take cuDNN's heuristic algorithms instead of autotuning every new conv shape (seconds per "
        "new network); stored as a configuration of its own",
    )
    p.add_argument(
        "--cudnn-benchmark-limit",
        type=BENCHMARK_LIMIT,
        default=None,
        metavar="N",
        help="cuDNN autotuning tries at most N algorithms per new conv shape (torch's default 10; 0: all; "
        "fewer: less set-up time); stored as a configuration of its own (default: torch's, 10)",
    )
    p.add_argument(
        "--cudnn-depthwise-heuristic",
        action="store_true",
        help="autotune every conv but the depthwise ones, which take cuDNN's heuristic algorithm (setting "
        "up their candidate algorithms is a large part of autotuning's time); eager and graph backends; "
        "stored as a configuration of its own",
    )


def cudnn_settings(args: argparse.Namespace) -> CudnnSettings:
    from utilscope.measure.settings import CudnnSettings

    return CudnnSettings(args.cudnn_benchmark, args.cudnn_benchmark_limit, args.cudnn_depthwise_heuristic)


def measure_request(args: argparse.Namespace) -> MeasureRequest:
    from utilscope.measure.settings import MeasureRequest

    return MeasureRequest(
        args.model,
        precision=args.precision,
        backend=args.backend,
        device=args.device,
        resolution=args.res,
        channels_last=args.channels_last,
        peak_tflops=args.peak,
        cudnn=cudnn_settings(args),
        threads=args.threads,
    )
