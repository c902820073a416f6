"""``calibrate``: time a seeded sample of layer configurations on a device into a device profile. ``predict``: a
network's latency, throughput and utilization on a GPU from its device profile, on any machine."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from utilscope.cli.common import add_cudnn_options, cudnn_settings, parse_batches
from utilscope.cli.parser import SEED, whole
from utilscope.files import check_output_file
from utilscope.measure.sweep import check_batches
from utilscope.models import zoo
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile, calibrate, open_profile
from utilscope.predict.ops import MAX_CONFIGS, MAX_CONFIGS_WHY
from utilscope.present.json_text import strict_json

DEFAULT_COUNT = 5000
SHOWN_LAYERS = 10


def add_parsers(sub) -> None:
    p = sub.add_parser("calibrate", help="time a seeded sample of CNN layer configurations into a device profile")
    p.add_argument("--out", required=True, help="the device profile (.json), resumed when it exists")
    p.add_argument("--count", type=whole("--count", 1, MAX_CONFIGS, MAX_CONFIGS_WHY),
                   default=DEFAULT_COUNT, help="configurations in the sample (default: %(default)s)")  # fmt: skip
    p.add_argument("--seed", type=SEED, default=0, help="the sample's seed (default: %(default)s)")
    p.add_argument("--precision", default=None, help="fp16, bf16, tf32 or fp32 (default: fp16 on a GPU, else fp32)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    add_cudnn_options(p)
    p.set_defaults(run=cmd_calibrate)
    p = sub.add_parser("predict", help="predict a CNN's latency, throughput and utilization on a GPU, without it")
    p.add_argument("model", help="torchvision:NAME, timm:NAME, path/file.py:factory or archs.jsonl:ID")
    p.add_argument("--gpu", default=None, help="a GPU with a shipped device profile, e.g. h200 (default: none; give "
                   "--gpu or --profile)")  # fmt: skip
    p.add_argument("--profile", default=None, help="a device profile file from `utilscope calibrate` instead "
                   "(default: the one shipped for --gpu)")  # fmt: skip
    p.add_argument("--batch", default="1,32,256", help="batch sizes (default: %(default)s)")
    p.add_argument("--precision", default="fp16", help="the profile's precision (default: %(default)s)")
    p.add_argument("--backend", default="graph", help="graph, or inference (a first model of fused execution, from "
                   "a graph profile) (default: %(default)s)")  # fmt: skip
    p.add_argument("--res", type=int, default=None, help="input resolution in pixels (default: the model's native)")
    p.add_argument("--json", action="store_true", help="print JSON (every layer) instead of tables")
    p.set_defaults(run=cmd_predict)


def cmd_predict(args, console: Console) -> int:
    from utilscope.predict.predictor import check_gpu, load_predictor, select_profile

    batches = check_batches(parse_batches(args.batch))
    zoo.check_model(zoo.parse_spec(args.model))  # a bad model is said before the profile is read and fitted
    predictor = load_predictor(select_profile(args.gpu, args.profile, args.precision, args.backend))
    check_gpu(predictor, args.gpu)
    # The ~600k objects alive now (torch, timm, scikit-learn, the layer models) outlive the predictions: frozen, a
    # full collection started by a large network's trace does not rescan them (0.35 s of a 0.8 s prediction).
    gc.freeze()
    try:
        predictions = [predictor.predict(args.model, batch, args.res, args.backend) for batch in batches]
    finally:
        gc.unfreeze()
    if args.json:
        print(strict_json([p.to_dict() for p in predictions]))
        return 0
    table = Table(title=f"{predictions[0].model} on {predictor.device} ({predictor.precision}, {args.backend}"
                  f" backend), predicted from {predictor.profile_path}")  # fmt: skip
    for column in ("batch", "latency ms", "samples/s", "utilization", "extrapolated"):
        table.add_column(column, justify="right")
    for p in predictions:
        table.add_row(str(p.batch), f"{p.latency_ms:.3f}", f"{p.samples_per_s:,.0f}", f"{p.utilization:.2%}",
                      "yes" if p.extrapolated else "")  # fmt: skip
    console.print(table)
    console.print(layer_table(predictions[-1]))
    return 0


def layer_table(prediction) -> Table:
    table = Table(title=f"largest predicted layers at batch {prediction.batch}")
    for column in ("layer", "type", "op class", "predicted ms", "share", "extrapolated"):
        table.add_column(column, justify="left" if column in ("layer", "type", "op class", "extrapolated") else "right")
    for layer in prediction.layers[:SHOWN_LAYERS]:
        table.add_row(layer["name"], layer["type"], layer["op_class"], f"{layer['predicted_ms']:.4f}",
                      f"{layer['time_share']:.1%}", layer["extrapolated"])  # fmt: skip
    return table


def cmd_calibrate(args, console: Console) -> int:
    out = check_output_file(args.out, PROFILE_FILE, (".json",))
    existing = DeviceProfile.load(out) if Path(out).exists() else None
    profile = open_profile(args.device, args.precision, cudnn_settings(args), args.seed, existing)
    start_s = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 100 == 0 or done == total:
            console.print(f"{done}/{total} configurations timed in {time.perf_counter() - start_s:.0f} s")

    try:
        calibrate(profile, args.count, out, args.device, progress)
    except KeyboardInterrupt:
        kept = f"{len(profile.latency_ms)} configurations timed and {len(profile.failed)} failed are kept in {out}"
        raise KeyboardInterrupt(f"interrupted: {kept}; rerun to resume") from None
    console.print(f"{len(profile.latency_ms)} configurations timed, {len(profile.failed)} failed, on "
                  f"{profile.describe()}: {out}")  # fmt: skip
    return 0
