"""Torch's thread count as a condition of a CPU cell: a column of the store's key (a GPU cell's is GPU_THREADS),
set by ``--threads`` (``MeasureRequest.threads``, ``SurveyGrid.threads``) in the measuring process. One test runs a
survey's worker subprocess on a tiny model; the rest measure nothing or only a tiny model for a few milliseconds."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from conftest import QUICK

from utilscope.cli import build_parser, main
from utilscope.cli.common import measure_request
from utilscope.errors import UsageError
from utilscope.hardware import cache_path, device_name, with_threads
from utilscope.hardware.ceilings import ceilings_device
from utilscope.measure.settings import CudnnSettings, MeasureRequest
from utilscope.measure.sweep import profile
from utilscope.survey import runner, worker
from utilscope.survey.plan import SurveyGrid, SurveyPlan, grid_configuration, plan_survey
from utilscope.survey.runner import RunOptions
from utilscope.survey.schema import GPU_THREADS, Configuration
from utilscope.survey.store import Store

ENVIRONMENT = {
    "device_name": "NVIDIA H200",
    "device_type": "cuda",
    "threads": 8,
    "memory_format": "channels_last",
    "torch": "2.11.0+cu130",
    "cudnn": 91900,
    "driver": "580.159.04",
}


@pytest.fixture
def torch_threads():
    """Torch's thread count as it was before the test, restored after it (``--threads`` sets it process-wide)."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def cpu_grid(tiny: str, **changes) -> SurveyGrid:
    return SurveyGrid((tiny,), (1, 2), ("fp32",), ("eager",), "cpu", **changes)


def test_a_gpu_cell_leaves_the_host_threads_out_of_its_key_and_a_cpu_cell_keeps_them():
    gpu = [Configuration.from_environment({**ENVIRONMENT, "threads": n}) for n in (1, 8)]
    assert gpu[0] == gpu[1] and gpu[0].threads == GPU_THREADS and gpu[0].device_label == "NVIDIA H200"
    cpu = [
        Configuration.from_environment({**ENVIRONMENT, "device_name": "AMD EPYC", "device_type": "cpu", "threads": n})
        for n in (1, 8)
    ]
    assert cpu[0] != cpu[1] and [c.threads for c in cpu] == [1, 8]
    assert cpu[1].device == "AMD EPYC" and cpu[1].device_label == with_threads("AMD EPYC", 8) == "AMD EPYC (8 threads)"


def test_a_cpus_name_leaves_the_threads_out_and_its_ceilings_are_cached_per_thread_count(torch_threads):
    cpu = torch.device("cpu")
    paths = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        assert ceilings_device(cpu) == with_threads(device_name(cpu), threads)
        paths.append(cache_path(ceilings_device(cpu)))
    assert (
        "threads" not in device_name(cpu)
        and paths[0] != paths[1]
        and "-1-thread-" in paths[0].name
        and "-2-threads-" in paths[1].name
    )


def test_cpu_surveys_share_keys_when_their_thread_counts_agree(tiny, tmp_path, torch_threads):
    """Cells stored with 1 thread are done for a survey with 1 thread, planned in a process whose own count is 2 (a
    Ray task's, say); a survey with 2 threads, or with that process's own count, measures them again."""
    torch.set_num_threads(1)
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(cpu_grid(tiny, threads=1), store)
        assert plan.config.threads == 1 and "threads" not in plan.config.device
        for key in plan.groups[0].keys(plan.config):
            store.add({"key": key, "status": "ok"})
        torch.set_num_threads(2)
        assert (plan_survey(cpu_grid(tiny, threads=1), store).cells, plan.cells) == (0, 2)
        for grid in (cpu_grid(tiny, threads=2), cpu_grid(tiny)):
            other = plan_survey(grid, store)
            assert other.cells == 2 and other.config.threads == 2
            assert replace(other.config, threads=1) == plan.config  # the thread count is all that differs


def test_a_worker_measures_with_the_thread_count_its_plan_keyed(tiny, torch_threads):
    """A CPU plan's workers get its keyed count (the grid's, else the planner's own), a GPU plan's the grid's."""
    options = RunOptions("r.sqlite")
    config, _ = grid_configuration(cpu_grid(tiny))
    for grid, threads in ((cpu_grid(tiny, threads=3), 3), (cpu_grid(tiny), torch_threads)):
        plan = SurveyPlan(grid, grid_configuration(grid)[0], [], 0)
        args = worker.parse_args(runner.worker_command("groups.json", plan, options, "cpu")[3:])
        assert json.loads(args.settings)["threads"] == threads
    for threads in (None, 3):
        gpu_plan = SurveyPlan(cpu_grid(tiny, threads=threads), replace(config, threads=GPU_THREADS), [], 0)
        assert runner.worker_threads(gpu_plan) == threads
    group = {"model": tiny, "resolution": 16, "precision": "fp32", "backend": "eager", "batches": [1]}
    settings = {
        "device": "cpu",
        "channels_last": True,
        "cudnn": CudnnSettings().to_dict(),
        "min_time_ms": None,
        "peak_tflops": None,
        "threads": 3,
    }
    assert worker.group_request(group, settings).threads == 3


def test_a_measurement_sets_torchs_thread_count_and_records_it(tiny, torch_threads):
    threads = 2 if torch_threads == 1 else 1
    result = profile(MeasureRequest(tiny, device="cpu", ceilings="skip", plan=QUICK, threads=threads), [1])
    assert torch.get_num_threads() == threads and result.environment["threads"] == threads
    assert result.device == with_threads(result.environment["device_name"], threads)
    assert "threads" not in result.environment["device_name"]


@pytest.mark.parametrize("verb", ["profile", "layers"])
def test_the_threads_option_of_profile_and_layers_is_the_requests(verb):
    args = build_parser().parse_args([verb, "torchvision:resnet18", "--threads", "3"])
    assert measure_request(args).threads == 3
    assert measure_request(build_parser().parse_args([verb, "torchvision:resnet18"])).threads is None


@pytest.mark.parametrize("threads", [0, -1, True, 1.5])
def test_a_thread_count_that_is_not_a_positive_integer_is_a_usage_error(threads, tiny):
    for make in (lambda: MeasureRequest(tiny, threads=threads), lambda: cpu_grid(tiny, threads=threads)):
        with pytest.raises(UsageError, match="--threads must be a positive integer"):
            make()


def test_a_survey_with_threads_stores_them_in_the_key_and_plans_by_them(tiny, tmp_path, capsys):
    """The worker subprocess measures with --threads 1: its row's key and environment say 1, the device name holds
    no count; the same survey again has nothing to measure, one with 2 threads everything."""
    db = tmp_path / "r.sqlite"
    argv = [
        "survey",
        "--db",
        str(db),
        "--device",
        "cpu",
        "--models",
        tiny,
        "--batch",
        "1",
        "--backend",
        "eager",
        "--attribute",
        "none",
        "--min-time-ms",
        "20",
    ]
    assert main([*argv, "--threads", "1"]) == 0
    with Store(db) as store:
        frame = store.frame()
    assert list(frame["threads"]) == [1] and list(frame["status"]) == ["ok"]
    assert frame.loc[0, "environment"]["threads"] == 1 and "threads" not in frame.loc[0, "device"]
    capsys.readouterr()
    for threads, cells in ((1, "0 cells"), (2, "1 cell")):
        assert main([*argv, "--threads", str(threads), "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert f"{cells} to measure" in out and with_threads(frame.loc[0, "device"], threads) in out
