"""The command line's parser: argparse with three rules of its own, on every parser and sub-parser.

- No abbreviations: ``--rooflin`` is not ``--roofline`` (a flag added later must never change what an old command
  line means).
- Every error is one line on standard error, ``utilscope: error: MESSAGE (see: utilscope VERB --help)``, exit 2:
  no usage block (``--help`` prints it in full).
- A misspelt verb, sub-verb, choice or flag gets a did-you-mean (``utilscope profil``: "did you mean profile?").

The ``type`` functions that check an option's value while parsing are in ``utilscope.cli.values``.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable

from utilscope.cli.common import EXIT_USAGE

NUMBER = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)  # a value, never an option: -1, -0.5, -1/2, -inf


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely misspells or abbreviates: itself in other case, else the only one it
    starts, else the closest by difflib's ratio (at least 0.6), else None."""
    candidates = list(candidates)
    same = [candidate for candidate in candidates if candidate.lower() == word.lower()]
    started = [candidate for candidate in candidates if word and candidate.startswith(word)]
    if same or len(started) == 1:
        return (same or started)[0]
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` without abbreviations, with one-line errors and did-you-mean suggestions; its
    sub-parsers (``add_subparsers().add_parser``) are of this class too. A token that starts like a negative number
    (``-1/2``, ``-inf``) is a value, never an option."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NUMBER  # argparse's own takes only -1 and -1.5 as values

    def error(self, message: str):
        text = re.sub(r"^argument (\S+): \1 ", r"\1 ", " ".join(message.split()))  # a check that names its option
        print(f"utilscope: error: {text} (see: {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def _check_value(self, action, value):  # argparse's hook for ``choices``, sub-commands included
        if action.choices is None or value in action.choices:
            return
        choices = [str(choice) for choice in action.choices]
        guess = closest(str(value), choices)
        hint = f"did you mean {guess}?" if guess else f"use one of: {', '.join(choices)}"
        if isinstance(action, argparse._SubParsersAction):
            verb = self.prog.removeprefix("utilscope").strip()
            raise argparse.ArgumentError(None, f"unknown {verb + ' ' if verb else ''}command {value!r}; {hint}")
        raise argparse.ArgumentError(action, f"invalid choice {value!r}; {hint}")

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, but an option this parser does not know is said first, with a guess (a misspelt required
        option is not "required"), and anything left over is an error here, where the verb's options are known
        (argparse reports it from the top-level parser, which knows only ``--help`` and ``--version``)."""
        args = sys.argv[1:] if args is None else list(args)
        unknown = self._unknown_option(args)
        if unknown is not None:
            self.error(self._unknown([unknown]))
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unknown(extras))
        return namespace, extras

    def _unknown_option(self, args: list[str]) -> str | None:
        """The first option this parser does not know: before the verb in a parser of verbs (what follows is the
        verb's), anywhere before ``--`` in a verb's."""
        for arg in args:
            if arg == "--" or (self._subparsers is not None and not arg.startswith("-")):
                return None
            if not arg.startswith("-") or arg == "-" or NUMBER.match(arg):
                continue
            known = arg.partition("=")[0] in self._option_string_actions
            if not known and not (arg[1] != "-" and arg[:2] in self._option_string_actions):  # -n5 is -n 5
                return arg
        return None

    def _unknown(self, extras: list[str]) -> str:
        option = next((extra for extra in extras if extra.startswith("-") and not NUMBER.match(extra)), None)
        if option is None:
            return f"unexpected argument {extras[0]!r}"
        name = option.partition("=")[0]
        guess = closest(name, [o for o in self._option_string_actions if o.startswith("--") or len(name) <= 2])
        if guess is None:
            return f"unknown option {name}"
        if guess.startswith(name):
            return f"unknown option {name}; did you mean {guess}? (options are never abbreviated)"
        return f"unknown option {name}; did you mean {guess}?"


__all__ = ["Parser", "closest"]
