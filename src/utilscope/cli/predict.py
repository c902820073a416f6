"""``calibrate``: time a seeded sample of layer configurations on a device into a device profile. ``predict``: a
network's latency, throughput and utilization on a GPU from its device profile, on any machine."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from utilscope.cli.common import EXIT_PARTIAL, add_cudnn_options, cudnn_settings, model_names, parse_batches
from utilscope.cli.parser import SEED, whole
from utilscope.errors import UtilscopeError
from utilscope.files import check_output_file
from utilscope.measure.sweep import check_batches
from utilscope.models import zoo
from utilscope.predict.calibrate import PROFILE_FILE, DeviceProfile, calibrate, open_profile
from utilscope.predict.ops import MAX_CONFIGS, MAX_CONFIGS_WHY
from utilscope.present.json_text import strict_json
from utilscope.units import plural

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
    p.add_argument("model", help="torchvision:NAME, timm:NAME, path/file.py:factory, archs.jsonl:ID, or a glob like "
                   "'timm:resnet*' (one row per model and batch size)")  # fmt: skip
    p.add_argument("--gpu", default=None, help="a GPU with a shipped device profile, e.g. h200 (default: none; give "
                   "--gpu or --profile)")  # fmt: skip
    p.add_argument("--profile", default=None, help="a device profile file from `utilscope calibrate` instead "
                   "(default: the one shipped for --gpu)")  # fmt: skip
    p.add_argument("--batch", default="1,32,256", help="batch sizes (default: %(default)s)")
    p.add_argument("--precision", default="fp16", help="the profile's precision (default: %(default)s)")
    p.add_argument("--backend", default="graph", help="graph, or inference (a first model of fused execution, from "
                   "a graph profile) (default: %(default)s)")  # fmt: skip
    p.add_argument("--res", type=int, default=None, help="input resolution in pixels (default: the model's native)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (every layer) instead of tables: a list, one "
                     "element per model and batch size")  # fmt: skip
    fmt.add_argument("--csv", action="store_true", help="print one CSV row per model and batch size instead")
    p.set_defaults(run=cmd_predict)


def cmd_predict(args, console: Console) -> int:
    """One model: its batch sizes and largest layers. A glob: one row per model and batch size (a model that fails
    is printed, the others are predicted; exit 1)."""
    from utilscope.predict.predictor import check_gpu, load_predictor, select_profile

    names = model_names(args.model)
    batches = check_batches(parse_batches(args.batch))
    if args.res is not None:  # said before the profile is read and fitted
        zoo.check_resolution(args.res)
    if len(names) == 1:  # a bad model is said before the profile is read and fitted
        zoo.check_model(zoo.parse_spec(names[0]))
    profile = select_profile(args.gpu, args.profile, args.precision, args.backend)
    said = f"utilscope: fitting the predictor of {Path(profile).name} once (about 20 s on one core; cached after)"
    predictor = load_predictor(profile, on_fit=lambda: print(said, file=sys.stderr))
    check_gpu(predictor, args.gpu)
    # The ~600k objects alive now (torch, timm, scikit-learn, the layer models) outlive the predictions: frozen, a
    # full collection started by a large network's trace does not rescan them (0.35 s of a 0.8 s prediction).
    gc.freeze()
    try:
        predictions, failures = _predictions(predictor, names, batches, args)
    finally:
        gc.unfreeze()
    if args.json:
        print(strict_json([p.to_dict() for p in predictions]))
    elif args.csv:
        print(pd.DataFrame([{k: v for k, v in p.to_dict().items() if k != "layers"} for p in predictions])
              .to_csv(index=False), end="")  # fmt: skip
    elif predictions:
        console.print(prediction_table(predictions, predictor, args.backend, many=len(names) > 1))
        if len(names) == 1:
            console.print(layer_table(predictions[-1]))
    for failure in failures:
        print(f"utilscope: error: {failure}", file=sys.stderr)
    return EXIT_PARTIAL if failures else 0


def _predictions(predictor, names: list[str], batches: list[int], args) -> tuple[list, list[str]]:
    """Every model's predictions at every batch size, and the failures of a glob's models (one model: raised)."""
    if len(names) == 1:
        return [predictor.predict(names[0], batch, args.res, args.backend) for batch in batches], []
    predictions, failures = [], []
    for name in names:
        try:
            predictions += [predictor.predict(name, batch, args.res, args.backend) for batch in batches]
        except UtilscopeError as exc:
            failures.append(f"{name}: {' '.join(str(exc).split())}")
    return predictions, failures


def prediction_table(predictions: list, predictor, backend: str, many: bool) -> Table:
    """One row per prediction; with many models, a model column and a title naming how many."""
    subject = f"{len({p.model for p in predictions})} models" if many else predictions[0].model
    table = Table(title=f"{subject} on {predictor.device} ({predictor.precision}, {backend} backend), predicted "
                  f"from {predictor.profile_path}")  # fmt: skip
    columns = ("model",) * many + ("batch", "latency ms", "samples/s", "utilization", "extrapolated")
    for column in columns:
        table.add_column(column, justify="left" if column == "model" else "right")
    for p in predictions:
        table.add_row(*(p.model,) * many, str(p.batch), f"{p.latency_ms:.3f}", f"{p.samples_per_s:,.0f}",
                      f"{p.utilization:.2%}", "yes" if p.extrapolated else "")  # fmt: skip
    return table


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
            console.print(f"{done}/{plural(total, 'configuration')} timed in {time.perf_counter() - start_s:.0f} s")

    try:
        calibrate(profile, args.count, out, args.device, progress)
    except KeyboardInterrupt:
        timed = plural(len(profile.latency_ms), "configuration")
        kept = f"{timed} timed and {len(profile.failed)} failed are kept in {out}"
        raise KeyboardInterrupt(f"interrupted: {kept}; rerun to resume") from None
    console.print(f"{plural(len(profile.latency_ms), 'configuration')} timed, {len(profile.failed)} failed, on "
                  f"{profile.describe()}: {out}")  # fmt: skip
    return 0
