"""The bad-input suite's tables: one module per area, each a ``CASES`` list of ``Case`` rows that
``tests/test_bad_inputs.py`` runs.

A case is a command line with placeholders (``{empty}``, ``{store}``, ... : the files of ``sandbox.build``), the exit
code it must end with and a phrase its one-line message must contain (case-insensitive). Every case runs with the
sandbox as its working folder, and the sandbox (every file's bytes and mode, every folder) must be the same after it:
bad input never creates, changes or removes a file. ``code`` 2 cases must print exactly one line on standard error
(no traceback, no usage block); no case may print a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """``argv``: the command line after ``utilscope``, split like a shell would (placeholders filled first);
    ``code``: the exit code; ``phrase``: a part of the message on standard error (``""``: any); ``unprivileged``: run
    without root's right to read and write every file (chmod 000 files and read-only folders; such cases run in one
    child process with those capabilities dropped); ``creates``: sandbox paths the command may create (a legitimate
    output, e.g. a merged store), removed after the case."""

    argv: str
    code: int
    phrase: str = ""
    unprivileged: bool = False
    creates: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.argv
