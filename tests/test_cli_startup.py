"""Start-up: ``import utilscope`` and parsing a command line import no torch, pandas, numpy or Ray, so a usage error,
``--help`` and ``--version`` are said in a fraction of a second (docs/benchmarks.md times them). Checked in a fresh
process by the modules it imported: a closed-form check, no timing."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sqlite3
import subprocess
import sys

import pytest

from utilscope.cli import values
from utilscope.models import sets, timm_sets, torchvision_names

HEAVY = ("torch", "pandas", "numpy", "ray")
PRELUDE = f"""import json, sys
HEAVY = {HEAVY!r}


def heavy():
    return [m for m in HEAVY if m in sys.modules]


"""
MAIN = "from utilscope.cli import main\nprint(json.dumps({'code': main(sys.argv[1:]), 'heavy': heavy()}))"


def _run(code: str, *args: str) -> tuple[dict, str]:
    """The JSON object the child prints last on stdout, and its stderr."""
    done = subprocess.run([sys.executable, "-c", PRELUDE + code, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_importing_utilscope_and_its_cli_imports_nothing_heavy_until_a_function_is_asked_for():
    code = (
        "import utilscope, utilscope.cli\n"
        "light = heavy()\n"
        "count = utilscope.count  # bound on first use: the API module, and torch with it\n"
        "print(json.dumps({'light': light, 'after': heavy(), 'callable': callable(count)}))\n"
    )
    seen, _ = _run(code)
    assert seen["light"] == [] and seen["callable"]
    assert "torch" in seen["after"]  # the check sees an import


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["count", "--bogus"], "unknown option --bogus"),
        (["profil"], "unknown command 'profil'"),
        (["predict", "--batch", "0", "timm:resnet50"], "batch size must be an integer between 1 and 65536, got 0"),
        (["survey", "--precision", "nope"], "unknown precision 'nope'"),
        (["predict", "timm:resnet50", "--gpu", "nope"], "unknown GPU 'nope'"),
        (["profile", "timm:resnet50", "--backend", "nope"], "unknown backend 'nope'"),
        (["count", "timm:resnet50", "--dtype", "nope"], "unknown dtype 'nope'"),
        (["nas", "predict", "--batch", "0", "archs.jsonl"], "batch size must be an integer between 1 and 65536"),
        (["nas", "predict", "missing.jsonl"], "no such file: missing.jsonl (the architecture file)"),
        (["nas", "search", "--gpu", "nope"], "unknown GPU 'nope'"),
        (["nas", "predict", "--profile", "missing.json", "a"], "no such file: missing.json (the predictor profile"),
        (["predict", "timm:resnet50", "--host-profile", "no.json"], "no such file: no.json (the host profile"),
        (["predict", "timm:resnet50", "--anchors", "no.csv"], "no such file: no.csv (the anchors CSV"),
        (["predict", "timm:resnet50", "--profile", "no.json"], "no such file: no.json (the device profile"),
        (["count", "exports/absent.onnx"], "no such file: exports/absent.onnx (the model file)"),
        (["predict", "onnx:absent.onnx#0123456789ab"], "no such file: absent.onnx (the model file)"),
        (["survey", "--models", "absent.pt2@224"], "no such file: absent.pt2 (the model file)"),
        (["profile", "absent.py:make"], "no such file: absent.py (the factory file)"),
        (["layers", "tests/"], "tests/ is a folder: name a model file in it, or a glob such as 'tests/*.onnx'"),
        (["survey", "--res", "0"], "resolution must be between 8 and 4096 pixels, got 0"),
        (["count", "timm:resnet50", "--res", "7"], "resolution must be between 8 and 4096 pixels, got 7"),
        (["survey", "--backend", "graph,nope"], "unknown backend 'nope'"),
        (["advise", "timm:resnet50", "--backends", "nope"], "unknown backend 'nope'"),
        (["nas", "sample", "--space", "nope", "-n", "1", "--out", "a.jsonl"], "unknown search space 'nope'"),
        (["report", "missing.sqlite"], "no such file: missing.sqlite (the results store)"),
        (["export", "missing.sqlite", "out.csv"], "no such file: missing.sqlite (the results store)"),
        (["gpus", "--db", "missing.sqlite"], "no such file: missing.sqlite (the results store)"),
        (["nas", "analyze", "missing.sqlite"], "no such file: missing.sqlite (the results store)"),
        (["nas", "search", "--space", "mbv3", "--min-throughput", "1", "--simulate", "no.sqlite"], "results store"),
        (["profile", "timm:resnet50", "--peak", "nan"], "--peak must be a positive, finite number of TFLOP/s"),
        (["layers", "timm:resnet50", "--threads", "0"], "--threads must be a positive integer, got 0"),
        (["layers", "timm:resnet50", "--top", "0"], "--top must be at least 1, got 0"),
        (["layers", "timm:resnet50", "--roofline", "r.txt"], "the roofline plot must be a .png file"),
        (["survey", "--jobs", "0"], "--jobs must be at least 1"),
        (["survey", "--timeout", "inf"], "--timeout must be positive and at most 604800 seconds"),
        (["survey", "--min-time-ms", "0"], "--min-time-ms must be positive"),
        (["survey", "--cudnn-benchmark-limit", "-1"], "--cudnn-benchmark-limit must be 0 (all algorithms) or more"),
        (["survey", "--shard", "4/3"], "a shard is K/N"),
        (["survey", "--executor", "ray", "--ray-address", "garbage"], "--ray-address must be HOST:PORT"),
        (["survey", "--ray-address", "auto"], "--ray-address and --gpu-types apply to --executor ray"),
        (["survey", "--db", "tests"], "tests is a folder, expected a file (the results store"),
        (["survey", "--models", "timm:resnet50@4"], "resolution must be between 8 and 4096 pixels, got 4"),
        (["nas", "measure", "data/h200/mbv3_archs.jsonl", "--limit", "0"], "--limit must be at least 1, got 0"),
        (["nas", "sample", "--space", "mbv3", "--flops-min", "2", "--flops-max", "1"], "no architecture fits"),
        (["nas", "search", "--space", "mbv3", "--min-throughput", "1", "--budget", "0"], "--budget must be"),
        (["advise", "timm:resnet50", "--multiple", "0"], "the channel multiple (--multiple) must be at least 1"),
        (["report", "-o", "pyproject.toml", "missing.sqlite"], "the report folder pyproject.toml exists and is not a"),
        (["calibrate", "--host", "--out", "host.txt"], "must be a .json file, got 'host.txt'"),
        (["ingest", "timm-benchmark", "t.csv", "--jobs", "0"], "--jobs must be at least 1"),
        (["count", "nas:*"], "a glob matches torchvision and timm models, not nas ones"),
        (["count", "nope:*"], "unknown model source 'nope'; use one of: torchvision, timm"),
        (["predict", "nas:mbv3", "--gpu", "h200"], "'nas:mbv3' is not a nas model: give archs.jsonl:ID"),
        (["count", "file:resnet"], "'file:resnet' is not a file model"),
        (["count", "absent.jsonl:0123456789abcdef"], "no such file: absent.jsonl (the architecture file)"),
        (["count", "pyproject.toml.jsonl:0a"], "no such file: pyproject.toml.jsonl"),
        (["count", "data/h200/mbv3_archs.jsonl:nope"], "no architecture with id 'nope' in data/h200/mbv3_archs.jsonl"),
        (["nas", "predict", "pyproject.toml", "--gpu", "h200"], "pyproject.toml:1: not JSON"),
        (["nas", "search", "--space", "mbv3", "--min-throughput", "1", "--pool", "pyproject.toml"], "not JSON"),
        (["nas", "search", "--objective", "pyproject.toml"], "pyproject.toml is not JSON"),
        (["nas", "search", "--profile", "pyproject.toml"], "expected the predictor profile from `utilscope nas fit`"),
        (
            ["nas", "fit", "--table", "pyproject.toml"],
            "pyproject.toml is not JSON (Expecting value, line 1), expected the latency",
        ),
        (["nas", "fit", "--prior-profile", "pyproject.toml"], "expected the device profile from `utilscope calib"),
        (["predict", "resnet50", "--profile", "pyproject.toml"], "expected the device profile from `utilscope calib"),
        (["predict", "resnet50", "--gpu", ""], "give --gpu (a GPU of the spec table, or all) or --profile FILE"),
        (["predict", "resnet50", "--gpu", "t4", "--precision", "bf16"], "NVIDIA T4 has no bf16 unit for bf16"),
        (["predict", "resnet50", "--gpu", "h200", "--price", "h200=free"], "--price 'h200=free': give GPU=USD_per_h"),
        (["predict", "resnet50", "--gpu", "t4", "--anchor", "resnet50=300"], "give SPEC@BATCH=SAMPLES_PER_S"),
        (["predict", "resnet50", "--gpu", "t4", "--anchor", "resnet50@8=-3"], "anchor resnet50@8's throughput must"),
        (["predict", "resnet50", "--gpu", "all", "--anchor", "resnet50@8=3"], "anchors are measurements of one GPU"),
        (["predict", "resnet50", "--gpu", "h200", "--host-profile", "pyproject.toml"], "give --backend eager"),
    ],
)
def test_a_usage_error_is_said_without_importing_anything_heavy(argv, phrase):
    """The parser checks these values itself (an unknown option or verb; a batch size, resolution, precision,
    backend, search space, GPU, peak, thread count, worker count, timeout, shard or Ray address checked by the
    library's own checks while parsing; an input file, a store to read or write, a file to write, a model or factory
    file that is not there, or a folder named as a model), or the command before it imports anything heavy (options
    that must agree): one line, exit 2, before torch is imported."""
    seen, err = _run(MAIN, *argv)
    assert seen == {"code": 2, "heavy": []}
    assert err.count("\n") == 1 and err.startswith("utilscope: error: ") and phrase in err, err


def test_every_help_and_the_version_import_nothing_heavy():
    code = (
        "import argparse, contextlib, io\n"
        "from utilscope.cli import build_parser, main\n"
        "def walk(parser):\n"
        "    yield parser\n"
        "    for action in parser._actions:\n"
        "        if isinstance(action, argparse._SubParsersAction):\n"
        "            for sub in action.choices.values():\n"
        "                yield from walk(sub)\n"
        "helps = [parser.format_help() for parser in walk(build_parser())]\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['--version'])\n"
        "print(json.dumps({'helps': len(helps), 'version': [code, out.getvalue()], 'heavy': heavy()}))\n"
    )
    seen, _ = _run(code)
    assert seen["heavy"] == [] and seen["helps"] > 20 and seen["version"][0] == 0
    assert seen["version"][1].startswith("utilscope ")


def _tables(monkeypatch, torchvision, timm) -> None:
    """The shipped tables of names as ``values.MODEL`` sees them: these names (None: not the installed package's)."""
    monkeypatch.setattr(torchvision_names, "installed_names", lambda: torchvision)
    monkeypatch.setattr(timm_sets, "installed_names", lambda version: timm)


def test_a_timm_model_the_installed_timm_lacks_is_refused_while_parsing_from_the_shipped_names(monkeypatch):
    """``values.MODEL``: ``timm:NAME`` is checked against the shipped table's names when the installed timm is the
    table's (``timm_sets.installed_names``), with the nearest names; a pretrained tag after a known architecture is
    timm's (``timm.is_model``); a glob, another source or an unknown list (another timm installed) is left to the
    library."""
    _tables(monkeypatch, None, frozenset({"resnet50", "resnet18"}))
    assert values.MODEL("timm:resnet50+reparam") == "timm:resnet50+reparam"
    assert values.MODEL("timm:resnet50.a1_in1k") == "timm:resnet50.a1_in1k"
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown model 'timm:resnet5'; did you mean: timm:resnet50"):
        values.MODEL("timm:resnet5")
    assert values.MODEL("timm:resnet5*") == "timm:resnet5*"
    assert values.MODEL("nas:mbv3:0123456789abcdef") == "nas:mbv3:0123456789abcdef"
    _tables(monkeypatch, None, None)
    assert values.MODEL("timm:nope") == "timm:nope"
    monkeypatch.undo()
    monkeypatch.setattr(timm_sets.metadata, "version", lambda name: "0.0.1")
    assert timm_sets.installed_names("1.0.31") is None and timm_sets.installed_names("0.0.1") == timm_sets.names()


def test_a_torchvision_model_the_installed_torchvision_lacks_is_refused_while_parsing(monkeypatch):
    """``torchvision:NAME`` against torchvision's table (``torchvision_names.installed_names``), with
    ``zoo.parse_spec``'s message and suggestions; no table of the installed torchvision: left to the library."""
    _tables(monkeypatch, ("resnet18", "resnet50", "resnet152"), None)
    assert values.MODEL("torchvision:resnet50") == "torchvision:resnet50"
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        values.MODEL(" torchvision:resnet5+reparam ")
    assert str(refused.value) == (
        "unknown model 'torchvision:resnet5'; did you mean: torchvision:resnet50, torchvision:resnet152, "
        "torchvision:resnet18?"
    )
    with pytest.raises(argparse.ArgumentTypeError, match=r"^unknown model 'torchvision:resnet50.a1_in1k'; did"):
        values.MODEL("torchvision:resnet50.a1_in1k")  # a tag is timm's
    _tables(monkeypatch, None, None)
    assert values.MODEL("torchvision:resnet5") == "torchvision:resnet5"


def test_a_bare_name_is_known_when_either_table_has_it_and_suggests_torchvisions_first(monkeypatch):
    """A bare NAME tries torchvision, then timm (``zoo.parse_spec``): refused only when both tables are the
    installed packages' and neither has it, with the nearest names of both, torchvision's first at equal
    closeness."""
    _tables(monkeypatch, ("resnet50", "vgg11"), frozenset({"resnet50", "resnet51q", "convnext_atto"}))
    for known in ("vgg11", "convnext_atto", "resnet50+reparam", "convnext_atto.d2_in1k"):
        assert values.MODEL(known) == known
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        values.MODEL("resnet5")
    assert str(refused.value) == (
        "unknown model 'resnet5'; did you mean: torchvision:resnet50, timm:resnet50, timm:resnet51q?"
    )
    with pytest.raises(argparse.ArgumentTypeError, match=r"^unknown model 'qqqqqqqq'$"):
        values.MODEL("qqqqqqqq")
    assert values.MODEL_AT("vgg11@288") == "vgg11@288" and values.MODEL_AT("resnet5*@288") == "resnet5*@288"
    with pytest.raises(argparse.ArgumentTypeError, match=r"^unknown model 'resnet5'; did you mean: torchvision:res"):
        values.MODEL_AT("resnet5+reparam@288")  # survey's --models
    for one in ((None, frozenset({"resnet50"})), (("resnet50",), None)):
        _tables(monkeypatch, *one)
        assert values.MODEL("resnet5") == "resnet5"


def test_an_unknown_source_is_refused_while_parsing_and_a_spec_of_a_files_shape_is_left_to_the_library(
    monkeypatch, tmp_path
):
    """``foo:bar`` names no source: ``zoo._unknown_source``'s message (``tests/test_zoo.py`` checks it is the same);
    a spec a source recognises by its shape (a model file, a factory file, an architecture file or id, a path), a
    glob of files or one the tables match is left to the library, as is any spec while a third-party package
    declares sources (their names are known only once imported); but a model or factory file that is not there, a
    folder, a shaped source's prefix before no spec of its shape, and a glob of no source, of a source without
    names or that matches no name are refused here with the library's message (a file's content too, when it
    tells: below)."""
    _tables(monkeypatch, ("resnet50",), frozenset({"resnet50"}))
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        values.MODEL("foo:bar+reparam")
    assert str(refused.value).startswith("unknown model source 'foo' in 'foo:bar'; use one of: torchvision, timm, or")
    monkeypatch.chdir(tmp_path)
    _model_files_of_each_format(tmp_path)
    (tmp_path / "archs.jsonl").write_text('{"space": "mbv3", "id": "0a1b"}\n')  # its record: the space's to check
    left = [
        "model.onnx", "foo:model.PT", "net.pt2", "net.pth", "net.ts", "archs.jsonl:0a1b", "net.py:make",
        "net.py", "mbv3:0123456789abcdef", "nas:mbv3:0123456789abcdef", "file:nas:x", "a/b:c", "resnet5*",
        "resnet50@224", "onnx:model.onnx#0123456789ab", "absent*.onnx",
        "onnx:exports/*.pt",
    ]  # fmt: skip
    assert [values.MODEL(text) for text in left] == left
    for text, message in (
        ("file:net", "'file:net' is not a file model: give a .py file"),  # zoo.parse_spec's (sources.not_of_source)
        ("nas:mbv3:", "'nas:mbv3:' is not a nas model: give archs.jsonl:ID"),
        ("onnx:m", "'onnx:m' is not a onnx model: give a model file (.onnx, .pt2, .pt)"),
        ("foo:*", "unknown model source 'foo'; use one of: torchvision, timm"),  # zoo.list_models' (a glob's)
        ("nas:*", "a glob matches torchvision and timm models, not nas ones: name nas models one at a time, as archs"),
        ("resnet9*", "no model matches 'resnet9*'"),
        ("absent.onnx", "no such file: absent.onnx (the model file)"),
        ("nas:absent.jsonl:0a1b", "no such file: absent.jsonl (the architecture file)"),
        ("archs.jsonl:0a1c", "no architecture with id '0a1c' in archs.jsonl (1 architectures)"),
        ("pt2:absent.pt2#0123456789ab", "no such file: absent.pt2 (the model file)"),
        ("absent.py:make", "no such file: absent.py (the factory file)"),
        ("file:net.py:make#0123456789ab", "net.py changed since it was named 'net.py:make#0123456789ab'"),
        ("", "empty model name in ''"),  # zoo.parse_spec's message (sources.empty_name)
        ("timm:", "empty model name in 'timm:'"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            values.MODEL(text)
    (tmp_path / "exports").mkdir()
    for text in ("exports", "exports/", str(tmp_path / "exports")):
        with pytest.raises(argparse.ArgumentTypeError, match=r"is a folder: name a model file in it, or a glob such"):
            values.MODEL(text)
    monkeypatch.setattr(values, "_plugged_sources", lambda: True)
    for text in ("foo:bar", "resnet5", "foo:*", "nas:mbv3", "resnet9*"):
        assert values.MODEL(text) == text
    with pytest.raises(argparse.ArgumentTypeError, match="unknown model 'timm:resnet5'"):
        values.MODEL("timm:resnet5")


def test_the_shipped_torchvision_table_is_read_only_for_its_version(monkeypatch):
    """``installed_names``: the table's names for its own torchvision (a CUDA build's local version aside), None for
    another version or none installed."""
    version = torchvision_names.table_version()
    for installed, expected in ((version, True), (f"{version}+cu130", True), ("0.0.1", False)):
        monkeypatch.setattr(torchvision_names.metadata, "version", lambda name, v=installed: v)
        assert (torchvision_names.installed_names() == torchvision_names.names()) is expected
        assert (torchvision_names.installed_names() is None) is not expected

    def missing(name):
        raise torchvision_names.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(torchvision_names.metadata, "version", missing)
    assert torchvision_names.installed_names() is None
    assert "resnet50" in torchvision_names.names() and all(":" not in name for name in torchvision_names.names())


@pytest.mark.skipif(
    timm_sets.installed_names(sets.timm_version()) is None,
    reason="the installed timm is not the one the shipped table of its names was built with",
)
def test_an_unknown_timm_model_is_said_without_importing_anything_heavy():
    seen, err = _run(MAIN, "count", "timm:nope")
    assert seen == {"code": 2, "heavy": []} and "unknown model 'timm:nope'" in err


@pytest.mark.skipif(
    torchvision_names.installed_names() is None or timm_sets.installed_names(sets.timm_version()) is None,
    reason="the installed torchvision or timm is not the one the shipped table of its names was built with",
)
@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        ("predict torchvision:resnet5 --gpu h100_sxm", "unknown model 'torchvision:resnet5'; did you mean: torch"),
        ("predict resnet5 --gpu h100_sxm", "unknown model 'resnet5'; did you mean: torchvision:resnet50, timm:"),
        ("predict foo:bar --gpu h100_sxm", "unknown model source 'foo' in 'foo:bar'; use one of: torchvision, timm,"),
        ("survey --models resnet50@288 --models resnt50@288 --dry-run", "argument --models: unknown model 'resnt50'"),
        ("count timm:zzz*", "no model matches 'timm:zzz*'"),
        ("models zzz*", "no model matches 'zzz*'"),
        ("survey --models torchvision:nosuchnet* --dry-run", "no model matches 'torchvision:nosuchnet*'"),
    ],
)
def test_an_unknown_torchvision_or_bare_name_or_source_is_said_without_importing_anything_heavy(argv, phrase):
    seen, err = _run(MAIN, *argv.split())
    assert seen == {"code": 2, "heavy": []} and err.count("\n") == 1 and phrase in err, err


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        ("survey --device quantum --models m.py:make", "argument --device: bad device 'quantum'; use cpu, cuda or"),
        ("profile timm:resnet50 --device ''", "bad device ''"),
        ("ceilings --device cuda:00", "bad device 'cuda:00'"),
        ("nas search --space mbv3 --min-throughput 1 --device mps", "bad device 'mps'"),
        ("survey --executor ray --ray-address 127.0.0.1:1 --dry-run", "no Ray cluster answers at 127.0.0.1:1: conn"),
        ("nas measure data/h200/mbv3_archs.jsonl --executor ray --ray-address no-such-host.invalid:1", "unknown host"),
        ("ingest timm-benchmark pyproject.toml --db pub.sqlite", "is not named like a timm inference benchmark"),
        ("ingest timm-benchmark absent.csv --db pub.sqlite", "no such file: absent.csv (the timm-benchmark table)"),
    ],
)
def test_a_bad_device_ray_address_or_published_table_is_said_without_importing_anything_heavy(argv, phrase):
    """Checked by the library's own rules, none of which imports torch: a device's name while parsing
    (``hardware.devices``); before the command's imports, a Ray head that does not answer
    (``ray_cluster.check_reachable``) and a published table the ingester could not read
    (``survey.formats.read_tables``)."""
    seen, err = _run(MAIN, *shlex.split(argv))
    assert seen == {"code": 2, "heavy": []} and err.count("\n") == 1 and phrase in err, err


def test_a_condition_no_profile_predicts_is_said_without_importing_anything_heavy():
    """``selection.select_profile``, the registry's choice the request makes, reads the shipped profiles' records and
    applies ``conditions.condition_problem`` without torch, pandas or numpy, before ``predict`` imports the library."""
    seen, err = _run(MAIN, *"predict resnet50 --gpu h200 --precision bf16 --no-channels-last".split())
    assert seen == {"code": 2, "heavy": []} and err.count("\n") == 1, err
    assert "no device profile expresses bf16 on NCHW (contiguous) tensors on the graph backend" in err, err


def test_a_resumed_output_that_is_not_what_the_verb_writes_is_said_without_importing_anything_heavy(tmp_path):
    """``calibrate --out`` and ``nas table --out`` resume the file they name: one that holds something else is read by
    the library's own format rule (``profile_format.read_profile``, ``nas.file_formats.read_table``) before the
    command imports anything."""
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2, 3]\n")
    for argv, phrase in (
        (["calibrate", "--device", "cpu", "--out", str(listed)], "is not a device profile"),
        (
            ["nas", "table", "--space", "mbv3", "--device", "cpu", "--out", str(listed)],
            "is not a utilscope latency table",
        ),
    ):
        seen, err = _run(MAIN, *argv)
        assert seen == {"code": 2, "heavy": []} and err.count("\n") == 1 and phrase in err, err


def test_another_applications_store_and_a_store_merged_twice_are_said_without_importing_anything_heavy(tmp_path):
    """``store_files.check_store`` reads a SQLite file's marks with the standard library's sqlite3 while parsing;
    ``store_files.merge_paths`` checks a merge's stores before the merge imports anything."""
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    fresh = tmp_path / "fresh.sqlite"  # an empty database, which becomes a store
    with sqlite3.connect(fresh) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    conn.close()
    for argv, phrase in (
        (["report", str(foreign), "-o", str(tmp_path / "out")], "is a SQLite database of another application"),
        (["survey", "--db", str(foreign), "--dry-run"], "argument --db: "),
        (["merge", str(tmp_path / "a.sqlite"), "-o", str(foreign)], "no such file"),
        (["merge", str(fresh), str(fresh), "-o", str(tmp_path / "m.sqlite")], "is given twice: merge each store"),
    ):
        seen, err = _run(MAIN, *argv)
        assert seen == {"code": 2, "heavy": []} and err.count("\n") == 1 and phrase in err, err


def _model_files_of_each_format(folder) -> None:
    """Files whose bytes are of a format their names allow (what they hold beyond it is the library's to check): an
    ONNX graph, the zip archives of TorchScript and torch.export by their entries, a factory file."""
    import zipfile

    from model_file_helpers import onnx_graph

    onnx_graph(folder / "model.onnx")
    entries = {"TorchScript": ("a/constants.pkl", "a/code/a.py"), "torch.export": ("a/archive_format",)}
    for name, kind in (("foo:model.PT", "TorchScript"), ("net.pt2", "torch.export"), ("net.pth", "TorchScript")):
        with zipfile.ZipFile(folder / name, "w") as archive:
            for entry in entries[kind]:
                archive.writestr(entry, "x")
    (folder / "net.ts").write_bytes((folder / "net.pth").read_bytes())
    (folder / "net.py").write_text("def make():\n    return None\n")


def _bad_model_files(folder) -> dict[str, str]:
    """Model and factory files that are refused by their bytes or source: name -> path (or spec)."""
    import pickle

    from model_file_helpers import onnx_graph, torchscript_file

    good = onnx_graph(folder / "model.onnx").read_bytes()
    script = torchscript_file(folder / "script.pt").read_bytes()
    files = {
        "truncated.onnx": good[: len(good) // 2],
        "script.onnx": script,
        "model.pt2": good,
        "truncated.pt": script[: len(script) // 2],
        "legacy.pt": pickle.dumps({"a": 1}, protocol=2),
        "empty.py": b"",
        "syntax.py": b"def make(:\n",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    onnx_graph(folder / "two_inputs.onnx", inputs=2)
    onnx_graph(folder / "tokens.onnx", dims=(1, 16), element_type=7)
    onnx_graph(folder / "no_data.onnx", external=True)
    (folder / "no_data.onnx.data").unlink()
    return {name: str(folder / name) for name in [*files, "two_inputs.onnx", "tokens.onnx", "no_data.onnx"]}


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        ("count @truncated.onnx", "is a truncated or corrupt ONNX model, or no ONNX model"),
        ("profile @two_inputs.onnx", "takes 2 inputs (x, x1): utilscope runs models of one image input"),
        ("layers @tokens.onnx", "takes a 2-D int64 input 'x'"),
        ("advise @no_data.onnx", "keeps its weights in no_data.onnx.data, which is missing"),
        ("count @script.onnx", "is a TorchScript archive, not an ONNX model as its name says"),
        ("predict @model.pt2 --gpu h200", "is not a PyTorch model file"),
        ("survey --dry-run --models @truncated.pt", "is a corrupt or truncated archive"),
        ("count @legacy.pt", "is a pickled module (torch.save(model)): opening it runs code the file names"),
        ("count @empty.py:make", "empty.py is empty, expected the factory file"),
        ("layers @syntax.py:make", "syntax.py raised SyntaxError: invalid syntax"),
        ("survey --dry-run --models @syntax.py:make", "syntax.py raised SyntaxError: invalid syntax"),
    ],
)
def test_a_model_or_factory_file_refused_by_its_content_is_said_without_importing_anything_heavy(
    argv, phrase, tmp_path
):
    """A model file's bytes (``file_formats.check_file``: its format, an ONNX graph's inputs and external data; the
    onnx package not imported either) and a factory file's source (``sources.check_factory_file``: read, compiled,
    not run) are checked while parsing, with the messages opening them gives."""
    paths = _bad_model_files(tmp_path)
    args = [
        paths[word[1:].split(":")[0]] + word[1:].partition(":")[1] + word[1:].partition(":")[2]
        if word.startswith("@")
        else word
        for word in argv.split()
    ]
    seen, err = _run(
        MAIN.replace("'heavy': heavy()", "'heavy': heavy() + [m for m in ('onnx',) if m in sys.modules]"), *args
    )
    assert seen == {"code": 2, "heavy": []}
    assert err.count("\n") == 1 and err.startswith("utilscope: error: ") and phrase in err, err
