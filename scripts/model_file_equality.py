"""Does a model read from its exported files count like the module it was exported from?

Each model is built with random weights (seed 0; nothing downloaded; ``randomize`` makes every bias and norm
non-trivial, as trained weights are: an exporter may drop an all-zero bias) at a resolution (its native one unless
``--res``), exported at batch 1 to ONNX (``torch.onnx.export``, PyTorch's default exporter), to a torch.export
archive (``torch.export.export`` + ``save``) and to TorchScript (``torch.jit.trace`` + ``save``) in a temporary
folder, and each file is counted by utilscope as a model source (``count(path)``) at the same resolution, batch 1,
fp32. A row per model and format: FLOPs, other FLOPs, bytes and params of the original and the difference of the
file's, and the ops whose count or cost differ (ops named alike across formats: ``_convolution`` as
``convolution``, ``_native_batch_norm_legit_no_training`` as ``native_batch_norm``, an in-place op as its plain
one), which name each difference's cause. A file that cannot be exported or read is a row with its error.

    python3 scripts/model_file_equality.py --set survey --csv benchmarks/results/model_files/equality_survey.csv
    python3 scripts/model_file_equality.py --set proof --res 64 --markdown

``--set survey``: the 61 curated torchvision CNNs (``utilscope survey``'s default set); ``--set proof``: the 10
torchvision and 5 timm CNNs of the tests' proof (dense, depthwise, grouped, SE, ConvNeXt). Needs the ``onnx`` extra
and onnxscript (``torch.onnx.export``). Runs on the CPU with ``--threads`` torch threads (default 2).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path

import pandas as pd
import torch

from utilscope.counting.counter import count_traced
from utilscope.models import sets, zoo

PROOF = (
    "torchvision:resnet18",
    "torchvision:resnext50_32x4d",
    "torchvision:mobilenet_v3_small",
    "torchvision:shufflenet_v2_x0_5",
    "torchvision:mnasnet0_5",
    "torchvision:squeezenet1_1",
    "torchvision:regnet_y_400mf",
    "torchvision:efficientnet_b0",
    "torchvision:googlenet",
    "torchvision:convnext_tiny",
    "timm:resnet10t",
    "timm:mobilenetv3_small_050",
    "timm:regnetx_002",
    "timm:seresnet18",
    "timm:convnext_atto",
)
FORMATS = ("onnx", "pt2", "torchscript")
METRICS = ("flops", "other_flops", "bytes", "params")
_ALIASES = {"_convolution": "convolution", "_native_batch_norm_legit_no_training": "native_batch_norm"}


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every bias and every norm's affine parameters and running statistics drawn at random (seeded), in place."""
    generator = torch.Generator().manual_seed(seed)

    def draw(tensor: torch.Tensor, low: float, high: float) -> None:
        with torch.no_grad():
            tensor.copy_(torch.rand(tensor.shape, generator=generator) * (high - low) + low)

    for module in model.modules():
        bias = getattr(module, "bias", None)
        if isinstance(bias, torch.Tensor):
            draw(bias, -0.1, 0.1)
        if isinstance(module, torch.nn.modules.batchnorm._NormBase) and module.track_running_stats:
            draw(module.running_mean, -0.1, 0.1)
            draw(module.running_var, 0.5, 1.5)
        weight = getattr(module, "weight", None)
        if isinstance(module, (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm)) and weight is not None:
            draw(weight, 0.5, 1.5)
    return model.eval()


def export(model: torch.nn.Module, example: torch.Tensor, folder: Path, fmt: str) -> Path:
    """The model written in ``fmt`` (batch 1, its input shape fixed) under ``folder``."""
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        if fmt == "onnx":
            path = folder / "model.onnx"
            torch.onnx.export(model, (example,), path)
        elif fmt == "pt2":
            path = folder / "model.pt2"
            torch.export.save(torch.export.export(model, (example,)), path)
        else:
            path = folder / "model.pt"
            torch.jit.save(torch.jit.trace(model, example, check_trace=False), path)
    return path


def op_name(op: str) -> str:
    """An op named alike across formats: ``aten._convolution`` -> ``convolution``, ``relu_`` -> ``relu``."""
    name = op.removeprefix("aten.")
    name = _ALIASES.get(name, name)
    return re.sub(r"_$", "", name)


def op_costs(spec: str, resolution: int) -> tuple[dict, dict]:
    """(totals of a count at batch 1, fp32; per op name: [calls, flops, other flops, bytes])."""
    result, trace = count_traced(spec, batch=1, resolution=resolution)
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for event in trace.events:
        costs = per_op[op_name(event.op)]
        for index, value in enumerate((1, event.cost.flops, event.cost.other_flops, event.bytes)):
            costs[index] += value
    totals = {metric: getattr(result.total, metric) for metric in METRICS}
    return {**totals, "unsupported": dict(result.unsupported), "traced_on": result.traced_on}, dict(per_op)


def op_differences(original: dict, exported: dict) -> str:
    """The ops whose calls or costs differ: ``name +calls (other +N, bytes +N)``, largest other-FLOP change first."""
    rows = []
    for name in sorted(set(original) | set(exported)):
        before, after = original.get(name, [0, 0, 0, 0]), exported.get(name, [0, 0, 0, 0])
        delta = [a - b for a, b in zip(after, before, strict=True)]
        if any(delta):
            rows.append((abs(delta[2]), abs(delta[1]), name, delta))
    parts = []
    for _, _, name, (calls, flops, other, _) in sorted(rows, reverse=True):
        costs = ", ".join(f"{label} {value:+,}" for label, value in (("flops", flops), ("other", other)) if value)
        parts.append(f"{name} {calls:+d}" + (f" ({costs})" if costs else ""))
    return "; ".join(parts)


def compare(model_id: str, resolution: int | None, folder: Path) -> list[dict]:
    """One row per format for one model: the original's counts, the file's differences and the ops behind them."""
    spec = zoo.parse_spec(model_id)
    res = zoo.resolve_resolution(spec, resolution)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = randomize(zoo.build_model(spec, res))
    example = torch.randn(1, 3, res, res, generator=torch.Generator().manual_seed(0))
    original, original_ops = op_costs(model_id, res)
    rows = []
    for fmt in FORMATS:
        row = {"model": model_id, "format": fmt, "resolution": res, **{m: original[m] for m in METRICS}}
        start = time.perf_counter()
        try:
            path = export(model, example, folder, fmt)
            counted, ops = op_costs(str(path), res)
        except Exception as exc:  # a row records what failed, and the run goes on
            row["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            rows.append(row)
            continue
        finally:
            for leftover in folder.iterdir():
                leftover.unlink()
        row.update({f"{m}_diff": counted[m] - original[m] for m in METRICS})
        row["equal"] = all(row[f"{m}_diff"] == 0 for m in METRICS)
        row["ops"] = op_differences(original_ops, ops)
        row["unsupported"] = ", ".join(f"{op} x{n}" for op, n in counted["unsupported"].items())
        row["traced_on"] = counted["traced_on"]
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
    return rows


def summary(frame: pd.DataFrame) -> str:
    """Per format: how many models count equal on all four totals, differ, or failed."""
    lines = [
        "| format | models | equal (flops, other flops, bytes, params) | differ | failed |",
        "|---|---|---|---|---|",
    ]
    for fmt, rows in frame.groupby("format", sort=False):
        failed = int(rows["error"].notna().sum()) if "error" in rows else 0
        equal = int(rows["equal"].fillna(False).astype(bool).sum())
        lines.append(f"| {fmt} | {len(rows)} | {equal} | {len(rows) - equal - failed} | {failed} |")
    return "\n".join(lines)


def markdown(frame: pd.DataFrame) -> str:
    """The rows that differ or failed, with their op differences."""
    lines = [
        "| model | format | FLOPs | other FLOPs | bytes | params | ops that differ |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in frame.to_dict("records"):
        if row.get("equal") is True:
            continue
        if isinstance(row.get("error"), str):
            lines.append(f"| {row['model']} | {row['format']} | error: {row['error']} | | | | |")
            continue
        cells = [f"{row[f'{m}_diff']:+,}" if row[f"{m}_diff"] else "=" for m in METRICS]
        lines.append(f"| {row['model']} | {row['format']} | {' | '.join(cells)} | {row['ops']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("survey", "proof"), default="survey")
    parser.add_argument("--models", nargs="*", help="model ids instead of a set")
    parser.add_argument("--res", type=int, help="resolution (default: each model's native one)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--markdown", action="store_true", help="print the summary and the differing rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = args.models or (sets.default_survey() if args.set == "survey" else list(PROOF))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for model_id in models:
            rows += compare(model_id, args.res, Path(folder))
            print(f"{model_id}: " + ", ".join(_status(r) for r in rows[-len(FORMATS) :]), file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows)
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.csv, index=False)
    if args.markdown:
        print(summary(frame) + "\n\n" + markdown(frame))
    return 0


def _status(row: dict) -> str:
    if isinstance(row.get("error"), str):
        return f"{row['format']} error"
    return f"{row['format']} {'equal' if row['equal'] else 'differs'} ({row['seconds']} s)"


if __name__ == "__main__":
    sys.exit(main())
