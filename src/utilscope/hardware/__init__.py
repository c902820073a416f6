"""What the hardware can do: datasheet peaks (``specs.toml``) and measured ceilings (GEMM, copy bandwidth).

The datasheet names are bound here; the ceilings' (``hardware.ceilings``, which imports torch) when first asked for,
so that looking a GPU up (a command line's ``--gpu``) imports no torch."""

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
    gpu_display_name,
    load_specs,
    normalize_precision,
    specs_frame,
)
from utilscope.lazy import module_getattr

_LAZY = dict.fromkeys(
    (
        "Ceilings",
        "cache_dir",
        "cache_path",
        "device_name",
        "device_spec",
        "get_ceilings",
        "measure_ceilings",
        "resolve_device",
        "with_threads",
    ),
    "utilscope.hardware.ceilings",
)


__getattr__ = module_getattr(__name__, globals(), _LAZY)


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
    "device_spec",
    "get_ceilings",
    "find_spec",
    "get_spec",
    "gpu_display_name",
    "load_specs",
    "measure_ceilings",
    "normalize_precision",
    "resolve_device",
    "specs_frame",
    "with_threads",
]
