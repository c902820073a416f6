"""Terminal views and the JSON beside them: what the tables leave out, how they name things, what they hide."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

import utilscope
from utilscope.cli import main
from utilscope.present.count_view import layer_table

# Block allocates an empty tensor in a non-leaf module, as timm's BatchNormAct2d does: an op-level layer of no cost
EMPTY_OPS = """
import torch
import torch.nn as nn

RESOLUTION = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        torch.empty(0, device=x.device)
        return self.act(self.conv(x)) + x.mean()


def make():
    return nn.Sequential(Block(), nn.Identity(), nn.Flatten())
"""


@pytest.fixture(scope="module")
def empty_ops(write_factory) -> str:
    return f"{write_factory(EMPTY_OPS, 'empty_ops')}:make"


def render(renderable, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_count_leaves_out_zero_cost_op_layers(empty_ops, capsys):
    result = utilscope.count(empty_ops)
    assert [lay.type for lay in result.layers if lay.is_empty_op] == ["aten.empty"]
    text = render(layer_table(result))
    assert "0.empty" not in text and "0.conv" in text and "0.add" in text  # the add of the block is real work
    assert "not shown: zero-cost op layers (aten.empty ×1)" in text
    assert "Identity" in text  # the whole table (--all-layers) keeps a module that does nothing: the user wrote it
    compact = layer_table(result, compact=True)
    assert "Identity" not in compact.columns[2]._cells  # folded: the Identity and a layer of no cost
    assert "2 layers that do no work" in compact.caption
    assert main(["count", empty_ops, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [layer["name"] for layer in doc["layers"]] == [lay.name for lay in result.layers if not lay.is_empty_op]
    assert doc["omitted_layers"] == {"aten.empty": 1}
    other = {row["op_class"]: row["layers"] for row in doc["op_classes"]}.get("other", 0)
    assert other == 2  # Identity and Flatten, not the empty op


# --- profile on a CPU: title, backend, columns, footer, digits; the CPU ceiling cached with its spread ------------


def test_significant_digits_are_kept_for_small_numbers():
    from utilscope.units import significant

    assert [significant(v) for v in (0.00312, 0.4, 8.4, 33.14, 127.5, 1234.6, 0.0)] == [
        "0.00312",
        "0.400",
        "8.40",
        "33.1",
        "128",
        "1,235",
        "0",
    ]
    assert significant(None) == "-" and significant(float("nan")) == "-"


def spread_of(best: float, worst: float) -> dict:
    return {"min": worst, "median": (best + worst) / 2, "max": best, "reps": 10}


def cpu_ceilings(best: float = 0.2, worst: float = 0.19):
    import torch

    from utilscope.hardware import Ceilings

    return Ceilings(
        "test CPU (2 threads)",
        "cpu",
        {"fp32": best},
        20.0,
        "2026-01-01T00:00:00+00:00",
        torch.__version__,
        "test",
        1024,
        256,
        {"fp32": spread_of(best, worst)},
        spread_of(20.0, 19.0),
    )


def cpu_result(tiny, **options):
    from conftest import QUICK

    from utilscope.measure import profile

    return profile(tiny, batches=[1, 2], device="cpu", plan=QUICK, ceilings=cpu_ceilings(), **options)


def render_profile_text(result, width: int) -> str:
    from utilscope.present.profile_view import render_profile

    console = Console(file=io.StringIO(), width=width, color_system=None)
    render_profile(result, console)
    return console.file.getvalue()


def test_cpu_profile_names_what_ran_and_hides_what_means_nothing(tiny):
    from utilscope.present.profile_view import title_phrases

    result = cpu_result(tiny)  # the default backend, graph: plain launches on a CPU
    assert result.backend == "graph" and result.backend_ran == "eager"
    assert result.to_dict()["backend_ran"] == "eager" and result.to_dict()["ceilings"]["gemm_n"] == 1024
    narrow = max(60, 4 + max(len(phrase) for phrase in title_phrases(result)))  # the model's path may be long
    text = render_profile_text(result, width=narrow)
    table_top = text.index("┏")
    title = text[:table_top]
    for phrase in title_phrases(result):  # each phrase whole on one line: the title breaks between phrases only
        assert any(phrase in line for line in title.splitlines()), (phrase, title)
    assert "eager (asked: graph)" in title
    text = render_profile_text(result, width=200)
    header = text[text.index("┏") :].splitlines()[1]
    assert "util" in header and "ceiling" not in header and "BW" not in header and "nvml" not in header
    footer = text[text.index("└") :]
    assert "CUDA 1" not in footer and "cuDNN" not in footer and "driver" not in footer and "nvml" not in footer
    assert "best of 10 repetitions (median 0.195, range 0.190-0.200 TFLOP/s)" in " ".join(footer.split())


def synthetic_result(device_type: str):
    from utilscope.measure.sweep import ProfileResult, ProfileRow

    gpu = device_type == "cuda"
    row = ProfileRow(
        batch=1,
        status="ok",
        latency_ms=2500.0,
        samples_per_s=0.4,
        achieved_tflops=0.00312,
        utilization=0.0156,
        utilization_vs_ceiling=0.0201 if gpu else 0.0156,
        achieved_gbs=0.0312,
        peak_tflops=0.2,
        peak_source="test",
        bandwidth_utilization=0.001 if gpu else None,
        nvml_util=99.0 if gpu else None,
        cv=0.01,
        cuda_graph=gpu,
    )
    env = {"device_type": device_type, "torch": "2.x", "cuda": "13.0", "cudnn": 92400, "driver": "580.1"}
    return ProfileResult("m", 224, 3, "dev", "graph", "fp32", True, 1_000_000, env, [row])


def test_small_throughputs_keep_their_digits_and_a_gpu_keeps_its_columns():
    text = render_profile_text(synthetic_result("cpu"), width=200)
    row = next(line for line in text.splitlines() if line.startswith("│ 1"))
    assert "0.400" in row and "0.00312" in row and "0.0312" in row  # not "0", "0.00"
    gpu = render_profile_text(synthetic_result("cuda"), width=200)
    header = next(line for line in gpu.splitlines() if "batch" in line)
    assert "util vs ceiling" in header and "BW util" in header and "nvml util" in header
    assert "CUDA 13.0 · cuDNN 92400 · driver 580.1" in gpu and "m · 224px · dev · graph ·" in gpu


def test_the_cpu_ceiling_is_cached_and_its_spread_recorded(tiny, tmp_path, monkeypatch):
    import torch

    from utilscope.hardware import ceilings as ceilings_mod
    from utilscope.measure import profile

    monkeypatch.setenv("UTILSCOPE_CACHE_DIR", str(tmp_path))
    measured = ceilings_mod.measure_ceilings("cpu", gemm_n=64, copy_mib=1)
    spread = measured.gemm_spread_tflops["fp32"]
    assert spread["min"] <= spread["median"] <= spread["max"] == measured.gemm_tflops["fp32"] and spread["reps"] >= 2
    assert measured.copy_spread_gbs["max"] == measured.copy_gbs
    assert ceilings_mod.Ceilings.from_dict(json.loads(json.dumps(measured.to_dict()))) == measured
    old = {k: v for k, v in measured.to_dict().items() if k not in ("gemm_spread_tflops", "copy_spread_gbs")}
    assert ceilings_mod.Ceilings.from_dict(old).gemm_spread_tflops == {}  # an older cache still reads
    cached = cpu_ceilings(best=0.5, worst=0.49)
    path = ceilings_mod.cache_path(ceilings_mod.ceilings_device(torch.device("cpu")))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cached.to_dict()))

    def must_not_measure(*args, **kwargs):
        raise AssertionError("the CPU ceiling was measured again instead of read from the cache")

    monkeypatch.setattr(ceilings_mod, "measure_ceilings", must_not_measure)
    from conftest import QUICK

    result = profile(tiny, batches=[1], device="cpu", plan=QUICK)
    assert result.rows[0].peak_tflops == 0.5 and result.ceilings["measured_at"] == cached.measured_at


def test_ceilings_show_their_spread_and_a_busy_measurement_is_noted():
    from utilscope.measure.precision import Precision
    from utilscope.measure.sweep import ceiling_notes
    from utilscope.present.profile_view import ceilings_text

    text = render(ceilings_text(cpu_ceilings()))
    assert "GEMM fp32: 0.200 TFLOP/s (best of 10; median 0.195, range 0.190-0.200)" in text
    assert "copy: 20.0 GB/s (bytes read + written) (best of 10; median 19.5, range 19.0-20.0)" in text
    assert ceiling_notes(cpu_ceilings(), Precision.FP32) == []  # 0.2 / 0.19 = 1.05x: steady
    (note,) = ceiling_notes(cpu_ceilings(best=0.4, worst=0.1), Precision.FP32)
    assert "varied 4.0x over its 10 repetitions (0.1-0.4 TFLOP/s)" in note and "--device cpu --refresh" in note


def test_utilization_above_the_measured_ceiling_is_noted(tiny):
    from conftest import QUICK

    from utilscope.measure import profile

    tiny_ceiling = cpu_ceilings(best=1e-6, worst=0.99e-6)  # any real run beats a ceiling of 1 MFLOP/s
    beaten = profile(tiny, batches=[1], device="cpu", plan=QUICK, ceilings=tiny_ceiling)
    assert beaten.rows[0].utilization_vs_ceiling > 1
    assert any(
        "batch 1 ran at" in note and "of the measured fp32 GEMM ceiling" in note for note in beaten.rows[0].notes
    )
    assert not any("GEMM ceiling:" in note for note in cpu_result(tiny).rows[0].notes)  # 0.2 TFLOP/s: not beaten
