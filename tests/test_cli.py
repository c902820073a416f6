"""The CLI: output formats and exit codes (2 for bad input, one line on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from utilscope.cli import main

TINY_FACTORY = textwrap.dedent(
    """
    import torch.nn as nn

    RESOLUTION = 32

    def make():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10),
        )

    def broken():
        raise RuntimeError("no such checkpoint")
    """
)


@pytest.fixture(scope="module")
def factory(write_factory):
    return write_factory(TINY_FACTORY, "tiny")


def test_count_json_follows_the_contract(factory, capsys):
    assert main(["count", f"{factory}:make", "--batch", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"model", "batch", "resolution", "dtype", "total", "layers", "unsupported"} <= doc.keys()
    assert {"flops", "other_flops", "bytes", "params"} <= doc["total"].keys()
    assert doc["batch"] == 2 and doc["resolution"] == 32 and doc["dtype"] == "fp32"
    layer_keys = {"name", "type", "flops", "other_flops", "bytes", "params", "intensity"}
    assert all(layer_keys <= layer.keys() for layer in doc["layers"])
    # conv 3->8, 3x3, 32x32 output, batch 2: 2 * (2*8*32*32) * (3*3*3) = 884736; linear 8->10: 2*2*8*10 = 320
    assert doc["total"]["flops"] == 884_736 + 320
    assert doc["total"]["params"] == (8 * 27 + 8) + 16 + (80 + 10)
    assert doc["unsupported"] == {}


def test_count_csv_has_one_row_per_layer(factory, capsys):
    assert main(["count", f"{factory}:make", "--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("name,type,op_class,flops")
    assert [line.split(",")[0] for line in lines[1:]] == ["0", "1", "2", "3", "4", "5"]


def test_count_table_names_totals_and_classes(factory, capsys):
    assert main(["count", f"{factory}:make"]) == 0
    out = capsys.readouterr().out
    assert "dense_conv" in out and "op classes" in out and "bytes unfused" in out
    assert out.index("FLOPs (2×MAC)") < out.index("op classes") < out.index("FLOP share") < out.index("--all-layers")
    assert "input → output" not in out and max(map(len, out.splitlines())) <= 120  # the compact view fits
    assert main(["count", f"{factory}:make", "--all-layers"]) == 0
    assert "input → output" in capsys.readouterr().out


def test_the_layer_table_folds_layers_that_do_no_work_and_says_how_many():
    from torch import nn

    from utilscope.api import count
    from utilscope.present.count_view import layer_table

    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Identity(), nn.Dropout(), nn.ReLU())
    table = layer_table(count(net, batch=1, resolution=16), compact=True)
    assert [cell for cell in table.columns[2]._cells] == ["Conv2d", "ReLU"]  # Identity and Dropout folded
    assert "2 layers that do no work" in table.caption


def test_count_glob_prints_one_row_per_model(capsys):
    assert main(["count", "torchvision:squeezenet1_*", "--res", "64"]) == 0
    out = capsys.readouterr().out
    assert "torchvision:squeezenet1_0" in out and "torchvision:squeezenet1_1" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["count", "torchvision:resnet5"], "did you mean: torchvision:resnet50"),
        (["count", "timm:not_a_model_at_all"], "unknown model 'timm:not_a_model_at_all'"),
        (["count", "torchvision:resnet18", "--batch", "0"], "batch size must be"),
        (["count", "torchvision:resnet18", "--batch", "-3"], "batch size must be"),
        (["count", "torchvision:resnet18", "--res", "0"], "resolution must be"),
        (["count", "torchvision:resnet18", "--res", "100000"], "resolution must be"),
        (["count", "torchvision:resnet18", "--dtype", "fp8"], "unknown dtype 'fp8'"),
        (["count", "torchvision:squeezenet1_0", "--res", "8"], "Output size is too small"),
        (["count", "nosuchsource:resnet18"], "unknown model source"),
        (["count", "timm:zzz*"], "no model matches"),
        (["models", "timm:zzz*"], "no model matches"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("utilscope: error: ")
    assert message in err


def test_factory_that_raises_is_exit_2(factory, capsys):
    assert main(["count", f"{factory}:broken"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: no such checkpoint" in err and err.count("\n") == 1


def test_missing_factory_file_and_name(factory, tmp_path, capsys):
    assert main(["count", f"{tmp_path}/absent.py:make"]) == 2
    assert main(["count", f"{factory}:absent"]) == 2
    assert main(["count", str(factory)]) == 2
    assert capsys.readouterr().err.count("utilscope: error: ") == 3


def test_argparse_errors_are_exit_2(capsys):
    assert main(["count", "torchvision:resnet18", "--batch", "lots"]) == 2
    assert capsys.readouterr().err == (
        "utilscope: error: argument --batch: invalid int value: 'lots' (see: utilscope count --help)\n"
    )


def test_console_script_exit_code():
    """The installed entry point, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "utilscope.cli", "count", "torchvision:resnet5"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stderr.startswith("utilscope: error: ")
    assert "unknown model 'torchvision:resnet5'; did you mean: torchvision:resnet50" in done.stderr


def test_models_lists_names_with_native_resolution(capsys):
    assert main(["models", "torchvision:inception*"]) == 0
    assert capsys.readouterr().out.strip() == "torchvision:inception_v3\t299"


def test_nas_sample_cli(tmp_path, capsys):
    out = tmp_path / "archs.jsonl"
    argv = ["nas", "sample", "--space", "mbv3", "-n", "4", "--seed", "3", "--out", str(out)]
    assert main(argv) == 0
    first = out.read_text()
    assert len(first.strip().splitlines()) == 4
    assert main(argv) == 0 and out.read_text() == first  # the same seed gives the same file
    assert main(["nas", "sample", "--space", "nope", "--out", str(out)]) == 2
    assert "unknown search space 'nope'; use one of: mbv3, regnet" in capsys.readouterr().err
    assert main(["nas", "sample", "--space", "mbv3", "-n", "0", "--out", str(out)]) == 2


def test_an_unexpected_error_exits_3_with_its_traceback(monkeypatch, capsys):
    """A bug is not "some models failed" (1) nor bad input (2)."""
    from utilscope.cli import measure

    def broken(args, console):
        raise KeyError("a bug")

    monkeypatch.setattr(measure, "cmd_devices", broken)
    assert main(["devices"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith("utilscope: internal error: KeyError: 'a bug'")


@pytest.mark.parametrize("value", ['"big"', "None", "2.5", "True", "0"])
def test_a_bad_resolution_in_a_factory_file_is_one_line_and_exit_2(value, write_factory, capsys):
    """``RESOLUTION = 2.5`` or ``True`` used to run at 2 px and 1 px; ``"big"`` and ``None`` were internal errors."""
    path = write_factory(TINY_FACTORY.replace("RESOLUTION = 32", f"RESOLUTION = {value}"), "badres")
    assert main(["count", f"{path}:make"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("utilscope: error: ")
    assert "RESOLUTION must be a whole number of pixels" in err or "resolution must be between 8" in err


@pytest.mark.parametrize("batch", ["1,,2", "8,", ",1", " , "])
@pytest.mark.parametrize("verb", ["profile", "survey", "nas table"])
def test_batch_lists_with_an_empty_element_are_a_usage_error(verb, batch, factory, tmp_path, capsys):
    """``profile --batch 1,,2`` used to measure batches 1 and 2; every batch list is strict now, and the store
    (or table) is never touched."""
    argv = {
        "profile": ["profile", f"{factory}:make", "--device", "cpu"],
        "survey": ["survey", "--models", f"{factory}:make", "--db", str(tmp_path / "s.sqlite"), "--dry-run"],
        "nas table": ["nas", "table", "--space", "mbv3", "--out", str(tmp_path / "t.json")],
    }[verb]
    assert main([*argv, "--batch", batch]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without empty elements" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("verb", ["profile", "survey", "nas table"])
def test_an_empty_batch_list_or_a_bad_batch_size_is_refused_before_anything_is_written(verb, factory, tmp_path, capsys):
    """``nas table --batch ""`` used to write an empty table, ``--batch 0`` to fail in torch after starting."""
    argv = {
        "profile": ["profile", f"{factory}:make", "--device", "cpu"],
        "survey": ["survey", "--models", f"{factory}:make", "--db", str(tmp_path / "s.sqlite"), "--dry-run"],
        "nas table": ["nas", "table", "--space", "mbv3", "--device", "cpu", "--out", str(tmp_path / "t.json")],
    }[verb]
    for batch, message in (("", "batch size"), ("0", "batch size must be")):
        assert main([*argv, "--batch", batch]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
    assert not list(tmp_path.iterdir())


def test_nas_table_checks_its_out_path_before_timing(tmp_path, capsys):
    (tmp_path / "folder.json").mkdir()
    assert main(["nas", "table", "--space", "mbv3", "--device", "cpu", "--out", str(tmp_path / "folder.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the latency table" in err and "is a folder; give a file path" in err


def test_lists_of_precisions_and_backends_are_strict(factory, tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    for option, value in (("--precision", "fp32,,fp32"), ("--backend", "eager,")):
        assert main(["survey", "--models", f"{factory}:make", "--db", str(db), "--dry-run", option, value]) == 2
        assert "without empty elements" in capsys.readouterr().err
    assert not db.exists()


@pytest.mark.parametrize("top", ["0", "-3"])
@pytest.mark.parametrize("model", ["{factory}:make", "torchvision:squeezenet1_*"])
def test_count_top_below_one_is_a_usage_error(model, top, factory, capsys):
    """``--top -3`` used to drop the last three layers, ``--top 0`` to print an empty table."""
    assert main(["count", model.format(factory=factory), "--top", top]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--top must be at least 1, got {top}" in err


def strict_loads(text: str):
    """json.loads that fails on NaN / Infinity / -Infinity, which strict JSON parsers (jq, browsers) refuse."""

    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_strict_json_writes_non_finite_numbers_as_null():
    import numpy as np

    from utilscope.present.json_text import strict_json

    doc = {
        "a": float("nan"),
        "b": [float("inf"), -float("inf"), 1.5],
        "c": (np.float64("nan"), np.int64(3)),
        np.int64(7): {"d": np.array([1.0, np.nan])},
        "e": None,
        "f": "nan",
    }
    expected = {"a": None, "b": [None, None, 1.5], "c": [None, 3], "7": {"d": [1.0, None]}, "e": None, "f": "nan"}
    assert strict_loads(strict_json(doc)) == expected


NAN_DOC = {"value": float("nan"), "rows": [{"low": -float("inf"), "high": float("inf")}]}


@pytest.mark.parametrize(
    ("argv", "patches"),
    [
        (["count", "torchvision:resnet18", "--json"], {"utilscope.api.count": "result"}),
        (["profile", "torchvision:resnet18", "--json"], {"utilscope.api.profile": "result"}),
        (["layers", "torchvision:resnet18", "--json"], {"utilscope.api.attribute": "result"}),
        (["ceilings", "--device", "cpu", "--json"], {"utilscope.hardware.ceilings.get_ceilings": "result"}),
        (
            ["nas", "predict", "archs.jsonl", "--gpu", "h200", "--json"],
            {"utilscope.nas.population.predict_population": "prediction"},
        ),
    ],
)
def test_every_json_output_is_strict(argv, patches, monkeypatch, capsys, tmp_path):
    """NaN and ±inf are null in every --json output (json.dumps used to write NaN, -Infinity)."""
    import importlib
    import types

    import pandas as pd

    result = types.SimpleNamespace(to_dict=lambda: NAN_DOC, rows=[])
    from utilscope.nas.population import PopulationResult

    frame = pd.DataFrame({"id": ["a", "b"], "utilization": [float("nan"), 0.5]})
    prediction = PopulationResult("mbv3", "NVIDIA H200", 256, "fp16", "table", "", "", frame)
    for target, kind in patches.items():  # where the command imports it from when it runs
        module, _, name = target.rpartition(".")
        stub = {"result": result, "prediction": prediction}[kind]
        monkeypatch.setattr(importlib.import_module(module), name, lambda *a, _s=stub, **k: _s)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "archs.jsonl").write_text('{"space": "mbv3"}\n')  # the parser checks it is a file of architectures
    assert main(argv) == 0
    doc = strict_loads(capsys.readouterr().out)
    if argv[0] == "nas":
        assert doc["predictions"][0]["utilization"] is None and doc["predictions"][1]["utilization"] == 0.5
    else:
        assert doc == {"value": None, "rows": [{"low": None, "high": None}]}


def test_devices_json_is_strict(capsys):
    assert main(["devices", "--json"]) == 0
    rows = {row["key"]: row for row in strict_loads(capsys.readouterr().out)}
    assert rows["t4"]["tf32_tflops"] is None and rows["t4"]["fp16_tflops"] == 65.0  # the T4 has no TF32 unit


@pytest.mark.parametrize("argv", [["models", "torchvision:*"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    """``utilscope models 'timm:*' | head -1``: the reader closes the pipe; no traceback, the shell's SIGPIPE code
    (it used to be an internal error, exit 3, with a BrokenPipeError traceback)."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: deterministic
    try:
        done = subprocess.run(
            [sys.executable, "-m", "utilscope.cli", *argv], stdout=write_end, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 141


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("out.txt", "the roofline plot must be a .png file, got"),
        ("a_file.txt/x.png", "a_file.txt is not a folder"),
        ("a_folder", "must be a .png file"),
        ("a_folder.png", "is a folder; give a file path"),
    ],
)
def test_layers_checks_the_roofline_path_before_measuring(path, message, factory, tmp_path, monkeypatch, capsys):
    from utilscope import api

    (tmp_path / "a_file.txt").write_text("x")
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_folder.png").mkdir()

    def measured(*args, **kwargs):
        raise AssertionError("measured before checking the roofline path")

    monkeypatch.setattr(api, "attribute", measured)
    assert main(["layers", f"{factory}:make", "--device", "cpu", "--roofline", str(tmp_path / path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_layers_prints_the_measurement_before_the_plot_can_fail(json_flag, factory, tmp_path, monkeypatch, capsys):
    """A plot that cannot be drawn after measuring (no roofs, a full disk) never loses the measurement."""
    from utilscope.errors import UsageError
    from utilscope.present import roofline_plot

    def no_plot(attribution, path):
        raise UsageError("no roofs for this device: pass --peak, or measure ceilings first")

    monkeypatch.setattr(roofline_plot, "plot_attribution", no_plot)
    argv = ["layers", f"{factory}:make", "--device", "cpu", "--peak", "1", "--roofline", str(tmp_path / "r.png")]
    assert main([*argv, *json_flag]) == 2
    captured = capsys.readouterr()
    assert "no roofs for this device" in captured.err
    if json_flag:
        assert "points" in json.loads(captured.out)
    else:
        assert "attainable" in captured.out.lower()


def test_layers_roofline_creates_missing_folders(factory, tmp_path, capsys):
    png = tmp_path / "new" / "folder" / "roofline.png"
    assert main(["layers", f"{factory}:make", "--device", "cpu", "--peak", "1", "--roofline", str(png)]) == 0
    assert png.stat().st_size > 10_000 and f"roofline plot: {png}" in capsys.readouterr().out.replace("\n", "")


@pytest.fixture()
def stores(tmp_path):
    """An empty store (created, never measured into) and one holding one measurement."""
    from test_store import make_row

    from utilscope.survey.store import Store

    empty, full = tmp_path / "empty.sqlite", tmp_path / "full.sqlite"
    Store(empty).close()
    with Store(full) as store:
        store.add(make_row())
    return empty, full


@pytest.mark.parametrize("verb", [["report", "{db}", "-o", "{out}"], ["export", "{db}", "{out}.csv"]])
def test_report_and_export_of_an_empty_store_are_refused_and_write_nothing(verb, stores, tmp_path, capsys):
    """They used to write a page saying "no failures" (and an empty CSV)."""
    empty, _ = stores
    out = tmp_path / "out"
    assert main([part.format(db=empty, out=out) for part in verb]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no measurements" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "full.sqlite"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "{full}", "-o", "{file}"], "exists and is not a folder"),
        (["report", "{full}", "-o", "{file}/report"], "a_file.txt is not a folder"),
        (["export", "{full}", "{folder}"], "must be a .csv or .parquet file"),
        (["export", "{full}", "{file}/out.csv"], "a_file.txt is not a folder"),
        (["export", "{full}", "{folder}.csv"], "is a folder; give a file path"),
        (["nas", "sample", "--space", "mbv3", "-n", "2", "--out", "{folder}"], "must be a .jsonl file"),
        (["nas", "sample", "--space", "mbv3", "-n", "2", "--out", "{folder}.jsonl"], "is a folder; give a file path"),
        (["nas", "sample", "--space", "mbv3", "-n", "2", "--out", "{file}/a.jsonl"], "a_file.txt is not a folder"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_one_line_and_exit_2(argv, message, stores, tmp_path, capsys):
    """An existing file as the report folder, a folder as the export or sample file, a path under a file: these
    used to be internal errors (exit 3, a traceback)."""
    _, full = stores
    (tmp_path / "a_file.txt").write_text("x")
    for folder in ("a_folder", "a_folder.csv", "a_folder.jsonl"):
        (tmp_path / folder).mkdir()
    paths = {"full": full, "file": tmp_path / "a_file.txt", "folder": tmp_path / "a_folder"}
    assert main([part.format(**paths) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert (tmp_path / "a_file.txt").read_text() == "x" and not any((tmp_path / "a_folder").iterdir())


def test_report_and_export_of_a_store_with_measurements(stores, tmp_path, capsys):
    _, full = stores
    assert main(["report", str(full), "-o", str(tmp_path / "new" / "report"), "--no-predicted"]) == 0
    page = (tmp_path / "new" / "report" / "index.html").read_text()
    data = page.split('<script type="application/json" id="model-data">')[1].split("</script>")[0]
    assert "Predictions were left out (--no-predicted)." in data and '"predicted"' not in data
    assert main(["export", str(full), str(tmp_path / "new" / "m.csv")]) == 0
    assert len((tmp_path / "new" / "m.csv").read_text().strip().splitlines()) == 2


def test_the_report_workflow_is_the_apis_and_says_what_it_does(stores, tmp_path):
    from utilscope import api
    from utilscope.errors import UsageError
    from utilscope.report.workflow import ReportEvents

    _, full = stores
    heard = []
    events = ReportEvents(
        on_predicting=lambda *told: heard.append("predicting"), on_drawing=lambda: heard.append("drawing")
    )
    result = api.report(full, tmp_path / "r", predicted=False, events=events)
    assert result.path == tmp_path / "r" / "index.html" and result.path.is_file()
    assert heard == ["drawing"] and result.to_dict()["predicted_condition"] is None  # nothing predicted, as asked
    with pytest.raises(UsageError, match="no measurements to report"):
        api.report(stores[0], tmp_path / "empty")


@pytest.mark.parametrize(
    ("band", "message"),
    [
        (["--flops-min", "3e8", "--flops-max", "2e8"], "--flops-min (3e+08) is above --flops-max (2e+08)"),
        (["--flops-min", "nan"], "--flops-min must be a finite number"),
        (["--flops-max", "-1"], "--flops-max must be a finite number"),
    ],
)
def test_nas_sample_refuses_a_flops_band_that_cannot_hold_an_architecture(band, message, tmp_path, capsys):
    """A band with its minimum above its maximum used to draw 200 x n architectures before saying "only 0
    distinct architectures ... widen the band"."""
    out = tmp_path / "archs.jsonl"
    assert main(["nas", "sample", "--space", "mbv3", "-n", "3", "--out", str(out), *band]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and not out.exists()


def test_nas_predict_on_an_empty_file_says_it_is_empty(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["nas", "predict", str(empty), "--gpu", "h200"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{empty} is empty, expected the architecture file" in err and "0 spaces" not in err


def nas_store(tmp_path, n: int):
    """A store of ``n`` mbv3 architectures measured at batch 256 (utilization grows with FLOPs)."""
    from test_store import make_row

    from utilscope.nas.sampler import sample_architectures
    from utilscope.nas.spaces import get_space
    from utilscope.survey.store import Store

    space = get_space("mbv3")
    records = sample_architectures(space, n, seed=7)
    db = tmp_path / "nas.sqlite"
    with Store(db) as store:
        for i, record in enumerate(records):
            model = f"nas:mbv3:{record['id']}"  # as a store names an architecture: by content, its record beside
            flops, utilization = space.complexity(record).flops, 0.01 * (i + 1)
            store.add(
                make_row(
                    model=model,
                    batch=256,
                    flops_per_sample=flops,
                    utilization=utilization,
                    samples_per_s=utilization * 989.4e12 / flops,
                )
            )
            store.add_model_record(model, record)
    return db


@pytest.mark.parametrize("n", [1, 2])
def test_nas_analyze_of_too_few_architectures_says_so(n, tmp_path, capsys):
    """It used to print "Spearman ... = nan" and "+nan" ratios (and NaN in its JSON)."""
    db = nas_store(tmp_path, n)
    assert main(["nas", "analyze", str(db)]) == 0
    out = capsys.readouterr().out
    assert "too few architectures" in out and "nan" not in out.lower()
    assert main(["nas", "analyze", str(db), "--json"]) == 0
    [doc] = strict_loads(capsys.readouterr().out)
    assert doc["too_few_architectures"] and doc["flops_throughput_spearman"] is None and doc["effects"] == []


def test_nas_analyze_of_enough_architectures_ranks_them(tmp_path, capsys):
    assert main(["nas", "analyze", str(nas_store(tmp_path, 6))]) == 0
    out = capsys.readouterr().out
    assert "too few" not in out and "Spearman(FLOPs, samples/s) = " in out and "nan" not in out.lower()


def _parsers(parser, path=("utilscope",)):
    """Every parser of the command line, with its command path."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_option_and_positional_has_help_and_shows_its_default():
    """One convention: "(default: X)" in the help of every option that takes a value (argparse's
    ArgumentDefaultsHelpFormatter is not used: it would print "(default: None)")."""
    import argparse
    import re

    from utilscope.cli import build_parser

    problems = []
    for path, parser in _parsers(build_parser()):
        parser.format_help()  # a stray "%" in a help string raises here
        assert parser.formatter_class is argparse.HelpFormatter
        for action in parser._actions:
            where = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
            if isinstance(action, argparse._SubParsersAction):
                problems += [f"{where} {choice.dest}: no help" for choice in action._choices_actions if not choice.help]
                continue
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            takes_value = action.nargs != 0 and (action.option_strings or action.nargs == "?")
            if not action.help:
                problems.append(f"{where}: no help")
            elif takes_value and not action.required and "(default: " not in action.help:
                problems.append(f"{where}: its default is not shown")
            elif re.search(r"\(default [^:]", action.help or ""):
                problems.append(f"{where}: '(default X)' instead of '(default: X)'")
    assert problems == []


def test_the_top_level_help_names_every_nas_verb_and_family_spans_torchvision_and_timm(capsys):
    from utilscope.cli import build_parser

    parsers = dict(_parsers(build_parser()))
    top = parsers[("utilscope",)].format_help()
    nas_line = " ".join(top[top.index("    nas") :].split())
    verbs = [path[-1] for path in parsers if path[:2] == ("utilscope", "nas") and len(path) == 3]
    assert sorted(verbs) == ["analyze", "fit", "measure", "predict", "sample", "search", "table"]
    assert all(verb in nas_line for verb in verbs), nas_line
    family = " ".join(parsers[("utilscope", "survey")].format_help().split())
    assert "--family FAMILY a model family, matched among every torchvision and timm model" in family


def test_version(capsys):
    from utilscope._version import __version__

    assert main(["--version"]) == 0 and capsys.readouterr().out == f"utilscope {__version__}\n"


def test_no_parser_accepts_an_abbreviated_flag():
    """A flag added later must never change what an old command line means: abbreviations are off everywhere."""
    from utilscope.cli import build_parser

    parsers = dict(_parsers(build_parser()))
    assert len(parsers) > 15 and all(not parser.allow_abbrev for parser in parsers.values())


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["profil"], "unknown command 'profil'; did you mean profile? (see: utilscope --help)"),
        (["nas", "sampel"], "unknown nas command 'sampel'; did you mean sample? (see: utilscope nas --help)"),
        (
            ["profile", "x", "--bach", "8"],
            "unknown option --bach; did you mean --batch? (see: utilscope profile --help)",
        ),
        (
            ["layers", "x", "--rooflin", "r.png"],
            "unknown option --rooflin; did you mean --roofline? (options are never abbreviated) "
            "(see: utilscope layers --help)",
        ),
        (["--verison"], "unknown option --verison; did you mean --version? (see: utilscope --help)"),
        (["profile"], "the following arguments are required: model (see: utilscope profile --help)"),
        (["nas"], "the following arguments are required: VERB (see: utilscope nas --help)"),
        (["count", "torchvision:resnet18", "b"], "unexpected argument 'b' (see: utilscope count --help)"),
        (
            ["survey", "--executor", "rey"],
            "argument --executor: invalid choice 'rey'; did you mean ray? (see: utilscope survey --help)",
        ),
        (
            ["nas", "sample", "--space", "mbv3", "--seed", "-1"],
            "--seed must be a whole number from 0 to 4294967295 (2**32 - 1), got -1 (see: utilscope nas sample --help)",
        ),
    ],
)
def test_a_parser_error_is_one_line_with_a_guess_and_a_pointer_to_help(argv, line, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"utilscope: error: {line}\n" and captured.out == ""


def test_help_is_still_the_whole_usage(capsys):
    assert main(["profile", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: utilscope profile [-h]") and "--roofline" not in out and "--batch BATCH" in out


@pytest.mark.parametrize("verb", ["profile", "layers", "advise"])
def test_a_verb_of_one_model_refuses_a_glob_pointing_to_survey(verb, capsys):
    assert main([verb, "timm:resnet*", "--device", "cpu"]) == 2  # refused while parsing
    assert capsys.readouterr().err == (
        f"utilscope: error: argument model: `utilscope {verb}` takes one model and 'timm:resnet*' is a glob: for "
        f"many models use `utilscope survey --models 'timm:resnet*'` (see: utilscope {verb} --help)\n"
    )


@pytest.fixture
def stub_predictor(monkeypatch, tmp_path):
    """``predict`` with a stand-in predictor: latency_ms = batch x (1 ms for squeezenet1_0, 2 for squeezenet1_1)."""
    import types

    from utilscope.predict import fit_cache, measured, selection
    from utilscope.predict import predictor as pr

    def predict_on(name, batch, targets, resolution, backend, precision, channels_last):
        if resolution == 9:
            raise pr.UsageError(f"{name} cannot run at 9 px")
        ms = batch * (1.0 if name.endswith("1_0") else 2.0)
        return [
            pr.Prediction(
                name,
                "NVIDIA H200",
                batch,
                "fp16",
                backend,
                224,
                10**9 * batch,
                ms,
                batch / ms * 1e3,
                0.25,
                False,
                "h200_sxm",
            )
        ]

    shipped = selection.PROFILES_DIR / "h200_fp16_graph.json"  # the registry reads the profile's own record
    stub = types.SimpleNamespace(
        device="NVIDIA H200",
        precision="fp16",
        profile_path=str(shipped),
        predict_on=predict_on,
        check_condition=lambda precision, backend, channels_last: None,
        category_scales=None,
        gpu=types.SimpleNamespace(key="h200_sxm"),
    )
    monkeypatch.setattr(selection, "select_profile", lambda *args: shipped)
    monkeypatch.setattr(fit_cache, "load_predictor", lambda path, on_fit=None: stub)
    monkeypatch.setattr(measured, "MEASURED_DIR", tmp_path)  # no whole network measured: the stub's numbers


def test_predict_of_a_glob_gives_one_row_per_model_and_batch(stub_predictor, capsys):
    argv = ["predict", "torchvision:squeezenet1_*", "--gpu", "h200", "--batch", "1,4"]
    assert main([*argv, "--csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("model,gpu,batch,") and "layers" not in rows[0]
    # latency = batch x 1 ms (1_0) or 2 ms (1_1)
    assert [row.split(",")[0:3:2] + [row.split(",")[7]] for row in rows[1:]] == [
        ["torchvision:squeezenet1_0", "1", "1.0"],
        ["torchvision:squeezenet1_0", "4", "4.0"],
        ["torchvision:squeezenet1_1", "1", "2.0"],
        ["torchvision:squeezenet1_1", "4", "8.0"],
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(d["model"][-3:], d["batch"]) for d in doc] == [("1_0", 1), ("1_0", 4), ("1_1", 1), ("1_1", 4)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 models on NVIDIA H200" in out and out.count("squeezenet1_1") == 2


def test_predict_of_a_glob_prints_each_failure_and_exits_1(stub_predictor, capsys):
    assert main(["predict", "torchvision:squeezenet1_*", "--gpu", "h200", "--res", "9", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and captured.err.count("cannot run at 9 px") == 2


def test_an_advise_trial_line_keeps_three_significant_digits():
    """A CPU's 0.703 samples/s used to print as "1 samples/s"."""
    from utilscope.advise.advisor import Trial
    from utilscope.present.advise_view import trial_line

    slow = Trial("as given", "as given", 1, "graph", "fp32", True, "ok", samples_per_s=0.70342, latency_ms=1421.6)
    assert trial_line(slow) == "batch 1: as given (graph, fp32): 0.703 samples/s, 1,422 ms"
    ladder = Trial("as given", "batch", 8, "graph", "fp32", True, "oom")
    assert trial_line(ladder) == "batch ladder, batch 8: as given (graph, fp32): oom"


def test_nas_sample_reports_its_progress_on_stderr(tmp_path, monkeypatch, capsys):
    """A large sample (or a narrow FLOPs band) draws for seconds to minutes: it says how far it is."""
    from utilscope.nas import sampler

    monkeypatch.setattr(sampler, "PROGRESS_DRAWS", 2)
    assert main(["nas", "sample", "--space", "mbv3", "-n", "5", "--out", str(tmp_path / "a.jsonl")]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0].startswith("1 of 5 distinct architectures after 2 draws, ") and len(lines) == 2
    assert captured.out.startswith("5 mbv3 architectures (seed 0)")


def test_advice_whose_ladder_never_ran_says_so_instead_of_none():
    import types

    from rich.console import Console

    from utilscope.advise.advisor import Trial
    from utilscope.present.advise_view import render_advice

    oom = Trial("as given", "batch", 1, "graph", "fp16", True, "oom")
    advice = types.SimpleNamespace(
        trials=[], batch_ladder=[oom], saturation_batch=None, notes=[], gpu_measurement=True, commands={}, best={}
    )
    console = Console(record=True, width=200)
    render_advice(advice, console)
    text = console.export_text()
    assert "saturation batch (the smallest within 5% of the best throughput): none (no batch size" in text
    assert "None" not in text


def test_a_long_step_says_how_far_it_is_in_plain_lines_when_its_output_is_not_a_terminal(capsys, monkeypatch):
    import io

    from rich.console import Console

    from utilscope.cli import progress as progress_module

    clock = iter([0.0, 0.0, 3.0, 12.0, 13.0])  # start, then each update's time
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    with progress_module.progress(Console(file=io.StringIO()), "counting", "models") as update:
        for done in (1, 2, 3, 4):
            update(done, 4)
    lines = capsys.readouterr().err.splitlines()
    # the first, the one 10 s after it, and the last; not the one 3 s in
    assert lines == [
        "utilscope: counting: 1/4 models (0 s)",
        "utilscope: counting: 3/4 models (12 s)",
        "utilscope: counting: 4/4 models (13 s)",
    ]


def test_a_shipped_profile_is_named_by_its_file_and_a_users_as_given():
    from utilscope.cli.predict import shown_profile
    from utilscope.predict.selection import PROFILES_DIR

    assert shown_profile(str(PROFILES_DIR / "h200_fp16_graph.json")) == "shipped h200_fp16_graph.json"
    assert shown_profile("my/gpu.json") == "my/gpu.json"


def test_a_first_ceiling_measurement_is_said_before_it_runs(capsys, monkeypatch):
    import types

    import torch

    from utilscope import hardware
    from utilscope.cli.measure import say_ceilings
    from utilscope.hardware import ceilings

    monkeypatch.setattr(hardware, "resolve_device", lambda device: torch.device(device))
    for cached, said in ((False, True), (True, False)):
        monkeypatch.setattr(ceilings, "ceilings_cached", lambda device, cached=cached: cached)
        say_ceilings(types.SimpleNamespace(ceilings="measure", device="cuda"))
        assert ("measuring this device's ceilings first" in capsys.readouterr().err) is said
    monkeypatch.setattr(ceilings, "ceilings_cached", lambda device: False)
    for ceilings_asked, device in (("skip", "cuda"), ("measure", "cpu")):  # a CPU's take about a second
        say_ceilings(types.SimpleNamespace(ceilings=ceilings_asked, device=device))
        assert capsys.readouterr().err == ""
