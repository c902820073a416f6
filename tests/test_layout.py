"""The package's shape: its import graph has no cycles and no import from a lower layer to a higher one, no
function is longer than 60 lines, the seams hold (the survey workflow and utilization each in one library place,
the model sources naming no higher package, no formatter skips), and docs/architecture.md names every module. Read
from the source with ``ast``: function-local imports count too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "utilscope"
ARCHITECTURE_DOC = PACKAGE.parent.parent / "docs" / "architecture.md"
# Bottom to top: a module may import modules of its own layer or of the layers below it.
LAYERS = (
    (
        "errors",
        "files",
        "units",
        "registry",
        "torch_flags",
        "precision",
        "_version",
        "limits",
        "cache",
        "versions",
        "lazy",
    ),
    ("hardware",),  # datasheets, measured ceilings, the alignment rule: what counting and everything above read
    ("models",),
    ("counting",),
    ("measure",),
    ("attribute",),
    ("predict",),
    ("advise",),
    ("survey",),
    ("nas",),
    ("report", "present"),
    ("api",),  # the Python API: one function per command, over the library; the commands call it
    ("cli",),
    ("__init__",),  # the package's facade: ``utilscope.count``
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The project module an imported name lives in (``utilscope.measure.sweep.profile`` -> its module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set[str]:
    """The project modules ``module`` imports, anywhere in its file."""
    path, found = MODULES[module], set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {resolve(alias.name) for alias in node.names if alias.name.startswith("utilscope")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).rstrip(".")
            if base.startswith("utilscope"):
                found |= {resolve(f"{base}.{alias.name}") for alias in node.names}
    return {name for name in found if name and name != module}


GRAPH = {module: imports(module) for module in MODULES}


def layer_of(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_module_belongs_to_a_layer():
    assert {layer_of(m) for m in MODULES} <= set(RANK), {layer_of(m) for m in MODULES} - set(RANK)


def test_no_module_imports_from_a_higher_layer():
    upward = sorted(
        f"{m} -> {dep}" for m, deps in GRAPH.items() for dep in deps if RANK[layer_of(dep)] > RANK[layer_of(m)]
    )
    assert not upward, "\n".join(upward)


def test_only_the_cli_imports_the_cli():
    """The command line is the top: no library module (nor the package's facade) imports ``utilscope.cli``, so
    every workflow a command runs is a library function a notebook can call too."""
    into_cli = sorted(
        f"{m} -> {dep}" for m, deps in GRAPH.items() for dep in deps if layer_of(dep) == "cli" and layer_of(m) != "cli"
    )
    assert not into_cli, "\n".join(into_cli)


def test_the_survey_workflow_is_a_library_function():
    """``survey`` and ``nas measure`` both run ``survey.workflow.survey_grid``: each imports it from the library."""
    for verb in ("utilscope.cli.survey", "utilscope.cli.nas"):
        assert "utilscope.survey.workflow" in GRAPH[verb], verb


def test_the_import_graph_has_no_cycles():
    """Tarjan's strongly connected components: each must be a single module."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in GRAPH[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert not cycles, cycles


@pytest.mark.parametrize("verb", ["count", "measure", "predict", "advise", "survey", "ingest"])
def test_the_commands_call_the_python_api(verb):
    """``count``, ``profile``, ``layers``, ``predict``, ``advise``, ``survey`` and ``ingest`` each call the function
    of ``utilscope.api`` a notebook calls: the command line is a layer over the Python API."""
    assert "utilscope.api" in GRAPH[f"utilscope.cli.{verb}"], verb


def test_the_checks_see_an_upward_import_and_a_cycle():
    """The graph is read right: measure imports models (downward), and a made-up edge back would be a cycle."""
    assert "utilscope.models.zoo" in GRAPH["utilscope.measure.sweep"] or any(
        dep.startswith("utilscope.models") for dep in GRAPH["utilscope.measure.settings"]
    )
    assert RANK[layer_of("utilscope.cli.survey")] > RANK[layer_of("utilscope.survey.plan")]


def shares_of_a_peak(path: Path) -> list[str]:
    """Each division of something achieved by a peak, a ceiling or a bandwidth in the file: a utilization."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = ast.unparse(node.left).lower(), ast.unparse(node.right).lower()
            if "achieved" in left and any(word in right for word in ("peak", "ceiling", "bandwidth")):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_utilization_is_computed_in_one_place():
    """FLOP and bandwidth utilization are divided out in ``hardware.utilization`` alone; the check sees one there."""
    own = PACKAGE / "hardware" / "utilization.py"
    assert shares_of_a_peak(own)
    elsewhere = [hit for path in MODULES.values() if path != own for hit in shares_of_a_peak(path)]
    assert not elsewhere, "\n".join(elsewhere)


def test_the_model_sources_never_name_a_higher_package():
    """``models.sources`` knows the NAS source only by its registration (``nas.source.register``, called by the
    package init): no module path of a higher layer appears in its text, not even as a string to import."""
    text = (PACKAGE / "models" / "sources.py").read_text()
    higher = [name for name in RANK if RANK[name] > RANK["models"] and f"utilscope.{name}" in text]
    assert not higher, higher
    assert "utilscope.nas.source" in GRAPH["utilscope"]  # the package init imports it and calls its register()


def test_the_formatter_needs_no_skips_in_the_package():
    """ruff format's configuration (pyproject.toml) fits the code as it is: no ``# fmt: skip`` in src/."""
    skipped = [str(path.relative_to(PACKAGE)) for path in MODULES.values() if "fmt: skip" in path.read_text()]
    assert not skipped, skipped


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_is_longer_than_60_lines(path):
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, long


def package_rows() -> dict[str, str]:
    """docs/architecture.md's Packages table: each name the first cell of a row gives in backquotes -> that row."""
    section = ARCHITECTURE_DOC.read_text().split("\n## Packages\n")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            rows.update(dict.fromkeys(re.findall(r"`([^`]+)`", line.split("|")[1]), line))
    return rows


def doc_name(path: Path) -> tuple[str, str]:
    """The row (its package, or the module itself at the top) that must name the module at ``path``, and the name:
    the module's path in its package without ``.py`` (``run``, ``spaces/mbv3``; a sub-package by its folder)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts == ("__init__",):
        return "utilscope/__init__.py", "utilscope/__init__.py"
    if len(parts) == 1 or parts[1:] == ("__init__",):
        return parts[0], parts[0]
    return parts[0], "/".join(part for part in parts[1:] if part != "__init__")


def named_in(rows: dict[str, str], path: Path) -> bool:
    """Whether the Packages table names the module at ``path``: a top-level module or a package in a row's first
    cell, any other module in its package's row as `name`, `name.py` or `package/name.py`."""
    row, name = doc_name(path)
    if row == name:
        return row in rows
    return any(f"`{form}`" in rows.get(row, "") for form in (name, f"{name}.py", f"{row}/{name}.py"))


def test_docs_architecture_names_every_module():
    """Every module under src/utilscope is named in its package's row of docs/architecture.md's Packages table,
    so a module added without a word there fails here, by name, with the package's modules as they are now."""
    rows = package_rows()
    missing = [path for path in MODULES.values() if not named_in(rows, path)]
    lines = []
    for path in missing:
        row, name = doc_name(path)
        if row == name:  # a new top-level module or package
            lines.append(f"{path.relative_to(PACKAGE.parent)}: name `{name}` in the first cell of a Packages row")
            continue
        now = sorted(doc_name(p)[1] for p in MODULES.values() if doc_name(p)[0] == row and doc_name(p)[1] != row)
        lines.append(
            f"{path.relative_to(PACKAGE.parent)}: name `{name}` in the `{row}` row of docs/architecture.md's Packages "
            f"table (the `{row}` modules now: {', '.join(now)})"
        )
    assert not missing, "\n".join(lines)


def test_the_docs_check_sees_a_module_the_table_does_not_name():
    rows = package_rows()
    assert named_in(rows, PACKAGE / "advise" / "channel_graph.py") and named_in(rows, PACKAGE / "errors.py")
    assert not named_in(rows, PACKAGE / "predict" / "no_such_module.py")
