"""Claims: a run holds the cells it measures in the store, under a lease it renews while it runs, so that a second
run on the same store skips them instead of measuring them at the same time (on one GPU, each would disturb the
other's timings). The claims of a run that died expire with their lease; a finished or interrupted run releases its
own."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from utilscope import hardware
from utilscope.errors import StorageError, UtilscopeError
from utilscope.measure.nvml import device_uuid
from utilscope.survey.plan import SurveyPlan
from utilscope.survey.store import Store

LEASE_S = 120.0  # a claim lives this long unless renewed
RENEW_EVERY_S = 30.0


@dataclass
class Lease:
    """What a run holds: its owner name, the device it measures on, the part of its plan it claimed, how many of the
    plan's cells another live run holds (skipped here), the other runs measuring on the same device now, and how
    many of the plan's cells another run stored after this one planned (skipped here)."""

    owner: str
    device: str
    plan: SurveyPlan
    taken: int
    neighbours: list[str]
    stored_meanwhile: int = 0


def owner_name() -> str:
    """This run: host, process and a random suffix (one process may run several surveys)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def is_dead(owner: str) -> bool:
    """Whether ``owner`` is a run of this host whose process has ended (its claims need not wait for expiry)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def device_of(plan: SurveyPlan) -> str:
    """The device the plan measures on, as claims name it: the host and the GPU's UUID (or the device's name); a
    plan of a cluster's nodes, its target there (Ray gives each task a GPU of its own)."""
    if plan.target is not None and plan.target.label != "local":
        return f"cluster:{plan.target.label}"
    dev = hardware.resolve_device(plan.grid.device)
    return f"{socket.gethostname()}:{device_uuid(dev) or plan.config.device}"


def claim(plan: SurveyPlan, db: str, lease_s: float = LEASE_S) -> Lease:
    """Claim the plan's cells that no other live run holds; the lease's plan is the part claimed."""
    owner, device = owner_name(), device_of(plan)
    keys = [key for group in plan.groups for key in group.keys(plan.config)]
    with Store(db) as store:
        for dead in {o for o, _ in store.claims().values() if is_dead(o)}:
            store.release(dead)  # a run of this host that was killed: its cells are free now
        held = store.claim(keys, owner, device, lease_s, plan.grid.retry_errors)
        claims = store.claims()
        local = plan.target is None or plan.target.label == "local"
        neighbours = sorted({o for o, d in claims.values() if o != owner and d == device}) if local else []
    groups = [group.only(key.batch for key in group.keys(plan.config) if key in held) for group in plan.groups]
    claimed = SurveyPlan(
        plan.grid, plan.config, [group for group in groups if group.batches], plan.skipped, plan.target
    )
    taken = sum(1 for key in keys if key not in held and key in claims)
    return Lease(owner, device, claimed, taken, neighbours, len(keys) - len(held) - taken)


@contextlib.contextmanager
def holding(
    lease: Lease,
    db: str,
    lease_s: float = LEASE_S,
    renew_every_s: float = RENEW_EVERY_S,
) -> Iterator[Lease]:
    """Renew the lease's claims in the background while inside; release them after, however the block ends. A
    renewal the store refuses (an I/O error) stops the renewals, with one warning after the block: the claims then
    lapse, so another survey may measure some of the same cells; no row is lost. A release the store refuses is
    one warning too, not the block's error: the rows are stored, and the claims expire with their lease."""
    stop = threading.Event()
    refused: list[UtilscopeError] = []

    def renew() -> None:
        while not stop.wait(renew_every_s):
            try:
                with Store(db) as store:
                    store.renew(lease.owner, lease_s)
            except UtilscopeError as exc:  # never a thread's traceback on stderr: the survey's own writes report
                refused.append(exc)
                return

    heartbeat = threading.Thread(target=renew, name="utilscope-claims", daemon=True)
    heartbeat.start()
    try:
        yield lease
    finally:
        stop.set()
        heartbeat.join()
        if refused:
            warnings.warn(f"the survey's claims on its cells lapsed ({refused[0]})", stacklevel=3)
        try:
            with Store(db) as store:
                store.release(lease.owner)
        except StorageError as exc:
            expiry = f"they expire within {lease_s:.0f} s"
            warnings.warn(f"the survey's claims on its cells were not released ({exc}); {expiry}", stacklevel=3)
