"""Every runner in scripts/ and benchmarks/ is documented: each *.py and *.sh file of the folder has an entry in
that folder's README.md (a table row whose first cell names it in backquotes: what it does, how to run it, where
its output goes), and the README has no entry for a file the folder no longer holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("scripts", "benchmarks")
ENTRY = re.compile(r"^\| `([\w.-]+\.(?:py|sh))`", re.MULTILINE)  # a table row: | `name.py` (GPU) | ...


def runners(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".sh")}


def entries(readme: Path) -> set[str]:
    return set(ENTRY.findall(readme.read_text()))


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_runner_has_an_entry_in_its_folders_readme(folder):
    missing = runners(ROOT / folder) - entries(ROOT / folder / "README.md")
    assert not missing, f"{folder}/README.md has no entry for {sorted(missing)}: add a table row for each"


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_readme_has_no_entry_for_a_runner_that_is_gone(folder):
    gone = entries(ROOT / folder / "README.md") - runners(ROOT / folder)
    assert not gone, f"{folder}/README.md has entries for {sorted(gone)}, which {folder}/ no longer holds"


def test_an_entry_is_a_table_rows_first_cell(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "| script | what |\n|---|---|\n| `a.py` (GPU) | runs `b.py` |\n| `c.sh` | x |\n`d.py` in a sentence\n"
    )
    # a.py and c.sh have rows; b.py is only mentioned in a row, d.py only in prose
    assert entries(readme) == {"a.py", "c.sh"}


def test_every_flag_of_every_verb_is_in_the_readmes_synopsis_of_that_verb():
    """The README's ``utilscope VERB ...`` synopsis lines (and their continuation lines, and the options of a verb
    they name as "VERB's other options") name every option the parser has: docs cannot drift from ``--help``."""
    import argparse

    from utilscope.cli import build_parser

    blocks = re.findall(r"```[a-z]*\n(.*?)```", (ROOT / "README.md").read_text(), re.S)

    def synopsis(verb: str) -> str:
        lines, on = [], False
        for line in (line for block in blocks for line in block.splitlines()):
            if line.startswith("utilscope "):
                on = line.split()[1] == verb
            lines += [line] * on
        text = "\n".join(lines)
        return text + "".join(synopsis(other) for other in re.findall(r"(\w+)'s other options", text))

    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = {
        verb: [
            action.option_strings[-1] for action in parser._actions if not _named(action.option_strings, synopsis(verb))
        ]
        for verb, parser in verbs.items()
    }
    assert not {verb: flags for verb, flags in missing.items() if flags}


def _named(options: list[str], text: str) -> bool:
    return not options or "--help" in options or any(re.search(re.escape(o) + r"(?![\w-])", text) for o in options)
