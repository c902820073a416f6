"""Which Ray cluster a run uses, and whether it is still there; which executors a survey may run on (``EXECUTORS``:
this machine, or a Ray cluster), checked without importing Ray.

``--ray-address`` unset (or ``local``): a private Ray started on this machine for the run, whatever ``RAY_ADDRESS``
says. ``auto``: the cluster Ray finds (``RAY_ADDRESS``, else the one ``ray start`` started on this machine).
``HOST:PORT``: that cluster's head (its GCS port, 6379 by default). Joining is checked before Ray is asked, so a bad
address is one line, never a hang: a malformed address is refused at once, an unreachable one within
``CONNECT_TIMEOUT_S`` (the connection is first tried in a child process, which is killed when it does not answer in
time: Ray itself retries forever and prints a warning every few seconds). ``ray://`` (Ray Client) is refused: it
needs ``ray[client]`` and does not stream a task's results; run utilscope on a node of the cluster instead.

While a run streams results, ``HeadWatch`` checks every ``HEARTBEAT_S`` that the head's GCS still accepts
connections; after ``LOST_AFTER`` failed checks in a row the run stops with ``ClusterLost`` (Ray would otherwise
wait 60 s, then end the process itself).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from utilscope.errors import UsageError, UtilscopeError

RAY_EXTRA = "pip install 'utilscope[ray]'"
ACCELERATOR_PREFIX = "accelerator_type:"  # Ray's resource naming a node's GPU type
CONNECT_TIMEOUT_S = 25.0  # a cluster that does not let a driver join within this is unreachable
PROBE_TIMEOUT_S = 5.0  # a TCP connection to the head
HEARTBEAT_S = 1.0
LOST_AFTER = 3  # failed heartbeats in a row: the head is gone
PRIVATE = "local"
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>\d{1,5})")
_JOIN_CHECK = """
import logging, sys
import ray
try:
    ray.init(address=sys.argv[1], log_to_driver=False, logging_level=logging.ERROR)
except Exception as exc:
    print("utilscope-join-failed", " ".join(f"{type(exc).__name__}: {exc}".split())[:400])
    sys.exit(1)
print("utilscope-joined", ray.get_runtime_context().gcs_address)
"""


EXECUTORS = ("local", "ray")  # where a survey's work runs: subprocesses on this machine, or Ray tasks on a cluster


def check_executor(
    name: str, ray_address: str | None = None, gpu_types: str | None = None, device: str | None = None
) -> None:
    """An executor's name and options as a command line gives them: Ray's options only with ``ray`` (GPU types not
    for a CPU survey). Nothing is imported."""
    if name not in EXECUTORS:
        raise UsageError(f"unknown executor {name!r}; use one of: {', '.join(EXECUTORS)}")
    if name == "local" and (ray_address is not None or gpu_types is not None):
        raise UsageError("--ray-address and --gpu-types apply to --executor ray")
    if name == "ray" and gpu_types is not None and device is not None and device.startswith("cpu"):
        raise UsageError("--gpu-types chooses GPU types: it does not apply to --device cpu")


class ClusterLost(UtilscopeError):
    """The Ray cluster a run streams from stopped answering."""


def import_ray():
    """The ``ray`` module; UsageError naming the extra when it is not installed."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray needs Ray: {RAY_EXTRA}") from None
    return ray


def check_address(address: str | None) -> str:
    """The address as given, checked: ``local`` for a private Ray (None too), ``auto``, or ``HOST:PORT``. Raises a
    one-line UsageError for anything else."""
    if address is None or address == PRIVATE:
        return PRIVATE
    text = address.strip()
    if text == "auto":
        return text
    if text.startswith("ray://"):
        raise UsageError(
            f"--ray-address {address}: Ray Client (ray://) addresses are not supported; run utilscope on a node of "
            "the cluster and give its head as HOST:PORT (e.g. 10.0.0.1:6379) or auto"
        )
    match = _HOST_PORT.fullmatch(text)
    if match is None or not 1 <= int(match["port"]) <= 65535 or not _valid_host(match["host"]):
        raise UsageError(
            "--ray-address must be HOST:PORT of a Ray head (e.g. 10.0.0.1:6379), auto (the cluster this machine "
            f"belongs to) or local (a private Ray, the default); got {address!r}"
        )
    return text


def _valid_host(host: str) -> bool:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    if re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
    return True


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when a TCP connection to ``address`` (HOST:PORT) opens, else why not, in words."""
    host, port = _split(address)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror:
        return f"unknown host {host!r}"
    except TimeoutError:
        return f"no answer within {timeout_s:.0f} s"
    except ConnectionRefusedError:
        return "connection refused (nothing listens on that port)"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_reachable(address: str | None) -> None:
    """Raise a one-line UsageError when nothing answers at the head ``address`` names (HOST:PORT; ``auto``: the
    ``RAY_ADDRESS`` it reads, when set): a TCP probe, no Ray imported, so that the command line says it before
    importing anything heavy. A private Ray (``local``, None) has nothing to probe."""
    address = check_address(address)
    if address == PRIVATE:
        return
    named = os.environ.get("RAY_ADDRESS", "").strip() if address == "auto" else address
    if named and not named.startswith("ray://"):
        source = " (RAY_ADDRESS)" if address == "auto" else ""
        why = probe(check_address(named)) if _HOST_PORT.fullmatch(named) else "not HOST:PORT"
        if why is not None:
            raise UsageError(f"no Ray cluster answers at {named}{source}: {why}")


def check_joinable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise a one-line UsageError unless a driver can join the cluster at ``address`` (``auto`` or HOST:PORT)
    within ``timeout_s``: a TCP probe of HOST:PORT (``check_reachable``), then a join tried in a child process,
    killed when late."""
    check_reachable(address)
    command = [sys.executable, "-c", _JOIN_CHECK, address]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"no Ray cluster let this machine join at {address} within {timeout_s:.0f} s (is it the head's GCS "
            "port, 6379 by default, and does its Ray version match this one's?)"
        ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("utilscope-joined"):
        why = lines[-1].removeprefix("utilscope-join-failed ") if lines else f"exit code {done.returncode}"
        if address == "auto" and "Could not find any running Ray instance" in why:
            why = "no Ray cluster found (RAY_ADDRESS is not set and `ray start` started none on this machine)"
        raise UsageError(f"cannot join the Ray cluster at {address}: {why}")


def start_or_join(ray, address: str) -> str:
    """Connect this process to Ray (``address`` from ``check_address``); returns what it joined, in words."""
    if address == PRIVATE:
        ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        return f"a private Ray on this machine: {describe_cluster(ray)}"
    check_joinable(address)
    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    return f"the Ray cluster at {ray.get_runtime_context().gcs_address}: {describe_cluster(ray)}"


HANDLED = "A worker died or was killed while executing a task"  # the executor resubmits the task, then records it


def quiet_handled_errors() -> None:
    """Keep Ray's raylet from printing, on the driver's stdout, the multi-line block (colour codes and all) of a worker
    that died in a task: ``executors`` resubmits the task's cells and records the failure itself, in one line. Ray
    has no switch for it (``log_to_driver`` does not cover the raylet's error messages), so its printer is wrapped;
    every other message passes. A Ray without that printer is left as it is."""
    from ray._private import worker

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "utilscope_quiet", False):
        return

    def quiet(data, *args, **kwargs):
        if data.get("pid") == "raylet" and any(str(line).startswith(HANDLED) for line in data.get("lines", [])):
            return None
        return printer(data, *args, **kwargs)

    quiet.utilscope_quiet = True
    worker.print_to_stdstream = quiet


def describe_cluster(ray) -> str:
    """The live nodes, their CPUs and their GPUs by type: "3 nodes, 48 CPUs, GPUs: 4 H100, 2 A100" ("GPUs: none")."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    cpus = sum(node["Resources"].get("CPU", 0) for node in nodes)
    gpus: Counter = Counter()
    for node in nodes:
        resources = node["Resources"]
        types = [name.removeprefix(ACCELERATOR_PREFIX) for name in resources if name.startswith(ACCELERATOR_PREFIX)]
        gpus["/".join(sorted(types)) or "of unknown type"] += int(resources.get("GPU", 0))
    gpu_text = ", ".join(f"{count} {name}" for name, count in sorted(gpus.items()) if count) or "none"
    return f"{len(nodes)} node{'s' * (len(nodes) != 1)}, {cpus:g} CPUs, GPUs: {gpu_text}"


@dataclass
class HeadWatch:
    """Whether the head's GCS still accepts connections, checked at most every ``every_s``; ``check`` raises
    ``ClusterLost`` after ``lost_after`` failed checks in a row."""

    address: str  # the GCS, HOST:PORT
    every_s: float = HEARTBEAT_S
    lost_after: int = LOST_AFTER
    failures: int = 0
    last_s: float = 0.0

    def check(self, now: bool = False) -> None:
        """Probe the head unless it was probed within ``every_s`` (``now``: probe anyway)."""
        now_s = time.monotonic()
        if not now and now_s - self.last_s < self.every_s:
            return
        self.last_s = now_s
        why = probe(self.address, timeout_s=max(2 * self.every_s, 1.0))
        self.failures = 0 if why is None else self.failures + 1
        if self.failures >= self.lost_after:
            raise ClusterLost(f"lost the Ray cluster: its head at {self.address} stopped answering ({why})")

    def confirm(self) -> None:
        """Return once the head answers; raise ``ClusterLost`` after ``lost_after`` failed checks in a row (before
        a lost task is submitted again: a submission to a cluster without its head blocks)."""
        self.check(now=True)
        while self.failures:
            time.sleep(self.every_s)
            self.check(now=True)
