"""What the hardware can do: datasheet peaks (``specs.toml``) and measured ceilings (GEMM, copy bandwidth)."""

from utilscope.hardware.ceilings import (
    Ceilings,
    cache_dir,
    cache_path,
    device_name,
    get_ceilings,
    measure_ceilings,
    resolve_device,
    with_threads,
)
from utilscope.hardware.specs import (
    PRECISIONS,
    USER_PEAK,
    DeviceSpec,
    SpecFileError,
    check_peak_tflops,
    default_specs_path,
    detect,
    find_spec,
    get_spec,
    load_specs,
    normalize_precision,
    specs_frame,
)

__all__ = [
    "PRECISIONS",
    "USER_PEAK",
    "Ceilings",
    "DeviceSpec",
    "SpecFileError",
    "cache_dir",
    "cache_path",
    "check_peak_tflops",
    "default_specs_path",
    "detect",
    "device_name",
    "get_ceilings",
    "find_spec",
    "get_spec",
    "load_specs",
    "measure_ceilings",
    "normalize_precision",
    "resolve_device",
    "specs_frame",
    "with_threads",
]
