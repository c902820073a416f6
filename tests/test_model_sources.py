"""Model sources: a registered source is usable through the zoo; the NAS source is a plug-in that utilscope.models
never imports."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

import utilscope
from utilscope.errors import UsageError
from utilscope.models import sets, sources, zoo
from utilscope.models.sources import ModelSource

MODELS_PACKAGE = Path(sources.__file__).parent
TOY_NAMES = ("conv4", "conv8")


def _toy_build(name: str, resolution: int) -> nn.Module:
    return nn.Conv2d(3, int(name.removeprefix("conv")), 3, padding=1)


@pytest.fixture()
def toy():
    """A source of single convolutions, ``toy:conv<out channels>``, native resolution 32."""
    sources.model_sources()  # the plug-ins first, as a third-party source would come after them
    source = sources.register_source(
        ModelSource(
            "toy",
            build=_toy_build,
            native_resolution=lambda name: 32,
            exists=lambda name: name in TOY_NAMES,
            list_names=lambda: TOY_NAMES,
            family=lambda name: "Toy",
        )
    )
    yield source
    del sources.SOURCES["toy"]


def test_a_registered_source_is_a_zoo_model(toy):
    spec = zoo.parse_spec(" toy:conv8 ")
    assert spec == zoo.ModelSpec("toy", "conv8") and spec.id == "toy:conv8" and zoo.parse_spec(spec.id) == spec
    assert zoo.native_resolution(spec) == 32
    model = zoo.build_model(spec)
    assert isinstance(model, nn.Conv2d) and model.out_channels == 8 and not model.training
    meta_model, built_on = zoo.build_on_meta(spec)
    assert built_on == "meta" and meta_model.weight.is_meta
    # conv 3->8, 3x3, padding 1, 32x32 output: 2 * (8*32*32) * (3*3*3) = 442_368; bias 1 per output: 8*32*32 = 8_192
    result = utilscope.count("toy:conv8")
    assert (result.resolution, result.total.flops, result.total.other_flops) == (32, 442_368, 8_192)
    assert sets.family_of("toy:conv8") == "Toy"


def test_a_registered_source_takes_part_in_globs_and_messages(toy):
    assert zoo.list_models("toy:*") == ["toy:conv4", "toy:conv8"]
    assert [spec.id for spec in zoo.expand_models(["toy:conv?", "toy:conv4"])] == ["toy:conv4", "toy:conv8"]
    with pytest.raises(UsageError, match=r"^unknown model 'toy:conv5'; did you mean: toy:conv\d, toy:conv\d\?$"):
        zoo.parse_spec("toy:conv5")  # both names are as close (ratio 0.8), the other sources are not asked
    with pytest.raises(UsageError, match="use one of: torchvision, timm, toy, or a .py file"):
        zoo.parse_spec("keras:resnet50")
    with pytest.raises(UsageError, match="unknown model 'conv8'"):
        zoo.parse_spec("conv8")  # bare names try torchvision and timm only
    with pytest.raises(ValueError, match="model source toy registered twice"):
        sources.register_source(toy)


def test_the_nas_source_resolves_architecture_files(tmp_path):
    from utilscope.nas.sampler import sample_architectures, save_jsonl
    from utilscope.nas.spaces import get_space

    space = get_space("regnet")
    record = sample_architectures(space, 1, seed=3)[0]
    path = save_jsonl(tmp_path / "archs.jsonl", [record])
    spec = zoo.parse_spec(f"{path}:{record['id']}")
    assert spec == zoo.ModelSpec("nas", f"regnet:{record['id']}") and zoo.parse_spec(spec.id) == spec  # by content
    assert zoo.model_record(spec) == record and zoo.portable_spec(spec) == f"nas:{path}:{record['id']}"
    assert zoo.native_resolution(spec) == space.resolution(record)
    assert sum(p.numel() for p in zoo.build_model(spec).parameters()) == space.complexity(record).params
    assert sets.family_of(spec.id) == "NAS regnet"
    source = sources.model_sources()["nas"]
    assert source.exists(spec.name) and not source.exists("regnet:0123456789abcdef") and source.list_names() == ()
    with pytest.raises(UsageError, match="give it as archs.jsonl:ID"):
        source.build("regnet:0123456789abcdef", 224)


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved against its package)."""
    package = "utilscope.models"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            names.update([module] + [f"{module}.{alias.name}" for alias in node.names])
    return names


def test_models_never_imports_nas():
    files = sorted(MODELS_PACKAGE.rglob("*.py"))
    imported = {path.name: _imported_modules(path) for path in files}
    assert "utilscope.registry" in imported["sources.py"]  # the walk sees imports
    assert "utilscope.models.sources.ModelSource" in imported["zoo.py"]
    offending = {
        name: sorted(m for m in modules if m.split(".")[:2] == ["utilscope", "nas"])
        for name, modules in imported.items()
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_every_process_that_imports_utilscope_has_the_nas_source():
    """Registered by the package's init, not by an entry point: a fresh process (as a survey worker, run with
    PYTHONPATH=src, starts) sees it after the built-ins, and registering it again changes nothing."""
    code = (
        "from utilscope.models import zoo\n"
        "builtin = ['torchvision', 'timm', 'file', 'onnx', 'pt2', 'torchscript', 'pickle']\n"
        "assert list(zoo.model_sources()) == [*builtin, 'nas'], list(zoo.model_sources())\n"
        "from utilscope.nas import source\n"
        "assert source.register() is zoo.model_sources()['nas'] and len(zoo.model_sources()) == 8\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_models_names_no_module_of_a_higher_layer_even_in_a_string():
    """No import by name either (``importlib.import_module("utilscope.nas...")``): a string naming a module of the
    packages above models is a hidden upward import."""
    above = ("utilscope.nas", "utilscope.survey", "utilscope.cli", "utilscope.advise", "utilscope.predict")
    found = [
        f"{path.name}: {node.value!r}"
        for path in sorted(MODELS_PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and str(node.value).startswith(above)
    ]
    assert found == []


def test_a_factory_file_is_checked_without_running_it(tmp_path):
    """``sources.check_factory_file``: what importing the file would say of a file that cannot be read or compiled,
    with the same message; a file that must run to tell (an exit, a factory it lacks) is let through."""
    (tmp_path / "ok.py").write_text("def make():\n    return 1\n")
    (tmp_path / "bad.py").write_text("def make(:\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(7)\n")
    resolved = tmp_path.resolve()
    sources.check_factory_file(f"{tmp_path}/ok.py:make")
    sources.check_factory_file(f"{tmp_path}/exits.py:make")  # only running it tells
    sources.check_factory_file(f"{tmp_path}/ok.py:nope")  # running it might fail before the name is looked for
    with pytest.raises(UsageError, match=rf"^{resolved}/ok.py changed since it was named"):
        sources.check_factory_file(f"{tmp_path}/ok.py:make#0123456789ab")
    with pytest.raises(UsageError, match=rf"^importing {resolved}/bad.py raised SyntaxError: "):
        sources.check_factory_file(f"{tmp_path}/bad.py:make")
    assert sources.check_factory_file(f"{tmp_path}/model.onnx") is None  # not a factory file's shape
