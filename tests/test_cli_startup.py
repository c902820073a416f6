"""Start-up: ``import utilscope`` and parsing a command line import no torch, pandas, numpy or Ray, so a usage error,
``--help`` and ``--version`` are said in a fraction of a second (docs/benchmarks.md times them). Checked in a fresh
process by the modules it imported: a closed-form check, no timing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from utilscope.models import sets, timm_sets

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
        (["predict", "m", "--host-profile", "no.json"], "no such file: no.json (the host profile"),
        (["predict", "m", "--anchors", "no.csv"], "no such file: no.csv (the anchors CSV"),
        (["predict", "m", "--profile", "no.json"], "no such file: no.json (the device profile"),
    ],
)
def test_a_usage_error_is_said_without_importing_anything_heavy(argv, phrase):
    """The parser checks these values itself (an unknown option or verb; a batch size, precision or GPU checked by
    the library's own checks while parsing; an input file that is not there): one line, exit 2, before torch is
    imported."""
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


def test_a_timm_model_the_installed_timm_lacks_is_refused_while_parsing_from_the_shipped_names(monkeypatch):
    """``values.MODEL``: ``timm:NAME`` is checked against the shipped table's names when the installed timm is the
    table's (``timm_sets.installed_names``), with the nearest names; a glob, another source or an unknown list (another
    timm installed) is left to the library."""
    import argparse

    from utilscope.cli import values

    monkeypatch.setattr(timm_sets, "installed_names", lambda version: frozenset({"resnet50", "resnet18"}))
    assert values.MODEL("timm:resnet50+reparam") == "timm:resnet50+reparam"
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown model 'timm:resnet5'; did you mean: timm:resnet50"):
        values.MODEL("timm:resnet5")
    assert values.MODEL("timm:resnet5*") == "timm:resnet5*" and values.MODEL("torchvision:nope") == "torchvision:nope"
    monkeypatch.setattr(timm_sets, "installed_names", lambda version: None)
    assert values.MODEL("timm:nope") == "timm:nope"
    monkeypatch.undo()
    monkeypatch.setattr(timm_sets.metadata, "version", lambda name: "0.0.1")
    assert timm_sets.installed_names("1.0.31") is None and timm_sets.installed_names("0.0.1") == timm_sets.names()


@pytest.mark.skipif(
    timm_sets.installed_names(sets.timm_version()) is None,
    reason="the installed timm is not the one the shipped table of its names was built with",
)
def test_an_unknown_timm_model_is_said_without_importing_anything_heavy():
    seen, err = _run(MAIN, "count", "timm:nope")
    assert seen == {"code": 2, "heavy": []} and "unknown model 'timm:nope'" in err
