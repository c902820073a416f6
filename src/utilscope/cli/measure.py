"""``profile``, ``layers``, ``devices``, ``ceilings``: measure a model, explain it per layer, show the hardware."""

from __future__ import annotations

import sys

from rich.console import Console

from utilscope.cli.common import EXIT_PARTIAL, add_measurement_options, measure_request
from utilscope.cli.values import BATCH, BATCHES, DEVICE, TOP, output_file
from utilscope.files import ROOFLINE_PLOT
from utilscope.present.json_text import strict_json


def add_parsers(sub) -> None:
    p = sub.add_parser("profile", help="measure inference throughput and FLOP utilization over batch sizes")
    add_measurement_options(p, "profile")
    p.add_argument(
        "--batch",
        type=BATCHES,
        default=None,
        help="comma-separated batch sizes (default: 1,8,32,128,256 on GPU, 1,8 on CPU)",
    )
    p.add_argument("--json", action="store_true", help="print the JSON contract instead of a table")
    p.set_defaults(run=cmd_profile)
    p = sub.add_parser("layers", help="per-layer time, roofline, attainable utilization and hints")
    add_measurement_options(p, "layers")
    p.add_argument("--batch", type=BATCH, default=1, help="batch size (default: %(default)s)")
    p.add_argument("--top", type=TOP, default=20, help="show the K slowest layers or regions (default: %(default)s)")
    p.add_argument(
        "--roofline",
        type=output_file(ROOFLINE_PLOT, (".png",)),
        default=None,
        metavar="PNG",
        help="also write the roofline plot to this PNG file, checked before measuring, its folder created "
        "if missing (default: no plot)",
    )
    p.add_argument("--json", action="store_true", help="print everything as JSON instead of tables")
    p.set_defaults(run=cmd_layers)
    p = sub.add_parser("devices", help="the datasheet peak table (dense TFLOP/s per math unit, bandwidth)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records instead")
    p.set_defaults(run=cmd_devices)
    p = sub.add_parser("ceilings", help="measure (or show cached) GEMM and copy ceilings of this device")
    p.add_argument("--device", type=DEVICE, default=None, help="cuda, cuda:N or cpu (default: cuda if present)")
    p.add_argument("--refresh", action="store_true", help="measure again even if cached")
    p.add_argument("--json", action="store_true", help="print the ceilings as JSON instead")
    p.set_defaults(run=cmd_ceilings)


def say_ceilings(request) -> None:
    """One line on stderr before a measurement that will first measure a GPU's ceilings (seconds, once; a CPU's
    take about a second)."""
    from utilscope.hardware import resolve_device
    from utilscope.hardware.ceilings import ceilings_cached

    gpu = resolve_device(request.device).type == "cuda"
    if gpu and request.ceilings == "measure" and not ceilings_cached(request.device):
        print(
            "utilscope: measuring this device's ceilings first (large GEMMs per precision and a copy; once, cached)",
            file=sys.stderr,
            flush=True,
        )


def cmd_profile(args, console: Console) -> int:
    from utilscope.api import profile
    from utilscope.present.profile_view import render_profile

    request, batches = measure_request(args), args.batch
    say_ceilings(request)  # after the input is checked: a usage error stays one line
    result = profile(request, batches)
    if args.json:
        print(strict_json(result.to_dict()))
    else:
        render_profile(result, console)
    return 0 if all(row.status == "ok" for row in result.rows) else EXIT_PARTIAL


def cmd_layers(args, console: Console) -> int:
    """The measurement is shown before the plot is written: a plot that cannot be drawn never loses it (and its
    path is checked while parsing, before measuring)."""
    from utilscope.api import attribute
    from utilscope.present.layers_view import render_layers
    from utilscope.present.roofline_plot import plot_attribution

    request = measure_request(args)
    say_ceilings(request)
    explanation = attribute(request, batch=args.batch)
    if args.json:
        print(strict_json(explanation.to_dict()), flush=True)
    else:
        render_layers(explanation, console, top=args.top)
    if args.roofline is not None:
        path = plot_attribution(explanation.attribution, args.roofline)
        if not args.json:
            console.print(f"roofline plot: {path}")
    return 0


# The columns of `utilscope devices`' table and their headers (names and sources: --json).
DEVICES_COLUMNS = {
    "key": "key",
    "architecture": "arch",
    "compute_capability": "cc",
    "sm_count": "SMs",
    "boost_clock_mhz": "boost MHz",
    "base_clock_mhz": "base MHz",
    "l2_cache_mb": "L2 MB",
    "smem_per_sm_kb": "smem/SM KB",
    "tdp_w": "W",
    "memory_gb": "GB",
    "memory_bandwidth_gbs": "GB/s",
    "memory_technology": "memory",
    "fp32_tflops": "fp32",
    "tf32_tflops": "tf32",
    "fp16_tflops": "fp16",
    "bf16_tflops": "bf16",
    "int8_tops": "int8",
}


def cmd_devices(args, console: Console) -> int:
    from utilscope.hardware.specs import specs_frame
    from utilscope.present.profile_view import frame_table

    frame = specs_frame()
    if args.json:
        print(strict_json(frame.to_dict(orient="records")))
        return 0
    table = frame[list(DEVICES_COLUMNS)].rename(columns=DEVICES_COLUMNS)
    whole = [c for c in table if table[c].dtype.kind == "f" and (table[c].dropna() % 1 == 0).all()]
    table = table.astype(dict.fromkeys(whole, "Int64"))  # 1590, not 1590.0
    console.print(frame_table(table, "dense datasheet peaks (TFLOP/s; int8 in TOPS), memory (GB, GB/s) and chip"))
    console.print("names, aliases and each figure's source: utilscope devices --json")
    return 0


def cmd_ceilings(args, console: Console) -> int:
    from utilscope.hardware.ceilings import get_ceilings, resolve_device
    from utilscope.present.profile_view import ceilings_text

    ceilings = get_ceilings(resolve_device(args.device), refresh=args.refresh)
    if args.json:
        print(strict_json(ceilings.to_dict()))
        return 0
    console.print(ceilings_text(ceilings))
    return 0
