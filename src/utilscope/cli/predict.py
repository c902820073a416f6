"""``calibrate``: time a seeded sample of layer configurations on a device into a device profile. ``predict``: a
network's latency, throughput and utilization on a GPU from its device profile, on any machine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from utilscope.cli.common import EXIT_PARTIAL, add_cudnn_options, cudnn_settings
from utilscope.cli.values import (
    ANCHOR,
    BACKEND,
    BATCHES,
    DEVICE,
    GPUS,
    MODEL,
    PRECISION,
    PRICES,
    RES,
    SEED,
    read_by,
    text_file,
    whole,
)
from utilscope.files import ANCHOR_FILE, DEVICE_PROFILE_FILE, HOST_FILE, check_output_file
from utilscope.limits import MAX_CONFIGS, MAX_CONFIGS_WHY
from utilscope.predict.options import check_host_backend, check_target
from utilscope.predict.profile_format import read_profile
from utilscope.present import input_phrases
from utilscope.present.json_text import strict_json
from utilscope.units import plural

DEFAULT_COUNT = 5000
SHOWN_LAYERS = 10


def add_parsers(sub) -> None:
    _add_calibrate(sub)
    _add_predict(sub)


def _add_calibrate(sub) -> None:
    p = sub.add_parser("calibrate", help="time a seeded sample of CNN layer configurations into a device profile")
    p.add_argument("--out", required=True, help="the device profile (.json), resumed when it exists")
    p.add_argument(
        "--count",
        type=whole("--count", 1, MAX_CONFIGS, MAX_CONFIGS_WHY),
        default=DEFAULT_COUNT,
        help="configurations in the sample (default: %(default)s)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="the sample's seed (default: %(default)s)")
    p.add_argument(
        "--precision",
        type=PRECISION,
        default=None,
        help="fp16, bf16, tf32, fp32, or amp (fp32 weights on fp16 inputs under autocast, as a network's "
        "layers run, the weights' casts timed with each config) (default: fp16 on a GPU, else fp32)",
    )
    p.add_argument("--device", type=DEVICE, default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument(
        "--no-channels-last",
        dest="channels_last",
        action="store_false",
        help="time the configs on NCHW tensors, as timm's benchmark runs (with --precision amp: timm's "
        "condition) (default: channels_last)",
    )
    p.add_argument(
        "--host",
        action="store_true",
        help="time the host side of eager PyTorch instead: what each kind of call (a module's, a conv's, a "
        "launch...) costs this machine's CPU, into a host profile for `predict --backend eager --host-profile` "
        "(seconds; on a GPU also the kernels cuDNN runs for a grid of 448 grouped convs; the other options but "
        "--device and --out do not apply)",
    )
    add_cudnn_options(p)
    p.set_defaults(run=cmd_calibrate)


def _add_predict(sub) -> None:
    p = sub.add_parser("predict", help="predict a CNN's latency, throughput and utilization on a GPU, without it")
    p.add_argument(
        "model",
        type=MODEL,
        help="torchvision:NAME, timm:NAME, path/file.py:factory, archs.jsonl:ID, or a glob like "
        "'timm:resnet*' (one row per model and batch size)",
    )
    p.add_argument(
        "--gpu",
        type=GPUS,
        default=None,
        help="a GPU of the spec table (`utilscope devices`), e.g. h200, rtx_5090, or a family with one member "
        "(v100s): one without a shipped device profile is predicted by transfer from one; a list (l4,a100_pcie_80gb) "
        "or `all`: every GPU, ranked (default: none; give --gpu or --profile)",
    )
    p.add_argument(
        "--profile",
        type=read_by(DEVICE_PROFILE_FILE, read_profile),
        default=None,
        help="a device profile file from `utilscope calibrate` instead "
        "(default: the one shipped for --gpu, else the one transferred from)",
    )
    p.add_argument(
        "--batch",
        type=BATCHES,
        default="1,32,256",
        help="batch sizes (default: %(default)s; a model file's fixed batch)",
    )
    _add_condition_options(p)
    p.add_argument(
        "--price",
        type=PRICES,
        default=None,
        help="GPU=USD_per_hour,...: samples per dollar beside samples/s "
        "(e.g. rtx_5090=0.9,h100_sxm=2.5) (default: none)",
    )
    p.add_argument("--res", type=RES, default=None, help="input resolution in pixels (default: the model's native)")
    _add_anchor_options(p)
    p.add_argument(
        "--no-measured",
        dest="measured",
        action="store_false",
        help="predict from the layer models alone, also a network that a profiled GPU (the H100, the H200) measured "
        "whole in the same condition (default: such a network is predicted from that measurement, its provenance "
        "printed: on that GPU as measured, on another times its measured / predicted ratio there)",
    )
    _add_output_options(p)
    p.set_defaults(run=cmd_predict)


def _add_condition_options(p) -> None:
    """The condition predicted: precision, backend (eager's host), memory format."""
    p.add_argument(
        "--precision",
        type=PRECISION,
        default="fp16",
        help="fp16; amp (fp32 weights under autocast to fp16, as timm's benchmark runs); bf16; amp_bf16; fp32 "
        "(PyTorch's default: TF32 convolutions); fp32_strict (no TF32); tf32: one a shipped device profile "
        "expresses (default: %(default)s)",
    )
    p.add_argument(
        "--backend",
        type=BACKEND,
        default="graph",
        help="graph; eager (the same kernels, launched by the host: its calls' time modelled from the host profile "
        "of the machine that timed the device profile, where one is shipped); inference or compile (a first model "
        "of fused execution) (default: %(default)s)",
    )
    p.add_argument(
        "--host-profile",
        type=text_file(HOST_FILE),
        default=None,
        metavar="FILE.json",
        help="with --backend eager: your host's profile from `utilscope calibrate --host` (default: the shipped one "
        "of the machine that timed the device profile; an anchor at the host's pace fits its speed)",
    )
    p.add_argument(
        "--no-channels-last",
        dest="channels_last",
        action="store_false",
        help="NCHW tensors, as timm's benchmark runs (default: channels_last, as `profile` runs)",
    )


def _add_output_options(p) -> None:
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--json",
        action="store_true",
        help="print JSON (every layer) instead of tables: a list, one element per model and batch size",
    )
    fmt.add_argument("--csv", action="store_true", help="print one CSV row per model and batch size instead")


def _add_anchor_options(p) -> None:
    p.add_argument(
        "--anchor",
        type=ANCHOR,
        action="append",
        default=[],
        metavar="SPEC@BATCH=SAMPLES_PER_S",
        help="a measurement you have of another model on --gpu in the same condition (repeatable): fits the GPU's "
        "sustained clock and memory efficiency, nothing per model (default: none)",
    )
    p.add_argument(
        "--anchors",
        type=text_file(ANCHOR_FILE),
        default=None,
        metavar="FILE.csv",
        help="anchors from a CSV file: columns model,batch,samples_per_s and optionally precision,backend,res,gpu "
        "(default: none)",
    )


def check_request(args) -> None:
    """What a request checks when made, before the library is imported: its options' agreement
    (``predict.options``) and that a profile predicts its condition (``selection.select_profile``, the registry's
    choice the request makes; reads the shipped profiles' records, no torch)."""
    from utilscope.predict.selection import select_profile

    check_host_backend(args.host_profile, args.backend)
    check_target(args.gpu, args.profile, args.precision, bool(args.anchor) or args.anchors is not None)
    select_profile(args.gpu, args.profile, args.precision, args.backend, args.channels_last)


def cmd_predict(args, console: Console) -> int:
    """One model: its batch sizes and largest layers. A glob: one row per model and batch size (a model that fails
    is printed, the others are predicted; exit 1). The request is checked before the library is imported
    (``check_request``)."""
    check_request(args)
    from utilscope.api import predict
    from utilscope.predict.anchors import parse_anchor, read_anchors
    from utilscope.predict.run import PredictRequest

    anchors = [parse_anchor(text) for text in args.anchor]
    anchors += read_anchors(args.anchors) if args.anchors is not None else []
    request = PredictRequest(
        args.model,
        args.gpu,
        args.profile,
        tuple(args.batch),
        args.precision,
        args.backend,
        args.channels_last,
        args.res,
        args.price or {},
        tuple(anchors),
        args.host_profile,
        args.measured,
    )

    told = []  # one line for the fits of a command (the amp profile's can need the fp16 one's conv trees too)

    def said() -> None:
        if not told:
            print(
                "utilscope: fitting the device profiles' predictors once (seconds on one core; cached after)",
                file=sys.stderr,
            )
        told.append(True)

    result = predict(request, on_fit=said)
    records, predictions, many = result.records(), result.predictions, len(request.models) > 1
    notes = gpu_notes(result)
    if args.json or args.csv:
        for line in notes:
            print(f"utilscope: {line}", file=sys.stderr)
    if args.json:
        print(strict_json(records))
    elif args.csv:
        print(result.to_frame().to_csv(index=False), end="")
    elif records and (request.prices or len({p.gpu_key for p in predictions}) > 1):
        console.print(gpu_table(records, result.device, request.prices))
    elif records:
        console.print(prediction_table(predictions, result.profile_path, args.backend, many=many))
        if not many:
            console.print(layer_table(predictions[-1]))
    if not (args.json or args.csv):
        for line in notes:
            console.print(line, soft_wrap=True)
    for failure in result.failures:
        print(f"utilscope: error: {failure}", file=sys.stderr)
    return EXIT_PARTIAL if result.failures else 0


def gpu_notes(result) -> list[str]:
    """The anchor fit's lines, else what each transferred GPU's clock and memory efficiency were taken to be, with
    the validation's error on that GPU in the condition (``Prediction.validation``), once per GPU (on the profile's
    own GPU the validation alone); the profile's choice and network scales, where it has them; what a model file's
    network lacks."""
    scaled = [line for line in (result.profile_note, result.scales_note) if line] + result.file_notes
    scaled += host_notes(result.predictions) + measured_notes(result.predictions)
    if result.anchor_fit is not None:
        return result.anchor_fit.describe() + scaled
    notes = {}
    for p in result.predictions:
        if p.transferred_from and p.gpu_note:
            notes[p.gpu_key] = p.gpu_note + (f"; {p.validation}" if p.validation else "")
        elif not p.transferred_from and p.validation:
            notes[p.gpu_key] = f"{p.gpu_key}: {p.validation}"
    return list(notes.values()) + scaled


def host_notes(predictions: list) -> list[str]:
    """For eager: the host each prediction assumes, once per host, or that none is modelled."""
    eager = [p for p in predictions if p.backend == "eager"]
    hosts = list(dict.fromkeys(p.host for p in eager))
    if "" in hosts:
        return [
            "eager: no host profile of the device profile's machine is shipped: the GPU's time alone, as if the host "
            "were never behind (give --host-profile FILE from `utilscope calibrate --host`)"
        ]
    return [f"eager {host}; bound 'host': the GPU waits for the host's calls" for host in hosts]


def measured_notes(predictions: list) -> list[str]:
    """One line per prediction taken from a whole-network measurement (``predict.measured``)."""
    return [
        f"{p.model} at batch {p.batch} on the {p.gpu_key}: {p.measured}; its layer models alone: "
        f"{p.samples_per_s / p.measured_ratio:,.0f} samples/s"
        for p in predictions
        if p.measured
    ]


def gpu_table(records: list[dict], device: str, prices: dict[str, float]) -> Table:
    """One row per GPU (and model and batch size), fastest first; samples per dollar where priced."""
    first = records[0]
    table = Table(
        title=f"{first['model']}, {first['precision']}, {first['backend']} backend, "
        f"{first['memory_format']}: predicted per GPU from {device}'s profile"
    )
    columns = ("model", "batch", "GPU", "samples/s", "latency ms", "utilization", "bound")
    columns += ("samples per USD",) * bool(prices)  # at the given USD per hour
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "GPU", "bound") else "right")
    for r in records:
        per_usd = f"{r['samples_per_usd']:,.0f}" if r["samples_per_usd"] else f"--price {r['gpu_key']}=USD/h"
        table.add_row(
            r["model"],
            str(r["batch"]),
            r["gpu_key"],
            f"{r['samples_per_s']:,.0f}",
            f"{r['latency_ms']:.3f}",
            f"{r['utilization']:.1%}",
            r["bound"],
            *(per_usd,) * bool(prices),
        )
    return table


def prediction_table(predictions: list, profile_path: str, backend: str, many: bool) -> Table:
    """One row per prediction; with many models, a model column and a title naming how many."""
    subject = plural(len({p.model for p in predictions}), "model") if many else predictions[0].model
    first = predictions[0]
    how = f"by transfer from {first.transferred_from}, " if first.transferred_from else ""
    image = [] if many else input_phrases(first.resolution, first.input_channels)
    condition = [*image, first.precision, f"{backend} backend", first.memory_format]
    table = Table(
        title=f"{subject} on {first.gpu} ({', '.join(condition)}), predicted {how}from {shown_profile(profile_path)}"
    )
    host = any(p.host for p in predictions)  # eager with a host profile: the host's work per forward beside
    columns = ("model",) * many + ("batch", "latency ms") + ("host ms",) * host
    columns += ("samples/s", "utilization", "bound", "extrapolated")
    for column in columns:
        table.add_column(column, justify="left" if column == "model" else "right")
    for p in predictions:
        table.add_row(
            *(p.model,) * many,
            str(p.batch),
            f"{p.latency_ms:.3f}",
            *(f"{p.host_ms:.3f}",) * host,
            f"{p.samples_per_s:,.0f}",
            f"{p.utilization:.2%}",
            p.bound,
            "yes" if p.extrapolated else "",
        )
    return table


def shown_profile(path: str) -> str:
    """A shipped profile by its file name (``shipped h200_fp16_graph.json``), a user's as given
    (``profiles.display_name``)."""
    from utilscope.predict import profiles

    return profiles.display_name(path)


def layer_table(prediction) -> Table:
    table = Table(title=f"largest predicted layers at batch {prediction.batch}")
    for column in ("layer", "type", "op class", "predicted ms", "share", "bound", "extrapolated"):
        left = column in ("layer", "type", "op class", "bound", "extrapolated")
        table.add_column(column, justify="left" if left else "right")
    for layer in prediction.layers[:SHOWN_LAYERS]:
        table.add_row(
            layer["name"],
            layer["type"],
            layer["op_class"],
            f"{layer['predicted_ms']:.4f}",
            f"{layer['time_share']:.1%}",
            layer["bound"],
            layer["extrapolated"],
        )
    return table


def cmd_calibrate(args, console: Console) -> int:
    """The output's path is checked before anything heavy is imported (``--host``: a host profile's)."""
    out = check_output_file(args.out, HOST_FILE if args.host else DEVICE_PROFILE_FILE, (".json",))
    if args.host:
        return cmd_calibrate_host(out, args, console)
    if Path(out).exists():  # resumed: a file that is no device profile is said before anything heavy
        read_profile(out)
    from utilscope.predict.calibrate import DeviceProfile, calibrate, open_profile

    existing = DeviceProfile.load(out) if Path(out).exists() else None
    profile = open_profile(args.device, args.precision, cudnn_settings(args), args.seed, existing, args.channels_last)
    start_s = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            console.print(f"{done}/{plural(total, 'configuration')} timed in {time.perf_counter() - start_s:.0f} s")

    try:
        calibrate(profile, args.count, out, args.device, progress)
    except KeyboardInterrupt:
        timed = plural(len(profile.latency_ms), "configuration")
        kept = f"{timed} timed and {len(profile.failed)} failed are kept in {out}"
        raise KeyboardInterrupt(f"interrupted: {kept}; rerun to resume") from None
    console.print(
        f"{plural(len(profile.latency_ms), 'configuration')} timed, {len(profile.failed)} failed, on "
        f"{profile.describe()}: {out}"
    )
    from utilscope.predict import profile_rows

    kept = profile_rows.write_beside(Path(out), profile)
    if kept is not None:
        console.print(f"its rows, for a fast first `predict`: {kept}")
        _print_held_back(out, len(profile.latency_ms), console)
    return 0


def _print_held_back(out, configs: int, console: Console) -> None:
    """The profile's held-back check (``predict.held_back``), when it has enough configs for one."""
    from utilscope.predict import held_back

    if configs < held_back.MIN_CONFIGS:
        console.print(f"no held-back check: it needs {held_back.MIN_CONFIGS} configs")
        return
    console.print(f"held-back check ({held_back.HELD_BACK_SHARE:.0%} of its single-op configs, fitted on the rest):")
    for line in held_back.describe(held_back.check(out)):
        console.print("  " + line)


def cmd_calibrate_host(out: Path, args, console: Console) -> int:
    """``calibrate --host``: this machine's host profile (to ``out``, checked), each call kind's microseconds printed
    as timed."""
    from utilscope.predict.host_calibrate import calibrate_host

    host = calibrate_host(args.device, lambda kind, us: console.print(f"{kind}: {us:.2f} µs a call"))
    for row in host.chains:
        ratio = row["measured_ms"] / row["summed_ms"]
        console.print(
            f"network {row['chain']}: {row['measured_ms'] * 1e3:.1f} µs a forward, {row['calls']} calls summing to "
            f"{row['summed_ms'] * 1e3:.1f} µs (x{ratio:.2f})"
        )
    console.print(f"composition scale (the networks' median): x{host.scale:.2f}")
    if host.conv_kernels:
        split = [row["kernels"] for row in host.conv_kernels if row["kernels"] > 1]
        console.print(
            f"grouped 3x3 convs: {len(split)} of {len(host.conv_kernels)} run more than one kernel a call (up to "
            f"{max(split, default=1)}), {host.split_kernel_us:.2f} µs a kernel beyond the first"
        )
    host.save(out)
    console.print(f"{host.describe()}: {out}")
    return 0
