"""The software and hardware environment recorded with every measurement."""

from __future__ import annotations

import platform

import torch

from utilscope import hardware
from utilscope._version import __version__
from utilscope.measure.nvml import device_uuid, driver_version
from utilscope.measure.precision import Precision, supported_precisions
from utilscope.measure.settings import CudnnSettings
from utilscope.versions import installed_version

# The software versions an environment records: a results store keys a row by torch's, cuDNN's and the driver's,
# and a merge names the others where two copies of a row differ in them (``survey.merge``).
VERSION_KEYS = ("torch", "cuda", "cudnn", "driver", "torchvision", "timm", "python", "utilscope")


def environment(
    device: torch.device,
    precision: str,
    backend: str,
    channels_last: bool,
    cudnn: CudnnSettings,
    threads: int | None = None,
) -> dict:
    """What a row was measured with: device, torch's intra-op thread count (``threads``, default: torch's count
    now), driver and library versions, precision, backend, memory format and the cuDNN settings
    (``CudnnSettings.to_dict`` keys)."""
    cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "device_name": hardware.device_name(device),
        "device_type": device.type,
        "threads": torch.get_num_threads() if threads is None else threads,
        "device_uuid": device_uuid(device),  # which GPU of a machine with several (None on a CPU)
        "driver": driver_version() if device.type == "cuda" else None,
        "cuda": torch.version.cuda,
        "cudnn": cudnn_version,
        "torch": torch.__version__,
        "torchvision": installed_version("torchvision"),
        "timm": installed_version("timm"),  # the model zoos' versions: they decide what a model name builds
        "python": platform.python_version(),
        "utilscope": __version__,
        "precision": precision,
        **tf32_record(precision, device),
        "backend": backend,
        "memory_format": "channels_last" if channels_last else "contiguous",
        **cudnn.to_dict(),
    }


def tf32_record(precision: str, device: torch.device) -> dict:
    """The TF32 switches a measurement in ``precision`` runs with (``Precision.tf32_switches``) and whether this
    device has TF32 tensor cores to obey them (compute capability 8.0 and later): ``tf32_matmul``, ``tf32_conv``,
    ``tf32_unit``."""
    matmul, conv = Precision(precision).tf32_switches
    return {"tf32_matmul": matmul, "tf32_conv": conv, "tf32_unit": Precision.TF32 in supported_precisions(device)}


def device_label(env: dict) -> str:
    """The device a recorded environment names, as tables show it: a CPU's with its thread count."""
    if env.get("device_type") == "cpu" and env.get("threads"):
        return hardware.with_threads(env["device_name"], env["threads"])
    return env["device_name"]


def software_label(torch_version: str, cudnn_version, driver, cudnn: CudnnSettings) -> str:
    """A configuration's software as tables and reports show it, e.g. "torch 2.11.0+cu130 · cuDNN 91900 · driver
    580.159.04 · cudnn.benchmark off"; a version a CPU has none of is left out ("torch 2.14.1"). A label only:
    results are keyed by the versions and settings themselves."""
    parts = [f"torch {torch_version}"]
    parts += [f"{name} {version}" for name, version in (("cuDNN", cudnn_version), ("driver", driver)) if version]
    return " · ".join(parts + ([cudnn.label()] if cudnn.label() else []))
