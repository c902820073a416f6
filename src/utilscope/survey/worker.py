"""One survey worker: measure groups (a model, precision and backend at several batch sizes) in turn; store each row
at once and print a "cell done" line after each row and a "group done" line after each group.

Run by the survey runner as ``python -m utilscope.survey.worker --groups-file FILE --settings JSON``. It writes no
store: each row, op-class summary and model record is a line of its standard output (``survey.messages``), which the
runner stores. The runner restarts a worker that crashed or hung on the groups after the one it was measuring.
Exit code 2 with a one-line message for bad input.
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

from utilscope.errors import UtilscopeError  # noqa: E402
from utilscope.measure.settings import CudnnSettings, MeasureRequest, timing_window  # noqa: E402
from utilscope.measure.sweep import GPU_PLAN, ProfileRow, Sweep, prepare_sweep, run_sweep  # noqa: E402
from utilscope.models import sets as model_sets  # noqa: E402
from utilscope.models import zoo  # noqa: E402
from utilscope.survey.messages import FITTED_ROW, GROUP_DONE, OP_CLASSES, PARENT_ENV, RECORD, ROW, emit  # noqa: E402
from utilscope.survey.schema import CellKey, Configuration  # noqa: E402
from utilscope.units import now_iso  # noqa: E402


def key_of(sweep: Sweep, batch: int) -> CellKey:
    """The cell a sweep's row fills, in the configuration the worker measured it in."""
    config = Configuration.from_environment(sweep.environment)
    return CellKey(sweep.model_id, sweep.resolution, batch, sweep.precision.value, sweep.backend.name, config)


def measurement_row(sweep: Sweep, row: ProfileRow, wall_s: float) -> dict:
    """The row the store keeps, its key as columns."""
    values = {k: v for k, v in asdict(row).items() if k != "batch"}
    return {
        **key_of(sweep, row.batch).columns(),
        **values,
        "family": model_sets.family_of(sweep.model_id),
        "flops_per_sample": sweep.work.total.flops,
        "params": sweep.work.total.params,
        "environment": sweep.environment,
        "measured_at": now_iso(),
        "wall_s": wall_s,
    }


def attribution_request(sweep: Sweep) -> MeasureRequest:
    """The cell's own request for its op-class attribution (same precision, layout and cuDNN settings), with
    attribution's default timing; on a CPU, compiled backends are attributed per layer as ``eager``."""
    fuses = sweep.backend.fuses_elementwise
    backend = sweep.backend.name if sweep.device.type == "cuda" or not fuses else "eager"
    return sweep.request.replace(backend=backend, plan=None)


def record_op_classes(sweep: Sweep, rows: list[ProfileRow]) -> None:
    """Op-class time shares (``utilscope layers``) at the largest batch size that ran."""
    from utilscope.attribute.attribution import attribute
    from utilscope.attribute.summary import class_summary

    ok = [row.batch for row in rows if row.status == "ok"]
    if not ok:
        return
    attribution = attribute(attribution_request(sweep), batch=max(ok))
    classes = class_summary(attribution)[["op_class", "flop_share", "time_share", "time_ms"]]
    emit(OP_CLASSES, {"key": key_of(sweep, max(ok)).columns(), "rows": classes.to_dict(orient="records")})


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
    parser.add_argument(
        "--groups-file",
        required=True,
        help="a JSON file: a list of {model, resolution, precision, backend, batches, attribute}",
    )
    parser.add_argument(
        "--settings",
        required=True,
        help="JSON {device, channels_last, cudnn, min_time_ms, peak_tflops, fit_batch, threads}",
    )
    return parser.parse_args(argv)


def group_request(group: dict, settings: dict) -> MeasureRequest:
    """The request of one group's sweep (checked: a bad setting is a UsageError)."""
    return MeasureRequest(
        group.get("spec") or group["model"],
        precision=group["precision"],
        backend=group["backend"],
        device=settings["device"],
        resolution=group["resolution"],
        channels_last=settings["channels_last"],
        peak_tflops=settings["peak_tflops"],
        plan=timing_window(settings["min_time_ms"]),
        cudnn=CudnnSettings.from_dict(settings["cudnn"]),
        threads=settings.get("threads"),
    )


def measure_group(group: dict, settings: dict, since_s: float) -> float:
    """One model's sweep over its batch sizes, each row told as soon as it is measured, with the wall time since
    the previous row (``since_s`` for the first). Returns the last row's time. Raises on bad input."""
    sweep = prepare_sweep(group_request(group, settings))
    record = zoo.model_record(zoo.parse_spec(sweep.model_id))
    if record is not None:  # the store knows the model without its file (a NAS architecture)
        emit(RECORD, {"model": sweep.model_id, "record": record})
    if sweep.plan.min_total_ms < GPU_PLAN.min_total_ms and sweep.device.type == "cuda":
        sweep.notes.append(
            f"timed samples cover {sweep.plan.min_total_ms:.0f} ms: NVML utilization not sampled reliably"
        )
    last_s = since_s

    def teller(tag: str):
        def tell(row: ProfileRow) -> None:
            nonlocal last_s
            now_s = time.perf_counter()
            emit(tag, measurement_row(sweep, row, now_s - last_s))
            last_s = now_s

        return tell

    fitted = teller(FITTED_ROW) if settings.get("fit_batch") else None
    rows = run_sweep(sweep, list(group["batches"]), teller(ROW), fitted, settings.get("fit_batch") or "halve")
    if group.get("attribute"):
        record_op_classes(sweep, rows)
    return last_s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_with_parent()
    last_s = START_S  # the first row's wall time includes the process start
    with open(args.groups_file) as listing:
        groups = json.load(listing)
    for group in groups:
        try:
            last_s = measure_group(group, json.loads(args.settings), last_s)
        except (UtilscopeError, ValueError) as exc:  # the runner records the group's cells as errors
            print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        emit(GROUP_DONE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
