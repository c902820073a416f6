"""The survey on the CPU: planning, resume, crashes, OOM, hangs, two surveys sharing one store, cuDNN settings.

Three tests run real worker subprocesses on tiny models (one of them the whole CLI in a subprocess, killed and
resumed); the rest stop at the subprocess boundary.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from utilscope.cli import main
from utilscope.cli.survey import render_result
from utilscope.errors import UsageError
from utilscope.measure.backends import get_backend
from utilscope.measure.settings import CudnnSettings
from utilscope.models import sets as model_sets
from utilscope.survey import messages, runner, worker
from utilscope.survey import plan as survey_plan
from utilscope.survey.claims import claim
from utilscope.survey.executors import run_survey
from utilscope.survey.plan import SurveyGrid, plan_survey, select_models
from utilscope.survey.runner import EXIT, RunOptions, SurveyResult, watch_worker
from utilscope.survey.store import Store
from utilscope.survey.workflow import SurveyEvents, SurveyRequest, survey_grid

MODELS = """
import os, time
import torch
import torch.nn as nn

RESOLUTION = 16

def _cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))

class Faulty(nn.Module):
    def __init__(self, fault):
        super().__init__()
        self.body, self.fault = _cnn(), fault

    def forward(self, x):
        if x.device.type != "meta" and x.shape[0] >= 4:
            if self.fault == "crash":
                os._exit(3)
            if self.fault == "oom":
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
            if self.fault == "raise":
                raise RuntimeError("this layer fails at batch 4")
            if self.fault == "slow":
                time.sleep(30)
        return self.body(x)

def good():
    return _cnn()

def good2():
    return nn.Sequential(_cnn(), nn.ReLU())

def crash():
    return Faulty("crash")

def oom():
    return Faulty("oom")

def raises():
    return Faulty("raise")

def slow():
    return Faulty("slow")
"""


@pytest.fixture(scope="module")
def models(write_factory):
    path = write_factory(MODELS)
    return lambda name: f"{path}:{name}"


def grid(models, names, batches=(1, 4), **changes) -> SurveyGrid:
    fields = {"precisions": ("fp32",), "backends": ("eager",), "device": "cpu", **changes}
    return SurveyGrid(tuple(models(n) for n in names), batches, **fields)


def _statuses(db) -> dict:
    with Store(db) as store:
        frame = store.frame()
    return {(row.model.rsplit(":", 1)[-1].partition("#")[0], row.batch): row.status for row in frame.itertuples()}


def _key_counts(db) -> Counter:
    with Store(db) as store:
        frame = store.frame()
    return Counter(zip(frame["model"], frame["batch"], frame["precision"], frame["backend"], strict=True))


def test_failures_are_rows_each_cell_is_heard_once_and_a_new_worker_goes_on(tmp_path, models):
    """Five models in one worker: after the crash a new worker takes the models after it; the progress callback
    hears of each cell once, stored by a worker or recorded as failed; every error row counts as failed, whether
    the worker died (crash) or stored the error (raises); an out-of-memory batch is followed by the largest
    halving that fits."""
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        plan = plan_survey(grid(models, ["good", "crash", "oom", "raises", "good2"]), store)
    heard = []
    options = RunOptions(str(db), per_worker=5, timeout_s=120, fit_batch="halve")
    result = run_survey(plan, options, on_cells_done=heard.append)
    assert plan.cells == 10 and heard == [1] * 10  # the fitted cell (oom, 2) is stored, not a planned cell
    assert (result.failed_cells, result.count("oom"), result.count("ok")) == (2, 1, 7) and len(result.failures) == 1
    statuses = _statuses(db)
    assert statuses[("good", 1)] == statuses[("good", 4)] == "ok"
    assert statuses[("good2", 1)] == statuses[("good2", 4)] == "ok"  # measured after the crash
    assert statuses[("crash", 1)] == "ok"  # stored before the worker died
    assert statuses[("crash", 4)].startswith("error: worker exited with code 3")
    assert statuses[("oom", 1)] == "ok" and statuses[("oom", 4)] == "oom"
    assert statuses[("oom", 2)] == "ok"  # --fit-batch: the largest halving of 4 that fits
    with Store(db) as store:
        notes = store.frame().set_index(["batch", "status"]).loc[(4, "oom"), "notes"]
    assert "largest batch that fits: 2" in str(notes)
    assert statuses[("raises", 4)] == "error: RuntimeError: this layer fails at batch 4"


def test_an_interrupted_survey_stores_nothing_for_the_cell_in_flight_and_exits_130(tmp_path, models):
    """Ctrl-C: one line saying what was stored and what is left, exit 130, no error row for the cell the worker was
    on (so --no-retry-errors does not skip it), no worker left running; a rerun measures what is left."""
    db = tmp_path / "results.sqlite"
    argv = [
        sys.executable,
        "-m",
        "utilscope.cli",
        "survey",
        "--db",
        str(db),
        "--device",
        "cpu",
        "--batch",
        "1,4",
        "--backend",
        "eager",
        "--attribute",
        "none",
        "--models",
        models("slow"),
    ]
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # a test process may ignore Ctrl-C (and so its child)
    survey = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_at_a_terminal
    )
    while survey.poll() is None and (not db.exists() or not _key_counts(db)):  # no deadline: a busy machine is slow
        time.sleep(0.2)
    survey.send_signal(signal.SIGINT)  # the worker sleeps in batch 4's forward pass
    _, err = survey.communicate()
    assert survey.returncode == 130, (err, ignored)
    assert err.strip().splitlines()[-1] == "utilscope: interrupted: 1 cell stored, 1 left; rerun to resume"
    assert _statuses(db) == {("slow", 1): "ok"}
    assert not _processes_naming(str(db))  # the worker was stopped with the survey


def _ctrl_c_as_at_a_terminal() -> None:
    """In the survey's process before it starts Python: SIGINT as a shell gives it (an ignored SIGINT is inherited,
    and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _processes_naming(text: str) -> list[str]:
    """Command lines of the running processes that contain ``text`` (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended meanwhile
        if text in line:
            found.append(line)
    return found


def test_a_killed_survey_resumes_measuring_every_cell_once_with_its_cudnn_settings(tmp_path, models):
    """The one end-to-end run of the command line: killed mid-way, then run again; every cell is stored once, in
    columns naming the cuDNN settings, and the op-class rows carry the cell's settings too."""
    db = tmp_path / "results.sqlite"
    names = [models("good"), models("good2"), models("oom")]
    argv = [
        sys.executable,
        "-m",
        "utilscope.cli",
        "survey",
        "--db",
        str(db),
        "--device",
        "cpu",
        "--batch",
        "1,2,4",
        "--backend",
        "eager",
        "--attribute",
        "all",
        "--per-worker",
        "3",
        "--no-cudnn-benchmark",
        "--min-time-ms",
        "20",
    ]
    argv += [arg for model in names for arg in ("--models", model)]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while first.poll() is None and (not db.exists() or not _key_counts(db)):
        time.sleep(0.2)
    first.kill()  # mid-way: at least one cell stored, not all of them; its worker dies with it
    first.wait()
    time.sleep(1.0)
    interrupted = sum(_key_counts(db).values())
    assert 0 < interrupted < 9
    again = subprocess.run(argv, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"{9 - interrupted} cells to measure" in again.stdout and "cudnn.benchmark off" in again.stdout
    counts = _key_counts(db)
    assert len(counts) == 9 and set(counts.values()) == {1}  # 3 models x 3 batches, each exactly once
    with Store(db) as store:
        frame, op_classes = store.frame(), store.op_class_frame()
    assert not frame["cudnn_benchmark"].any() and (frame["memory_format"] == "channels_last").all()
    assert not any(env["cudnn_benchmark"] for env in frame["environment"])  # as the worker set it
    # (a model whose cells were all stored before the kill is not measured again, nor attributed)
    assert not op_classes.empty and not op_classes["cudnn_benchmark"].any()


def test_two_surveys_on_one_store_measure_each_cell_once(tmp_path, models):
    """Two runs whose grids overlap: the second skips the cells the first holds, and is told it shares the device;
    both write the store at the same time, and every cell is measured once."""
    db = tmp_path / "results.sqlite"
    leases = []
    for names in (["good", "good2"], ["good2", "oom"]):
        with Store(db) as store:
            leases.append(claim(plan_survey(grid(models, names, (1, 2, 4)), store), str(db)))
    assert (leases[0].plan.cells, leases[1].plan.cells, leases[1].taken) == (6, 3, 3)
    assert leases[1].neighbours == [leases[0].owner]  # the same device: the two runs disturb each other
    heard, results = [], []

    def run(lease):  # one worker process per run
        results.append(run_survey(lease.plan, RunOptions(str(db), per_worker=2), heard.append, lease))

    threads = [threading.Thread(target=run, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = _key_counts(db)
    assert len(counts) == 9 and set(counts.values()) == {1} and sum(heard) == 9  # each cell measured once
    assert sorted(r.taken for r in results) == [0, 3]
    with Store(db) as store:
        assert store.claims() == {}  # both released what they held


def test_a_silent_worker_is_killed_at_the_timeout(tmp_path):
    """The timeout is per group: a worker that tells a row and then hangs is killed; its row came through, its
    other output did not; a worker that dies says how."""
    row = messages.line(messages.ROW, {"model": "m", "batch": 1})
    hang = [sys.executable, "-c", f"import time; print('a model talks'); print({row!r}, flush=True); time.sleep(60)"]
    start_s = time.monotonic()
    told = list(watch_worker(hang, {}, 1.0))
    assert told == [(messages.ROW, {"model": "m", "batch": 1}), (EXIT, "error: timeout after 1 s")]
    assert time.monotonic() - start_s < 30
    crash = [sys.executable, "-c", "import sys; print('it broke', file=sys.stderr); sys.exit(3)"]
    assert list(watch_worker(crash, {}, 10.0)) == [(EXIT, "error: worker exited with code 3: it broke")]


def test_plan_skips_done_cells_and_checks_input(tmp_path, models):
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        plan = plan_survey(grid(models, ["good"]), store)
        assert plan.cells == 2 and plan.skipped == 0
        with pytest.raises(Exception, match="unknown backend"):
            grid(models, ["good"], backends=("nope",))
        with pytest.raises(Exception, match="not supported on cpu"):
            plan_survey(grid(models, ["good"], precisions=("fp16",)), store)
        with pytest.raises(Exception, match="batch size must be"):
            grid(models, ["good"], (0,))
        with pytest.raises(Exception, match="grid is empty"):
            grid(models, [])


def test_a_cudnn_setting_is_a_configuration_of_its_own(tmp_path, models):
    """Cells stored in one cuDNN configuration are done for it only: each other setting plans them again."""
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        plan = plan_survey(grid(models, ["good"]), store)
        for key in plan.groups[0].keys(plan.config):
            store.add({"key": key, "status": "ok"})
        assert plan_survey(grid(models, ["good"]), store).cells == 0
        for settings in (CudnnSettings(False), CudnnSettings(True, 3), CudnnSettings(depthwise_heuristic=True)):
            other = plan_survey(grid(models, ["good"], cudnn=settings), store)
            assert other.cells == 2 and other.config.cudnn_settings == settings
            assert other.config.software == f"{plan.config.software} · {settings.label()}"
        assert plan_survey(grid(models, ["good"], channels_last=False), store).cells == 2


def test_the_worker_measures_and_attributes_with_the_cells_settings(models):
    """The worker's request carries the run's settings, and its op-class attribution the same ones."""
    settings = {
        "device": "cpu",
        "channels_last": False,
        "cudnn": CudnnSettings(True, 3).to_dict(),
        "min_time_ms": 50.0,
        "peak_tflops": 2.0,
    }
    group = {"model": models("good"), "resolution": 16, "precision": "fp32", "backend": "graph", "batches": [1]}
    request = worker.group_request(group, settings)
    assert (request.cudnn, request.channels_last, request.peak_tflops) == (CudnnSettings(True, 3), False, 2.0)
    assert request.plan.min_total_ms == 50.0
    sweep = worker.prepare_sweep(request.replace(ceilings="skip"))
    attribution = worker.attribution_request(sweep)
    assert attribution == request.replace(ceilings="skip", plan=None)  # its own default timing, nothing else
    inference = worker.attribution_request(replace(sweep, backend=get_backend("inference")))
    assert inference.backend == "eager"  # a compiled backend is attributed per layer on a CPU
    key = worker.key_of(sweep, 1)
    assert key.config.cudnn_settings == CudnnSettings(True, 3) and key.config.memory_format == "contiguous"


def test_worker_command_passes_the_settings_as_one_json_object(models, tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(grid(models, ["good"], cudnn=CudnnSettings(depthwise_heuristic=True)), store)
    options = RunOptions("r.sqlite", attribute_models=frozenset({plan.groups[0].model}), min_time_ms=300.0)
    groups = plan.groups * 2000  # more groups than a command line holds: they go in a file
    with runner.write_groups(groups, options) as groups_file:
        command = runner.worker_command(groups_file, plan, options, "cpu")
        assert command[1:3] == ["-m", "utilscope.survey.worker"]
        args = worker.parse_args(command[3:])
        assert "--db" not in command and len(" ".join(command)) < 1000  # workers write no store: the runner does
        with open(args.groups_file) as listing:
            group, *others = json.load(listing)
    assert len(others) == 1999 and not Path(groups_file).exists()
    assert group["attribute"] and group["batches"] == [1, 4]
    cudnn = CudnnSettings(True, None, True).to_dict()
    assert json.loads(args.settings) == {
        "device": "cpu",
        "channels_last": True,
        "min_time_ms": 300.0,
        "peak_tflops": None,
        "cudnn": cudnn,
        "fit_batch": None,
        "threads": plan.config.threads,
    }


def test_model_selection():
    assert select_models([], []) == model_sets.default_survey()
    regnets = select_models([], ["RegNetX"])
    assert regnets and all(model_sets.family_of(m) == "RegNetX" for m in regnets)
    assert select_models(["torchvision:resnet18", "torchvision:resnet1*"], []) == [
        "torchvision:resnet18",
        "torchvision:resnet101",
        "torchvision:resnet152",
    ]
    with pytest.raises(Exception, match="unknown family"):
        select_models([], ["NotAFamily"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--cudnn-benchmark-limit", "-1"], "must be 0"),
        (["--cudnn-benchmark-limit", "2", "--no-cudnn-benchmark"], "give one"),
        (["--cudnn-depthwise-heuristic", "--no-cudnn-benchmark"], "give one"),
        (["--cudnn-depthwise-heuristic", "--backend", "graph,compile"], "not compile"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--min-time-ms", "0"], "--min-time-ms must be positive"),
        (["--batch", ""], "give at least one batch size"),
        (["--batch", "0"], "batch size must be"),
        (["--precision", "fp16"], "precision fp16 is not supported on cpu"),
        (["--backend", "foo"], "unknown backend 'foo'"),
        (["--res", "0"], "resolution must be between 8 and"),
        (["--models", "torchvision:resnet5"], "unknown model 'torchvision:resnet5'"),
        (["--peak", "nan"], "--peak must be a positive, finite number"),
    ],
)
def test_bad_survey_options_are_usage_errors_that_never_create_the_store(tmp_path, models, extra, message, capsys):
    db = tmp_path / "r.sqlite"
    argv = ["survey", "--db", str(db), "--device", "cpu", "--models", models("good"), "--batch", "1"]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not db.exists()


def test_a_survey_whose_disk_fills_says_so_exits_74_and_keeps_the_rows_stored_before(
    tmp_path, models, monkeypatch, capsys
):
    """The second row's write fails as SQLite fails on a full disk: one line naming the store and the lack of
    space, exit 74 (not 2: it is not bad input), the first row still stored."""
    import sqlite3

    add, calls = Store.add, []

    def add_until_full(self, row):
        calls.append(row)
        if len(calls) == 1:
            return add(self, row)
        with self._transaction():
            raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "add", add_until_full)
    db = tmp_path / "r.sqlite"
    argv = ["survey", "--db", str(db), "--device", "cpu", "--models", models("good"), "--batch", "1,4"]
    assert main(argv) == 74
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"utilscope: error: cannot write results store {db}: no space left on the device")
    monkeypatch.undo()
    with Store(db, create=False) as store:
        assert list(store.frame()["status"]) == ["ok"]


def test_the_survey_default_precision_follows_the_device(models, tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        plan = plan_survey(SurveyGrid((models("good"),), (1,), device="cpu"), store)
    assert [g.precision for g in plan.groups] == ["fp32"]
    assert survey_plan.grid_configuration(SurveyGrid((models("good"),), device="cpu"))[1] == ("fp32",)


def test_a_dry_run_lists_the_cells_and_writes_nothing(tmp_path, models, capsys):
    """No file is created, an empty file stays empty, a store stays byte for byte as it was."""
    argv = [
        "survey",
        "--device",
        "cpu",
        "--batch",
        "1,4",
        "--backend",
        "eager",
        "--models",
        models("good"),
        "--models",
        models("good2"),
        "--dry-run",
    ]
    missing, empty, stored = tmp_path / "missing.sqlite", tmp_path / "empty.sqlite", tmp_path / "stored.sqlite"
    empty.touch()
    with Store(stored) as store:
        plan = plan_survey(grid(models, ["good"]), store)
        store.add({"key": plan.groups[0].keys(plan.config)[0], "status": "ok"})
    before = stored.read_bytes()
    for db, cells in ((missing, 4), (empty, 4), (stored, 3)):
        assert main([*argv, "--db", str(db)]) == 0
        out = capsys.readouterr().out
        assert f"survey: {cells} cells to measure in 2 groups" in out and "good2" in out and "1,4" in out
    assert not missing.exists() and empty.stat().st_size == 0 and stored.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "stored.sqlite"]


def test_the_survey_workflow_is_a_library_call_that_reports_through_its_events(tmp_path, models):
    """``survey_grid`` without the CLI: a dry run plans (the events hear each plan) and writes nothing; a real run
    measures every cell, the events hearing the start, the progress and the end; the request checks itself."""

    class Heard(SurveyEvents):
        def __init__(self):
            self.plans, self.started_cells, self.advanced_cells, self.ended = [], 0, 0, False

        def planned(self, plan):
            self.plans.append(plan)

        def started(self, cells):
            self.started_cells = cells

        def advanced(self, cells):
            self.advanced_cells += cells

        def finished(self):
            self.ended = True

    db = tmp_path / "r.sqlite"
    request = SurveyRequest(grid(models, ["good"]), RunOptions(str(db), min_time_ms=20), dry_run=True)
    heard = Heard()
    outcome = survey_grid(request, heard)
    assert outcome.result is None and [plan.cells for plan in heard.plans] == [2] and not db.exists()
    heard = Heard()
    outcome = survey_grid(replace(request, dry_run=False), heard)
    assert outcome.result.cells == heard.started_cells == heard.advanced_cells == 2 and heard.ended
    assert outcome.result.count("ok") == 2 and _statuses(db) == {("good", 1): "ok", ("good", 4): "ok"}
    assert survey_grid(replace(request, dry_run=False)).result is None  # everything stored: nothing to run
    with pytest.raises(UsageError, match="apply to --executor ray"):
        SurveyRequest(grid(models, ["good"]), RunOptions(str(db)), gpu_types="all")
    with pytest.raises(UsageError, match="SurveyGrid and RunOptions"):
        SurveyRequest(RunOptions(str(db)), grid(models, ["good"]))  # type: ignore[arg-type]


def test_the_summary_counts_every_error_row_and_sets_the_exit_code(capsys):
    statuses = ["ok", "oom", "ok", "error: RuntimeError: boom"]
    outcome = pd.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "precision": "fp32",
            "backend": "eager",
            "batch": [1, 4, 1, 4],
            "status": statuses,
        }
    )
    console = Console(width=200, force_terminal=False)
    assert render_result(SurveyResult(4, 2.0, outcome, []), console) == 1
    out = capsys.readouterr().out
    assert "4 cells in 2.0 s (0.50 s per cell): 2 ok, 1 oom, 1 failed" in out and "1 × error: RuntimeError: boom" in out
    assert render_result(SurveyResult(2, 1.0, outcome.iloc[:2], []), console) == 0  # an oom is a result, not a failure


def test_a_killed_run_on_this_host_leaves_no_claim_in_the_way(tmp_path, models):
    """The owner of a claim is a run of this host whose process ended: its cells are free at once."""
    db = tmp_path / "results.sqlite"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with Store(db) as store:
        plan = plan_survey(grid(models, ["good"]), store)
        keys = plan.groups[0].keys(plan.config)
        store.claim(keys[1:], f"{socket.gethostname()}:{dead.stdout.strip()}:feed", "elsewhere", lease_s=600)
        store.claim(keys[:1], "another-host:1:beef", "elsewhere", lease_s=600)  # not ours to judge: kept
    lease = claim(plan, str(db))
    assert (lease.plan.cells, lease.taken) == (1, 1)


def test_one_model_at_two_resolutions_is_two_lines_of_the_summary(capsys):
    outcome = pd.DataFrame(
        {
            "model": ["a", "a"],
            "resolution": [32, 48],
            "precision": "fp32",
            "backend": "eager",
            "batch": [1, 1],
            "status": ["ok", "oom"],
        }
    )
    assert render_result(SurveyResult(2, 1.0, outcome, []), Console(width=200, force_terminal=False)) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip("│ ").startswith("a ")]
    assert len(lines) == 2 and "32" in lines[0] and "48" in lines[1]


def test_a_neighbours_warning_goes_to_stderr_and_the_counts_to_stdout(capsys):
    import types

    from rich.console import Console

    from utilscope.cli.survey_events import report_lease

    lease = types.SimpleNamespace(taken=2, stored_meanwhile=0, neighbours=["host:42"])
    report_lease(lease, Console(width=200))
    captured = capsys.readouterr()
    assert captured.err == (
        "utilscope: warning: another survey (host:42) is measuring on this device: the two runs disturb each other's "
        "timings\n"
    )
    assert "2 cells are being measured by another run" in captured.out and "warning" not in captured.out
