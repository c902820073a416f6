"""The command line: parse, call one library function, render, map errors to exit codes."""

from utilscope.cli.main import main

__all__ = ["main"]
