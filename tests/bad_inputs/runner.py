"""Run command lines through ``utilscope.cli.main`` in this process, one after the other, and print their exit codes
and output as JSON: ``python runner.py SANDBOX ARGV_JSON``. The suite starts it once for the cases that must run
without root's right to read and write every file (``Case.unprivileged``), under ``setpriv`` with those capabilities
dropped."""

from __future__ import annotations

import os
import sys

# Run as a script, this folder comes first on sys.path: its case module numbers.py must not hide the standard
# library's numbers (which torch imports), so the folder is taken off before anything else is imported.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != HERE]

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

from bad_inputs.sandbox import snapshot  # noqa: E402


def run(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``utilscope ARGV``; argparse's SystemExit is an exit code like any other."""
    from utilscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def run_and_compare(argv: list[str], root: Path) -> tuple[int, str, str, list[str]]:
    """``run``, and the sandbox paths the command created, changed or removed."""
    before = snapshot(root)
    code, out, err = run(argv)
    after = snapshot(root)
    return code, out, err, sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))


def main() -> None:
    root, argvs = Path(sys.argv[1]), json.loads(sys.argv[2])
    os.chdir(root)
    print(json.dumps([run_and_compare(argv, root) for argv in argvs]))


if __name__ == "__main__":
    main()
