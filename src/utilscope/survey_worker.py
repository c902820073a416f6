"""One survey worker: measure one model, precision and backend at several batch sizes; store each row at once.

Run by the survey runner as ``python -m utilscope.survey_worker --db ... --model ...``, one process per group,
so that a crash or a hang costs only this group. Exit code 2 with a one-line message for bad input.
"""

from __future__ import annotations

import time

START_S = time.perf_counter()

import argparse  # noqa: E402
import ctypes  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

from utilscope import model_sets  # noqa: E402
from utilscope.errors import UtilscopeError  # noqa: E402
from utilscope.measure.profile import ProfileRow, Sweep, prepare_sweep, run_sweep  # noqa: E402
from utilscope.store import Store  # noqa: E402
from utilscope.survey import PARENT_ENV, software_string  # noqa: E402


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
    parser = argparse.ArgumentParser(prog="utilscope.survey_worker")
    parser.add_argument("--db", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", required=True, help="comma-separated batch sizes")
    parser.add_argument("--precision", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--device", default=None)
    parser.add_argument("--res", type=int, default=None)
    parser.add_argument("--attribute", action="store_true", help="also record op-class time shares")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_with_parent()
    try:
        batches = [int(b) for b in args.batch.split(",")]
        sweep = prepare_sweep(args.model, args.precision, args.backend, args.device, args.res)
    except (UtilscopeError, ValueError) as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    last_s = START_S
    with Store(args.db) as store:

        def store_row(row: ProfileRow) -> None:
            nonlocal last_s
            now_s = time.perf_counter()
            store.add(measurement_row(sweep, row, now_s - last_s))
            last_s = now_s

        rows = run_sweep(sweep, batches, store_row)
        if args.attribute:
            record_op_classes(store, sweep, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
