"""The command line: parse, call one library function, render, map errors to exit codes. No logic lives here: every
option is checked by the library object it builds (``MeasureRequest``, ``CudnnSettings``, ``SurveyGrid``, ...).

Exit codes: 0 ok; 1 some models (or cells) of a multi-model command failed, each failure printed, the others ran;
2 usage error (bad input: unknown model, batch <= 0, ``--peak nan``, a store of a newer schema, ...), one line;
3 an unexpected error (a bug), with its traceback; 130 interrupted (Ctrl-C; a survey keeps what it stored).
"""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings

from rich.console import Console

from utilscope.cli import count, measure, nas, survey
from utilscope.cli.common import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE
from utilscope.errors import UtilscopeError

VERB_GROUPS = (count, measure, survey, nas)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="utilscope", description="How much of a GPU does a CNN's inference really use, and why."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for group in VERB_GROUPS:
        group.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 200)
    warnings.filterwarnings("ignore", category=FutureWarning, module="torchvision")
    try:
        return args.run(args, console)
    except UtilscopeError as exc:
        print(f"utilscope: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # a survey says what it stored and what is left
        print(f"utilscope: {exc or 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so, with the traceback, and an exit code of its own
        traceback.print_exc()
        print(f"utilscope: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INTERNAL


__all__ = ["build_parser", "main"]
