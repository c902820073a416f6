"""The command line: parse, call one library function, render, map errors to exit codes. No logic lives here: every
option is checked by the library object it builds (``MeasureRequest``, ``CudnnSettings``, ``SurveyGrid``, ...).

Exit codes: 0 ok; 1 some models (or cells) of a multi-model command failed, each failure printed, the others ran
(``merge``: some keys conflicted, each printed, the first value kept);
2 usage error (bad input: unknown model, batch <= 0, ``--peak nan``, a store of a newer schema, ...), one line;
3 an unexpected error (a bug), with its traceback; 74 the machine refused a write (no space left on the store's
disk, an I/O error), the path named, every row stored before kept; 75 a survey that stopped before every planned
cell was stored (its Ray cluster was lost, or cells have no row), with "N of M cells stored ...; run the same
command again to resume"; 130 interrupted (Ctrl-C; a survey keeps what it stored); 141
(128 + SIGPIPE, as a shell reports ``yes | head -1``) when the reader of the output went away (``utilscope models
| head -1``), quietly.

Parsing imports no torch, pandas or numpy (a usage error, ``--help`` and ``--version`` take a fraction of a second):
the verb modules' parsers read light modules only, and each command imports the library when it runs.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import traceback
import warnings

from rich.console import Console

from utilscope._version import __version__
from utilscope.cli import advise, cache, count, gpus, ingest, measure, nas, predict, survey
from utilscope.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_STORAGE,
    EXIT_USAGE,
)
from utilscope.cli.parser import Parser
from utilscope.errors import StorageError, SurveyIncomplete, UtilscopeError

VERB_GROUPS = (count, measure, survey, nas, predict, advise, ingest, gpus, cache)


def build_parser() -> argparse.ArgumentParser:
    """Every verb's parser: no abbreviated flags, one-line errors with did-you-mean (``utilscope.cli.parser``)."""
    parser = Parser(prog="utilscope", description="How much of a GPU does a CNN's inference really use, and why.")
    parser.add_argument("--version", action="version", version=f"utilscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in VERB_GROUPS:
        group.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error the parser said in one line: its exit code
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    console = Console(width=None if sys.stdout.isatty() else 200)
    warnings.filterwarnings("ignore", category=FutureWarning, module="torchvision")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            code = args.run(args, console)
        sys.stdout.flush()  # here, not at exit, so that a reader gone away is seen below
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # another pipe (a bug): not the reader of our output going away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return EXIT_BROKEN_PIPE
    except SurveyIncomplete as exc:  # its cluster was lost: what it stored stays, the same command resumes
        print(f"utilscope: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except StorageError as exc:  # not the user's input: its own code
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_STORAGE
    except UtilscopeError as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # a survey says what it stored and what is left
        print(f"utilscope: {str(exc) or 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so, with the traceback, and an exit code of its own
        traceback.print_exc()
        print(f"utilscope: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INTERNAL


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning (the library's or a dependency's) as one line on stderr, without the source line Python adds."""
    kind = "" if category is UserWarning else f"{category.__name__}: "
    print(f"utilscope: warning: {kind}{' '.join(str(message).split())}", file=file or sys.stderr)


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error on its write end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or stdout is not a file (captured)
        return False


__all__ = ["build_parser", "main"]
