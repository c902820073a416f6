"""utilscope.hardware: the datasheet table (specs.toml) and measured ceilings. CPU and fast, except `gpu`."""

from __future__ import annotations

import json
import math
import textwrap
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
import torch

from utilscope.errors import UsageError
from utilscope.hardware import (
    PRECISIONS,
    USER_PEAK,
    Ceilings,
    DeviceSpec,
    SpecFileError,
    cache_dir,
    cache_path,
    check_peak_tflops,
    detect,
    get_ceilings,
    get_spec,
    load_specs,
    resolve_device,
    specs_frame,
)
from utilscope.hardware import ceilings as ceilings_mod
from utilscope.hardware.devices import check_device
from utilscope.precision import Precision

SPECS = load_specs()
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# CUDA device names as torch.cuda.get_device_name() reports them -> the row they must select.
TYPICAL_NAMES = [
    ("Tesla T4", "t4"),
    ("Tesla V100-SXM2-16GB", "v100_sxm2"),
    ("Tesla V100-SXM2-32GB", "v100_sxm2"),
    ("Tesla V100-PCIE-16GB", "v100_pcie"),
    ("Tesla V100-PCIE-32GB", "v100_pcie"),
    ("Tesla V100S-PCIE-32GB", "v100s_pcie"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100_pcie_40gb"),
    ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA H100 80GB HBM3", "h100_sxm"),
    ("NVIDIA H100 PCIe", "h100_pcie"),
    ("NVIDIA H200", "h200_sxm"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GeForce RTX 3090", "rtx_3090"),
    ("NVIDIA GeForce RTX 4090", "rtx_4090"),
    ("NVIDIA GeForce RTX 5090", "rtx_5090"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx_pro_6000_maxq"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx_pro_6000"),
    ("NVIDIA A30", "a30"),
    ("NVIDIA A40", "a40"),
    ("NVIDIA RTX A6000", "rtx_a6000"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx_6000_ada"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA H100 NVL", "h100_nvl"),
    ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA TITAN V", "titan_v"),
    ("NVIDIA GeForce RTX 2080 Ti", "rtx_2080_ti"),
    ("NVIDIA TITAN RTX", "titan_rtx"),
    ("NVIDIA GeForce RTX 3080", "rtx_3080"),
    ("NVIDIA GeForce RTX 3080 Ti", "rtx_3080_ti"),
    ("NVIDIA GeForce RTX 4080", "rtx_4080"),
    ("NVIDIA GeForce RTX 4070 Ti", "rtx_4070_ti"),
    ("NVIDIA GeForce RTX 5080", "rtx_5080"),
    ("Tesla P100-SXM2-16GB", "p100_sxm2"),
    ("Tesla P100-PCIE-16GB", "p100_pcie_16gb"),
    ("Tesla P100-PCIE-12GB", "p100_pcie_12gb"),
    ("Tesla P40", "p40"),
    ("Tesla P4", "p4"),
    ("NVIDIA GeForce GTX 1080 Ti", "gtx_1080_ti"),
    ("GeForce GTX 1080 Ti", "gtx_1080_ti"),  # drivers before 2021 leave out the vendor word
    ("NVIDIA GeForce GTX 1080", "gtx_1080"),
    ("NVIDIA GeForce GTX 1070", "gtx_1070"),
    ("TITAN Xp", "titan_xp"),
    ("NVIDIA TITAN X (Pascal)", "titan_x_pascal"),
    ("Tesla M40 24GB", "m40"),
    ("Tesla M40", "m40"),
    ("Tesla M60", "m60"),
    ("GeForce GTX TITAN X", "titan_x_maxwell"),
    ("Tesla K80", "k80"),
    ("Tesla K40m", "k40"),
]

# Real GPUs that differ from every row (clocks, SMs, memory): a wrong peak is worse than none.
UNMATCHED_NAMES = [
    "NVIDIA A10G",
    "NVIDIA H200 NVL",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA GeForce RTX 5090 D",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q",
    "NVIDIA GeForce GTX 1070 Ti",
    "Tesla P6",
    "Tesla M4",
    "Tesla K20Xm",
    "AMD Instinct MI300X",
    "cpu",
    "",
]


# ---------------------------------------------------------------- the shipped table


@pytest.mark.parametrize("spec", SPECS, ids=[s.key for s in SPECS])
def test_every_row_loads_with_positive_numbers(spec: DeviceSpec) -> None:
    assert spec.name and spec.source and spec.patterns and spec.examples
    assert spec.sm_count > 0 and spec.memory_gb > 0 and spec.memory_bandwidth_gbs > 0
    assert spec.peak_source == "datasheet"
    assert "fp32" in spec.precisions
    for prec in spec.precisions:
        assert math.isfinite(spec.peak_tflops(prec)) and spec.peak_tflops(prec) > 0


def has_tensor_cores(spec: DeviceSpec) -> bool:
    """Volta and later, but the GeForce GTX cards (the GTX 16 series has none either)."""
    return spec.architecture not in {"Kepler", "Maxwell", "Pascal"} and "GeForce GTX" not in spec.name


@pytest.mark.parametrize("spec", SPECS, ids=[s.key for s in SPECS])
def test_peaks_are_dense_and_consistent(spec: DeviceSpec) -> None:
    """A sparse (2x) figure entered by mistake breaks these ratios."""
    peaks = spec.peaks_tflops
    if not has_tensor_cores(spec):  # PyTorch's FP16 (FP32 accumulate) runs on the FP32 units; INT8 is DP4A
        assert peaks.get("fp16", peaks["fp32"]) == peaks["fp32"] and not {"tf32", "bf16"} & set(peaks)
        assert peaks.get("int8", 4 * peaks["fp32"]) == pytest.approx(4 * peaks["fp32"], rel=0.03)
        return
    assert peaks["fp16"] > peaks["fp32"]  # every other row has fp16 tensor cores
    if "bf16" in peaks:
        assert peaks["bf16"] == peaks["fp16"]
    if "tf32" in peaks:  # TF32 runs at half the FP16 (FP32-accumulate) rate on every listed GPU
        assert peaks["tf32"] == pytest.approx(peaks["fp16"] / 2, rel=0.03)
    if "int8" in peaks:  # 2x FP16 on data-center parts, 4x the FP32-accumulate FP16 on GeForce
        ratio = peaks["int8"] / peaks["fp16"]
        assert ratio == pytest.approx(2, rel=0.03) or ratio == pytest.approx(4, rel=0.03)


def test_table_covers_the_asked_gpus() -> None:
    keys = {s.key for s in SPECS}
    assert {k for _, k in TYPICAL_NAMES} <= keys
    assert len(keys) == len(SPECS)


def test_h200_peaks_match_gpu_md() -> None:
    h200 = get_spec("h200_sxm")
    # GPU.md: fp16/bf16 989.4, tf32 494.7, fp32 66.9, int8 1979 TOPS, 4.8 TB/s, 132 SMs
    assert h200.peak_tflops("fp16") == 989.4
    assert h200.peak_tflops("bf16") == 989.4
    assert h200.peak_tflops("tf32") == 494.7
    assert h200.peak_tflops("fp32") == 66.9
    assert h200.peak_tflops("int8") == 1979
    assert (h200.memory_bandwidth_gbs, h200.sm_count) == (4800, 132)


def test_spec_file_ships_inside_the_package() -> None:
    assert resources.files("utilscope.hardware").joinpath("specs.toml").is_file()


# ---------------------------------------------------------------- detection and lookup


@pytest.mark.parametrize(("device_name", "key"), TYPICAL_NAMES)
def test_detect_typical_cuda_names(device_name: str, key: str) -> None:
    spec = detect(device_name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize("spec", SPECS, ids=[s.key for s in SPECS])
def test_every_example_detects_its_own_row(spec: DeviceSpec) -> None:
    for example in spec.examples:
        assert detect(example) == spec


@pytest.mark.parametrize("device_name", UNMATCHED_NAMES)
def test_unknown_or_different_gpus_are_not_matched(device_name: str) -> None:
    assert detect(device_name) is None


def test_near_names_pick_the_right_row() -> None:
    assert detect("NVIDIA H100 PCIe").key != "h100_sxm"
    assert detect("NVIDIA H200").key != "h100_sxm"
    assert detect("NVIDIA A10").key == "a10"  # not an A100 row
    assert detect("nvidia h200").key == "h200_sxm"  # case-insensitive


def test_get_spec_by_key_name_or_device_name() -> None:
    assert get_spec("h100_pcie").key == "h100_pcie"
    assert get_spec("NVIDIA H100 PCIe").key == "h100_pcie"
    assert get_spec("nvidia l40s").key == "l40s"
    assert get_spec("Tesla V100-SXM2-32GB").key == "v100_sxm2"
    with pytest.raises(UsageError, match="h200_sxm"):  # the message lists the known keys
        get_spec("TPU v5e")


def test_a_family_name_resolves_to_its_one_gpu_or_lists_exactly_its_members() -> None:
    from utilscope.hardware.specs import lookup_gpu

    assert lookup_gpu("all") is None
    assert lookup_gpu("h200").key == "h200_sxm" and lookup_gpu("v100s").key == "v100s_pcie"  # one member: that GPU
    with pytest.raises(UsageError, match=r"'a100' names 4 GPUs .*: a100_sxm4_40gb, a100_sxm4_80gb, a100_pcie_40gb, "):
        lookup_gpu("a100")
    with pytest.raises(UsageError, match=r"'a100_80gb' names 2 GPUs .*: a100_sxm4_80gb, a100_pcie_80gb;"):
        lookup_gpu("a100_80gb")
    with pytest.raises(UsageError, match=r"unknown GPU 'rtx50'; closest: rtx5090, rtx5080, "):  # prefixes first
        lookup_gpu("rtx50")
    with pytest.raises(UsageError, match=r"NVIDIA T4 has no bf16 unit for bf16; it has: fp32, fp16, int8$"):
        lookup_gpu("t4", "bf16")


def test_missing_unit_raises_usage_error_listing_available() -> None:
    with pytest.raises(UsageError, match=r"no tf32 peak.*available: fp32, fp16, int8"):
        get_spec("t4").peak_tflops("tf32")
    with pytest.raises(UsageError, match=r"available: fp32, fp16$|available: fp32, fp16\."):
        get_spec("v100_sxm2").peak_tflops("int8")


def test_unknown_precision_lists_choices() -> None:
    with pytest.raises(UsageError, match="fp32, fp32_strict, tf32, fp16, bf16, int8"):
        get_spec("a10").peak_tflops("fp8")
    assert get_spec("a10").peak_tflops("FP16") == 125


def test_a_user_peak_is_a_positive_finite_number() -> None:
    assert check_peak_tflops(123) == 123.0 and USER_PEAK == "user --peak"
    for bad in (0, -1, math.nan, math.inf, True, "100"):
        with pytest.raises(UsageError, match="--peak must be a positive, finite number"):
            check_peak_tflops(bad)


def test_specs_frame() -> None:
    frame = specs_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(SPECS)
    for column in ("key", "name", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "int8_tops", "source"):
        assert column in frame.columns
    t4 = frame.set_index("key").loc["t4"]
    assert math.isnan(t4["tf32_tflops"]) and t4["fp16_tflops"] == 65


# ---------------------------------------------------------------- malformed tables

ROW_A = """
[gpu.a]
name = "GPU A"
patterns = ['^GPU A$']
examples = ["GPU A"]
sm_count = 10
memory_gb = 8
memory_bandwidth_gbs = 100
memory_technology = "GDDR6"
memory_bus_bits = 256
fp32_tflops = 1.0
fp16_tflops = 4.0
source = "test"
architecture = "Ampere"
compute_capability = "8.6"
boost_clock_mhz = 1000
base_clock_mhz = 800
l2_cache_mb = 4
smem_per_sm_kb = 100
tdp_w = 100
source_hardware = "test"
"""


def _write(tmp_path, body: str, header: str = "schema_version = 3\n"):
    path = tmp_path / "specs.toml"
    path.write_text(header + textwrap.dedent(body))
    return path


def test_custom_table_loads(tmp_path) -> None:
    specs = load_specs(_write(tmp_path, ROW_A))
    assert [s.key for s in specs] == ["a"]
    assert detect("GPU A", specs).peak_tflops("fp16") == 4.0


@pytest.mark.parametrize(
    ("architecture", "capability", "memory"),
    [
        ("Kepler", "3.7", "GDDR5"),
        ("Kepler", "3.5", "GDDR5"),
        ("Maxwell", "5.2", "GDDR5"),
        ("Pascal", "6.0", "HBM2"),
        ("Pascal", "6.1", "GDDR5X"),
    ],
)
def test_older_architectures_and_memories_load(tmp_path, architecture: str, capability: str, memory: str) -> None:
    """Kepler, Maxwell and Pascal rows, on GDDR5 or GDDR5X, without an fp16 unit: a missing unit is left out."""
    row = (
        ROW_A.replace('"Ampere"', f'"{architecture}"')
        .replace('"8.6"', f'"{capability}"')
        .replace('"GDDR6"', f'"{memory}"')
        .replace("fp16_tflops = 4.0\n", "")
    )
    spec = load_specs(_write(tmp_path, row))[0]
    assert (spec.architecture, spec.compute_capability, spec.memory_technology) == (architecture, capability, memory)
    assert "fp16" not in spec.precisions
    with pytest.raises(UsageError, match=r"GPU A has no fp16 peak .*available: fp32"):
        spec.peak_tflops("fp16")


def test_a_pascal_capability_is_not_a_kepler_one(tmp_path) -> None:
    row = ROW_A.replace('"Ampere"', '"Kepler"').replace('"8.6"', '"6.1"')
    with pytest.raises(SpecFileError, match=r"compute_capability '6.1' is not a Kepler one \(3.0, 3.2, 3.5, 3.7\)"):
        load_specs(_write(tmp_path, row))


@pytest.mark.parametrize(
    ("device_name", "key"),
    [("Tesla P100-PCIE-16GB", "p100_pcie_16gb"), ("Tesla P100-SXM2-16GB", "p100_sxm2"), ("Tesla K80", "k80")],
)
def test_p100_and_k80_names_match_exactly_one_row(device_name: str, key: str) -> None:
    assert [spec.key for spec in SPECS if spec.matches(device_name)] == [key]


def test_the_older_gpus_units() -> None:
    """Pascal, Maxwell and Kepler have no tensor cores: a unit they lack is a one-line error naming the ones they
    have; the P100's fp16 is PyTorch's FP32-accumulate rate, its FP32 one; the dual-GPU boards are rows of one GPU."""
    from utilscope.hardware.specs import lookup_gpu

    with pytest.raises(UsageError, match=r"^NVIDIA Tesla P40 has no bf16 unit for bf16; it has: fp32, int8$"):
        lookup_gpu("p40", "bf16")
    with pytest.raises(UsageError, match=r"^NVIDIA Tesla P4 has no fp16 unit for amp; it has: fp32, int8$"):
        lookup_gpu("p4", "amp")
    with pytest.raises(UsageError, match=r"^NVIDIA Tesla K80 \(one GPU of two\) has no bf16 unit"):
        lookup_gpu("k80", "amp_bf16")
    assert lookup_gpu("p100_sxm2", "amp").peak_tflops("fp16") == lookup_gpu("p100_sxm2").peak_tflops("fp32") == 10.6
    assert lookup_gpu("p40", "tf32").unit_for(Precision.TF32) == "fp32"  # no TF32 units: TF32-allowed math on FP32
    k80, m60 = get_spec("k80"), get_spec("m60")
    assert (k80.sm_count, k80.tdp_w, k80.memory_gb, k80.memory_bandwidth_gbs) == (13, 150, 12, 240)
    assert (m60.sm_count, m60.tdp_w, m60.memory_gb) == (16, 150, 8)
    assert {get_spec(k).smem_per_sm_kb for k in ("k40", "k80", "m40", "p100_sxm2", "p40")} == {48, 112, 96, 64}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (ROW_A + "\n[gpu.b\n", "invalid TOML"),
        (ROW_A + ROW_A, "invalid TOML"),  # the same [gpu.a] table twice
        (ROW_A.replace('source = "test"\n', ""), r"missing required field\(s\) \['source'\]"),
        (ROW_A.replace("sm_count = 10", "sm_count = -10"), "sm_count must be a positive number"),
        (ROW_A.replace("fp32_tflops = 1.0", 'fp32_tflops = "fast"'), "fp32_tflops must be a positive"),
        (ROW_A.replace("fp32_tflops = 1.0", "fp32_tflop = 1.0"), "unknown field"),
        (ROW_A.replace("fp32_tflops = 1.0\n", ""), "fp32_tflops is required"),
        (ROW_A.replace("['^GPU A$']", "['^GPU (A$']"), "bad regular expression"),
        (ROW_A.replace("['^GPU A$']", "[]"), "patterns must be a non-empty list"),
        (ROW_A + ROW_A.replace("gpu.a]", "gpu.b]").replace('"GPU A"\n', '"GPU B"\n', 1), "appears in"),
        (
            ROW_A
            + ROW_A.replace("gpu.a]", "gpu.b]").replace("'^GPU A$'", "'GPU'").replace('name = "GPU A"', 'name = "B"'),
            "matches rows",
        ),
        (
            ROW_A
            + ROW_A.replace("gpu.a]", "gpu.b]").replace("'^GPU A$'", "'^GPU B$'").replace('["GPU A"]', '["GPU B"]'),
            "same name",
        ),
        (ROW_A.replace("[gpu.a]", "[gpu.A-1]"), "key must be lowercase"),
        (
            ROW_A.replace('"Ampere"', '"Lovelace"'),
            "architecture must be one of Kepler, Maxwell, Pascal, Volta, Turing, Ampere, Ada, Hopper",
        ),
        (ROW_A.replace('"8.6"', '"9.0"'), r"compute_capability '9.0' is not a Ampere one \(8.0, 8.6, 8.7\)"),
        (ROW_A.replace('"8.6"', "8.6"), "compute_capability must be a non-empty string"),
        (ROW_A.replace("l2_cache_mb = 4", "l2_cache_mb = 0"), "l2_cache_mb must be a positive number"),
        (ROW_A.replace("tdp_w = 100\n", ""), r"missing required field\(s\) \['tdp_w'\]"),
        (ROW_A.replace('"GDDR6"', '"DDR4"'), r"memory_technology must be one of HBM2, .*got 'DDR4'"),
        (ROW_A.replace("base_clock_mhz = 800", "base_clock_mhz = 1200"), r"base_clock_mhz \(1200\) is above"),
        (ROW_A.replace('source_hardware = "test"', 'source_hardware = " "'), "source_hardware must be a non-empty"),
    ],
    ids=[
        "syntax",
        "duplicate-key",
        "missing-field",
        "negative",
        "not-a-number",
        "typo-field",
        "no-fp32",
        "bad-regex",
        "no-patterns",
        "same-pattern",
        "overlapping-patterns",
        "duplicate-name",
        "bad-key",
        "unknown-architecture",
        "capability-of-another-architecture",
        "capability-as-a-number",
        "zero-l2",
        "no-tdp",
        "unknown-memory",
        "base-above-boost",
        "blank-hardware-source",
    ],
)
def test_malformed_table_raises_clear_error(tmp_path, body: str, message: str) -> None:
    with pytest.raises(SpecFileError, match=message):
        load_specs(_write(tmp_path, body))


def test_table_level_errors(tmp_path) -> None:
    with pytest.raises(SpecFileError, match="schema_version must be 3 .every row has architecture"):
        load_specs(_write(tmp_path, ROW_A, header="schema_version = 1\n"))  # a table from before the chip fields
    with pytest.raises(SpecFileError, match="unknown top-level"):
        load_specs(_write(tmp_path, ROW_A, header="schema_version = 3\ngpus_typo = 1\n"))
    with pytest.raises(SpecFileError, match="non_matching_examples entry 'GPU A'"):
        load_specs(_write(tmp_path, ROW_A, header='schema_version = 3\nnon_matching_examples = ["GPU A"]\n'))
    with pytest.raises(SpecFileError, match="no \\[gpu"):
        load_specs(_write(tmp_path, ""))
    with pytest.raises(SpecFileError, match="not found"):
        load_specs(tmp_path / "absent.toml")


def test_spec_file_error_is_a_usage_error() -> None:
    assert issubclass(SpecFileError, UsageError)


# ---------------------------------------------------------------- ceilings (CPU)

TINY = {"gemm_n": 64, "copy_mib": 1}


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("UTILSCOPE_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_the_suite_never_writes_the_users_cache(isolated_caches) -> None:
    assert cache_dir().is_relative_to(isolated_caches) and not cache_dir().is_relative_to(Path.home() / ".cache")


def test_cache_dir_honours_env_var(cache_env) -> None:
    assert cache_dir() == cache_env / "ceilings"
    assert cache_path("Some GPU/x", "2.0").parent == cache_env / "ceilings"
    assert "Some-GPU-x" in cache_path("Some GPU/x", "2.0").name


def test_cache_dir_default(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("UTILSCOPE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "utilscope" / "ceilings"


def test_cpu_ceilings_are_positive_and_cached(cache_env, monkeypatch) -> None:
    first = get_ceilings("cpu", **TINY)
    assert first.device_kind == "cpu" and first.torch_version == torch.__version__
    assert first.gemm_tflops["fp32"] > 0 and first.copy_gbs > 0
    assert set(first.gemm_tflops) <= {"fp32", "bf16"}
    assert "no datasheet peak" in first.note
    files = list((cache_env / "ceilings").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["gemm_tflops"]["fp32"] > 0

    def must_not_measure(*args, **kwargs):
        raise AssertionError("measured again instead of reading the cache")

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", must_not_measure)
    assert get_ceilings("cpu", **TINY) == first


def test_refresh_and_other_sizes_remeasure(cache_env, monkeypatch) -> None:
    first = get_ceilings("cpu", **TINY)
    calls = []
    real = ceilings_mod.measure_ceilings

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", counting)
    get_ceilings("cpu", refresh=True, **TINY)
    get_ceilings("cpu", gemm_n=32, copy_mib=1)
    assert [c["gemm_n"] for c in calls] == [64, 32]
    assert first.gemm_n == 64


def test_corrupt_cache_warns_and_remeasures(cache_env) -> None:
    path = cache_path(ceilings_mod.ceilings_device(torch.device("cpu")))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="unreadable ceilings cache"):
        result = get_ceilings("cpu", **TINY)
    assert result.gemm_tflops["fp32"] > 0
    assert Ceilings.from_dict(json.loads(path.read_text())) == result


def test_ceilings_round_trip_and_missing_precision() -> None:
    c = Ceilings("dev", "cpu", {"fp32": 1.5}, 10.0, "2025-01-01T00:00:00+00:00", "2.x", "n", 64, 1)
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert c.tflops("FP32") == 1.5
    with pytest.raises(UsageError, match="measured: fp32"):
        c.tflops("fp16")


def _tf32_state() -> object:
    matmul = torch.backends.cuda.matmul
    # torch >= 2.9 has the new API; reading the legacy flag while the new one is set raises there
    return matmul.fp32_precision if hasattr(matmul, "fp32_precision") else matmul.allow_tf32


def test_precision_flags_set_inside_and_restored_after() -> None:
    before = _tf32_state()
    with ceilings_mod._matmul_precision("tf32"):
        assert _tf32_state() in ("tf32", True)
    with ceilings_mod._matmul_precision("fp32"):
        assert _tf32_state() in ("ieee", False)
    assert _tf32_state() == before
    ceilings_mod.measure_gemm_tflops(torch.device("cpu"), "tf32", 32)
    assert _tf32_state() == before
    assert torch.backends.cuda.matmul.allow_tf32 == (before in ("tf32", True))  # legacy reads still work


def test_resolve_device_errors() -> None:
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(UsageError):
        resolve_device("mps")
    with pytest.raises(UsageError):
        resolve_device("nonsense-device")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="CUDA is not available"):
            resolve_device("cuda")


def test_a_device_name_is_checked_without_torch_as_torch_parses_cpu_and_cuda() -> None:
    """``devices.check_device`` (every ``--device`` while parsing, ``resolve_device`` before torch): cpu or cuda,
    optionally ``:N`` as torch parses it; anything else (another torch device type too) is a "bad device"."""
    for name in ("cpu", "cuda", "cuda:0", "cuda:7", "cuda:99", "cpu:0"):
        assert check_device(name) == name
        assert torch.device(name).type in ("cpu", "cuda")
    for name in (
        "",
        "quantum",
        "mps",
        "meta",
        "CUDA",
        " cuda",
        "cuda ",
        "cuda:",
        "cuda:00",
        "cuda:-1",
        "cuda:+1",
        "cuda:1:2",
        "cuda:100",
        "cuda:\u0661",
        None,
    ):
        with pytest.raises(UsageError, match=r"^bad device .*; use cpu, cuda or cuda:N$"):
            check_device(name)
        with pytest.raises(UsageError, match=r"^bad device "):
            resolve_device(name) if name is not None else check_device(name)
    with pytest.raises(UsageError, match=r"^unsupported device"):
        resolve_device(torch.device("meta"))  # a device object, from an API caller, is torch's to parse


def test_bad_sizes_are_usage_errors(cache_env) -> None:
    with pytest.raises(UsageError, match="gemm_n"):
        get_ceilings("cpu", gemm_n=0, copy_mib=1)


def test_every_precision_has_datasheet_peaks() -> None:
    """The peak table and the Precision enum name the same precisions: each has a peak in some spec."""
    for precision in PRECISIONS:
        assert any(precision in spec.peaks_tflops for spec in SPECS), precision


# ---------------------------------------------------------------- GPU only


@pytest.mark.gpu
@needs_cuda
def test_gpu_is_in_the_table() -> None:
    name = torch.cuda.get_device_name()
    assert detect(name) is not None, f"{name!r} has no row in specs.toml"


@pytest.mark.gpu
@needs_cuda
def test_gpu_ceilings_below_datasheet(cache_env) -> None:
    result = get_ceilings("cuda", gemm_n=4096, copy_mib=256)
    assert result.device_kind == "cuda" and result.copy_gbs > 0
    assert result.gemm_tflops["fp16"] > result.gemm_tflops["fp32"] > 0
    spec = detect(result.device_name)
    if spec is not None and "GeForce" not in spec.name:  # GeForce boost clocks can beat the rated peak
        for prec, measured in result.gemm_tflops.items():
            assert measured <= 1.05 * spec.peak_tflops(prec), prec
        assert result.copy_gbs <= 1.05 * spec.memory_bandwidth_gbs


def test_an_alias_names_its_row_and_names_one_row_only(tmp_path):
    """timm's file names call GPUs "5090" or "rtx4090": the table's aliases find their rows; an alias that is
    another row's key is refused when the table loads."""
    assert [get_spec(alias).key for alias in ("5090", "RTX4090", "4090", "rtx3090")] == [
        "rtx_5090",
        "rtx_4090",
        "rtx_4090",
        "rtx_3090",
    ]
    row_b = ROW_A.replace("gpu.a]", "gpu.b]").replace("'^GPU A$'", "'^GPU B$'").replace('["GPU A"]', '["GPU B"]')
    path = _write(tmp_path, ROW_A + row_b.replace('name = "GPU A"', 'name = "GPU B"\naliases = ["a"]'))
    with pytest.raises(SpecFileError, match="have the same name or alias 'a'"):
        load_specs(path)


def test_one_alignment_rule_keyed_by_precision_and_architecture():
    from utilscope.hardware.alignment import channel_multiple

    assert [channel_multiple(p) for p in ("fp16", "bf16", "amp", "amp_bf16", "tf32", "fp32", "int8")] == [
        8,
        8,
        8,
        8,
        4,
        4,
        16,
    ]
    assert channel_multiple("fp16", "Hopper") == 8  # no architecture of its own: the rule for every one
    with pytest.raises(UsageError, match="no channel alignment for precision 'fp8'"):
        channel_multiple("fp8")
