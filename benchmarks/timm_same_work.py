"""Same work as timm's benchmark: does utilscope's harness, in timm's condition, measure what timm's own
``benchmark.py`` measures? On a GPU, for each MODEL@RES: timm's script (``--bench inference --amp -b 1024
--img-size RES``, NCHW, eager; ``--reparam`` for a ``+reparam`` model), then utilscope (``precision amp``, NCHW,
eager, cuDNN autotuning, TF32 allowed, batch 1024), then timm's script again (its own run-to-run spread). Each side
runs in a process of its own (timm's script sets torch's legacy TF32 flags at import, which torch >= 2.9 refuses to
mix with the new ones utilscope sets). Prints one row per model: timm's two samples/s, ours, ours / timm's mean.
The three sides run in rounds of ``--chunk`` models (default 3), and each round's rows are printed and added to the
CSV as it ends, so a call cut short keeps the rounds it finished (14 models at batch 1024 take longer than 250 s).

timm's ``benchmark.py`` is timm's code: bring it from timm's repository (``--timm-benchmark PATH``), never commit it.

    PYTHONPATH=src python benchmarks/timm_same_work.py --timm-benchmark PATH --out DIR [MODEL@RES ...]

Writes (appends to) DIR/timm_same_work.csv; its numbers go into docs/benchmarks.md with the GPU, driver, torch and date.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

# Ten families' worth of timm CNNs from the validation tables (RTX 3090/4090), dense to depthwise, two
# reparameterizable ones both ways.
MODELS = [
    "timm:resnet50@224",
    "timm:resnet18@224",
    "timm:resnext50_32x4d@224",
    "timm:densenet121@224",
    "timm:efficientnet_b0@224",
    "timm:mobilenetv3_large_100@224",
    "timm:convnext_tiny@224",
    "timm:regnety_032@288",
    "timm:ghostnetv2_100@224",
    "timm:tf_efficientnet_b3@300",
    "timm:mobileone_s1@224",
    "timm:mobileone_s1+reparam@224",
    "timm:repvgg_a2@224",
    "timm:repvgg_a2+reparam@224",
]
BATCH = 1024
SIDES = ("timm", "ours")


def split(model: str) -> tuple[str, bool, int]:
    """``timm:NAME[+reparam]@RES`` -> (NAME, reparam, RES)."""
    spec, _, res = model.rpartition("@")
    name = spec.removeprefix("timm:")
    return name.removesuffix("+reparam"), name.endswith("+reparam"), int(res)


def run_timm(script: str, models: list[str]) -> list[dict]:
    """timm's benchmark() for each model, in this process (no sleep between models, unlike its bulk mode)."""
    loader = importlib.util.spec_from_file_location("timm_benchmark", script)
    timm_benchmark = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(timm_benchmark)
    rows = []
    for model in models:
        name, reparam, res = split(model)
        argv = ["--model", name, "--bench", "inference", "--amp", "-b", str(BATCH), "--img-size", str(res)]
        result = timm_benchmark.benchmark(timm_benchmark.parser.parse_args(argv + (["--reparam"] if reparam else [])))
        rows.append(
            {
                "model": model,
                "samples_per_s": result.get("infer_samples_per_sec"),
                "batch": result.get("infer_batch_size"),
                "error": result.get("error", ""),
            }
        )
    return rows


def run_ours(models: list[str]) -> list[dict]:
    """utilscope's profile in timm's condition for each model, in this process."""
    from utilscope.measure import profile
    from utilscope.measure.settings import MeasureRequest

    rows = []
    for model in models:
        spec, _, res = model.rpartition("@")
        request = MeasureRequest(
            spec, precision="amp", backend="eager", resolution=int(res), channels_last=False, ceilings="skip"
        )
        row = profile(request, [BATCH]).rows[0]
        rows.append({"model": model, "samples_per_s": row.samples_per_s, "batch": row.batch, "error": row.status})
    return rows


def side(which: str, script: str, models: list[str]) -> list[dict]:
    """One side in a child process (``--side``), its rows read back from its stdout's last line."""
    command = [sys.executable, __file__, "--side", which, "--timm-benchmark", script, *models]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the {which} side failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(first: dict, mine: dict, second: dict) -> dict:
    """One model's row: timm's two runs, ours, ours over timm's mean, any errors."""
    timm_runs = [first["samples_per_s"], second["samples_per_s"]]
    timm_mean = sum(timm_runs) / 2 if all(timm_runs) else None
    ratio = mine["samples_per_s"] / timm_mean if timm_mean and mine["samples_per_s"] else None
    errors = [first["error"], second["error"], "" if mine["error"] == "ok" else mine["error"]]
    return {
        "model": mine["model"],
        "batch_timm": first["batch"],
        "batch_ours": mine["batch"],
        "timm_1": timm_runs[0],
        "timm_2": timm_runs[1],
        "ours": mine["samples_per_s"],
        "ours_over_timm": ratio,
        "errors": " ".join(filter(None, errors)),
    }


def append_csv(path: Path, table: list[dict]) -> None:
    """Add TABLE's rows to the CSV at PATH (its header first if new): a cut call keeps the chunks already done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        if new:
            writer.writeheader()
        writer.writerows(table)


def environment() -> dict:
    import torch

    from utilscope.measure.nvml import driver_version

    return {"gpu": torch.cuda.get_device_name(), "driver": driver_version(), "torch": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--timm-benchmark", required=True, help="timm's benchmark.py (from its repository)")
    parser.add_argument("--out", default=None, help="folder for timm_same_work.csv")
    parser.add_argument("--chunk", type=int, default=3, help="models per round of the three sides (default 3)")
    parser.add_argument("--side", choices=SIDES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side is not None:  # a child: one side, its rows as JSON on the last line
        rows = run_timm(args.timm_benchmark, args.models) if args.side == "timm" else run_ours(args.models)
        print(json.dumps(rows))
        return 0
    print(json.dumps(environment()))
    for start in range(0, len(args.models), args.chunk):
        models = args.models[start : start + args.chunk]
        first, ours, second = (side(which, args.timm_benchmark, models) for which in ("timm", "ours", "timm"))
        table = [compare(a, mine, b) for a, mine, b in zip(first, ours, second, strict=True)]
        for row in table:
            ratio = f"{row['ours_over_timm']:.3f}" if row["ours_over_timm"] else "-"
            timm_1, timm_2, mine = (row[key] or 0 for key in ("timm_1", "timm_2", "ours"))
            print(f"{row['model']:40} {timm_1:10.1f} {timm_2:10.1f} {mine:10.1f} {ratio}", flush=True)
        if args.out:
            append_csv(Path(args.out) / "timm_same_work.csv", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
