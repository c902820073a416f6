"""NVIDIA's time-based "GPU utilization", sampled with nvidia-ml-py during a timed run, for contrast.

NVML's figure is the percent of time over its last sample period (1/6 s to 1 s, by device) during which at
least one kernel was running: 100% says nothing about how many of the SMs or math units were busy. Because each
reading looks back over that period, readings from the first ``settle_s`` of a window (which still see the
time before it) are discarded; GPU profiles time at least one second so that enough readings remain.
"""

from __future__ import annotations

import statistics
import threading

import torch


class NvmlSampler:
    """Context manager; ``mean_percent`` is the mean of the samples taken inside it, or None without NVML."""

    def __init__(self, device: torch.device, interval_s: float = 0.02, settle_s: float = 0.3):
        self.device = device
        self.interval_s = interval_s
        self.settle_s = settle_s
        self.samples: list[int] = []
        self.unavailable_reason: str | None = None
        self._handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _open(self) -> None:
        if self.device.type != "cuda":
            self.unavailable_reason = "not a CUDA device"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = nvml_handle(pynvml, self.device)
            self._pynvml = pynvml
        except Exception as exc:  # no driver library, no permission: the row records None and why
            self.unavailable_reason = f"NVML unavailable: {type(exc).__name__}: {exc}"

    def _loop(self) -> None:
        if self._stop.wait(self.settle_s):
            return
        while not self._stop.wait(self.interval_s):
            self.samples.append(self._pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

    def __enter__(self) -> NvmlSampler:
        self._open()
        if self._handle is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean_percent(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None


def device_uuid(device: torch.device) -> str | None:
    """The CUDA device's UUID as NVML and nvidia-smi print it ("GPU-…"); None for other devices."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"GPU-{torch.cuda.get_device_properties(index).uuid}"


def nvml_handle(pynvml, device: torch.device):
    """NVML's handle of a torch CUDA device, found by UUID: NVML numbers all GPUs of the machine, while torch's
    index counts only those in CUDA_VISIBLE_DEVICES (a survey worker on the second GPU is torch's cuda:0)."""
    return pynvml.nvmlDeviceGetHandleByUUID(device_uuid(device))


def driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else version
    except Exception:  # no NVML here: the environment records None
        return None
