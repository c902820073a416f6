"""One survey worker: measure groups (a model, precision and backend at several batch sizes) in turn; store each row
at once and print a "group done" line after each group.

Run by the survey runner as ``python -m utilscope.survey.worker --db ... --groups JSON``; the runner restarts a
worker that crashed or hung on the groups after the one it was measuring. Exit code 2 with a one-line message for
bad input.
"""

from __future__ import annotations

import time

START_S = time.perf_counter()

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

from utilscope.errors import UsageError, UtilscopeError  # noqa: E402
from utilscope.measure.profile import GPU_PLAN, ProfileRow, Sweep, prepare_sweep, run_sweep  # noqa: E402
from utilscope.measure.timing import TimingPlan  # noqa: E402
from utilscope.models import sets as model_sets  # noqa: E402
from utilscope.survey.runner import CELL_DONE, GROUP_DONE, PARENT_ENV, software_string  # noqa: E402
from utilscope.survey.store import Store  # noqa: E402


def key_of(sweep: Sweep, batch: int) -> dict:
    env = sweep.environment
    return {
        "model": sweep.model_id,
        "resolution": sweep.resolution,
        "batch": batch,
        "precision": sweep.precision.value,
        "backend": sweep.backend.name,
        "device": env["device_name"],
        "software": software_string(env),
    }


def measurement_row(sweep: Sweep, row: ProfileRow, wall_s: float) -> dict:
    values = asdict(row)
    return {
        **key_of(sweep, row.batch),
        **{k: v for k, v in values.items() if k != "batch"},
        "family": model_sets.family_of(sweep.model_id),
        "flops_per_sample": sweep.work.total.flops,
        "params": sweep.work.total.params,
        "environment": sweep.environment,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": wall_s,
    }


def record_op_classes(store: Store, sweep: Sweep, rows: list[ProfileRow]) -> None:
    """Op-class time shares (``utilscope layers``) at the largest batch size that ran."""
    from utilscope.attribute.attribution import attribute
    from utilscope.attribute.summary import class_summary

    ok = [row.batch for row in rows if row.status == "ok"]
    if not ok:
        return
    backend = sweep.backend.name if sweep.device.type == "cuda" or not sweep.backend.fuses_elementwise else "eager"
    attribution = attribute(sweep.model_id, batch=max(ok), precision=sweep.precision.value, backend=backend,
                            device=str(sweep.device), resolution=sweep.resolution)  # fmt: skip
    classes = class_summary(attribution)[["op_class", "flop_share", "time_share", "time_ms"]]
    store.add_op_classes(key_of(sweep, max(ok)), classes.to_dict(orient="records"))


def exit_with_parent() -> None:
    """Linux: die when the survey runner dies (killed, not only interrupted), so no orphan keeps measuring."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(parent):  # the runner died before prctl took effect
        os._exit(1)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="utilscope.survey.worker")
    parser.add_argument("--db", required=True)
    parser.add_argument("--groups", required=True, help="JSON list of {model, resolution, precision, backend, "
                        "batches, attribute}")  # fmt: skip
    parser.add_argument("--device", default=None)
    parser.add_argument("--min-time-ms", type=float, default=None, help="timed samples' total (default: profile's)")
    parser.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false")
    parser.add_argument("--cudnn-benchmark-limit", type=int, default=None)
    parser.add_argument("--cudnn-depthwise-heuristic", action="store_true")
    return parser.parse_args(argv)


def timing_plan(min_time_ms: float | None) -> TimingPlan | None:
    """The profile default (None), or a shorter or longer timed window with a warm-up of at most 100 ms."""
    if min_time_ms is None:
        return None
    if min_time_ms <= 0:
        raise UsageError(f"--min-time-ms must be positive, got {min_time_ms}")
    return TimingPlan(warmup_ms=min(100.0, min_time_ms), min_total_ms=min_time_ms)


def measure_group(store: Store, group: dict, args, plan: TimingPlan | None, since_s: float) -> float:
    """One model's sweep over its batch sizes, each row stored as soon as it is measured, with the wall time since
    the previous row (``since_s`` for the first). Returns the last row's time. Raises on bad input."""
    sweep = prepare_sweep(group["model"], group["precision"], group["backend"], args.device, group["resolution"],
                          plan=plan, cudnn_benchmark=args.cudnn_benchmark,
                          cudnn_benchmark_limit=args.cudnn_benchmark_limit,
                          cudnn_depthwise_heuristic=args.cudnn_depthwise_heuristic)  # fmt: skip
    if plan is not None and plan.min_total_ms < GPU_PLAN.min_total_ms and sweep.device.type == "cuda":
        sweep.notes.append(f"timed samples cover {plan.min_total_ms:.0f} ms: NVML utilization not sampled reliably")
    last_s = since_s

    def store_row(row: ProfileRow) -> None:
        nonlocal last_s
        now_s = time.perf_counter()
        store.add(measurement_row(sweep, row, now_s - last_s))
        print(CELL_DONE, flush=True)
        last_s = now_s

    rows = run_sweep(sweep, list(group["batches"]), store_row)
    if group.get("attribute"):
        record_op_classes(store, sweep, rows)
    return last_s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_with_parent()
    last_s = START_S  # the first row's wall time includes the process start
    with Store(args.db) as store:
        for group in json.loads(args.groups):
            try:
                last_s = measure_group(store, group, args, timing_plan(args.min_time_ms), last_s)
            except (UtilscopeError, ValueError) as exc:  # the runner records the group's cells as errors
                print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
                return 2
            print(GROUP_DONE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
