"""Bad input, table-driven: every case of ``tests/bad_inputs/*.py`` ends with its exit code and a one-line message
naming the problem, prints no traceback, and leaves every file of the sandbox as it was (nothing created, changed or
removed). Cases run in this process (no model is measured; most never import a model); the ones that need an
unprivileged user run together in one child process."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import bad_inputs
import pytest
from bad_inputs import Case, runner, sandbox


def _cases() -> list[Case]:
    cases = []
    for module in pkgutil.iter_modules(bad_inputs.__path__):
        if module.name not in ("sandbox", "runner"):
            cases += importlib.import_module(f"bad_inputs.{module.name}").CASES
    return cases


CASES = _cases()
PRIVILEGED = [case for case in CASES if not case.unprivileged]
UNPRIVILEGED = [case for case in CASES if case.unprivileged]
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


class Sandbox:
    """The cases' folder, its placeholders and the state every case must leave it in; rebuilt after a case that
    changed it, so one failure does not spread to the next cases."""

    def __init__(self, factory):
        self.factory = factory
        self.rebuild()

    def rebuild(self) -> None:
        self.root = self.factory.mktemp("sandbox")
        self.paths = sandbox.build(self.root)
        self.state = sandbox.snapshot(self.root)

    def argv(self, case: Case) -> list[str]:
        return shlex.split(case.argv.format(**self.paths))

    def check_unchanged(self, case: Case) -> None:
        for created in case.creates:
            path = self.root / created
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        after = sandbox.snapshot(self.root)
        if after != self.state:
            changed = sorted(name for name in set(after) | set(self.state) if after.get(name) != self.state.get(name))
            self.rebuild()
            pytest.fail(f"the command changed the sandbox: {changed}")


@pytest.fixture(scope="module")
def box(tmp_path_factory, isolated_caches):
    os.environ.pop("RAY_ADDRESS", None)
    return Sandbox(tmp_path_factory)


def check(case: Case, code: int, err: str) -> None:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == case.code, f"exit {code}, expected {case.code}: {err!r}"
    if case.code == 2:
        assert len(lines) == 1, f"expected one line, got {len(lines)}: {err!r}"
    assert case.phrase.lower() in err.lower(), f"{case.phrase!r} not in {err!r}"


@pytest.mark.parametrize("case", PRIVILEGED, ids=[case.id for case in PRIVILEGED])
def test_bad_input(case, box, monkeypatch):
    monkeypatch.chdir(box.root)
    code, _, err = runner.run(box.argv(case))
    box.check_unchanged(case)
    check(case, code, err)


@pytest.fixture(scope="module")
def unprivileged_results(box) -> list[tuple[int, str, str, list[str]]]:
    """Every unprivileged case's (exit code, stdout, stderr, sandbox paths it changed), from one child process (as
    root: without the capabilities to read and write any file)."""
    argvs = [box.argv(case) for case in UNPRIVILEGED]
    command = [sys.executable, str(Path(runner.__file__)), str(box.root), json.dumps(argvs)]
    if AS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop the right to read every file")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all", *command]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(bad_inputs.__path__[0]).parent), *sys.path])}
    done = subprocess.run(command, capture_output=True, text=True, cwd=box.root, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("index", range(len(UNPRIVILEGED)), ids=[case.id for case in UNPRIVILEGED])
def test_bad_input_unprivileged(index, unprivileged_results, box):
    case = UNPRIVILEGED[index]
    code, _, err, changed = unprivileged_results[index]
    assert not [name for name in changed if name.split(os.sep)[0] not in case.creates], changed
    check(case, code, err)


def test_the_suite_is_large_and_has_no_duplicate_case():
    assert len({case.argv for case in CASES}) == len(CASES)
