"""The model zoo: resolving names, globs, native resolutions, factory files, and building models."""

from __future__ import annotations

import fnmatch
import hashlib
import textwrap

import pytest
import torch
import torchvision.models as tvm
from torch import nn

from utilscope.counting import count
from utilscope.errors import ModelError, UsageError
from utilscope.models import sources, zoo

FACTORY = textwrap.dedent(
    """
    import torch.nn as nn

    RESOLUTION = 96

    def make():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10),
        )

    def broken():
        raise RuntimeError("no such checkpoint")

    def broken_multiline():
        raise RuntimeError("first line\\nsecond line")

    def not_a_module():
        return {"conv": nn.Conv2d(3, 8, 3)}

    NOT_CALLABLE = 3
    """
)


@pytest.fixture(scope="module")
def factory(write_factory):
    return write_factory(FACTORY, "tiny")


def _error(exc_type, fn, *args) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args)
    return str(info.value)


# --- parse_spec ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "source", "name"),
    [
        ("torchvision:resnet50", "torchvision", "resnet50"),
        ("timm:resnet50", "timm", "resnet50"),
        ("timm:efficientnet_b0", "timm", "efficientnet_b0"),
        ("  torchvision:vit_b_16 ", "torchvision", "vit_b_16"),
        ("resnet50", "torchvision", "resnet50"),  # in both: torchvision first
        ("efficientnet_b0", "torchvision", "efficientnet_b0"),  # in both: torchvision first
        ("resnet50d", "timm", "resnet50d"),  # timm only
        ("convnext_atto", "timm", "convnext_atto"),  # timm only
    ],
)
def test_parse_spec_sources(text, source, name):
    spec = zoo.parse_spec(text)
    assert (spec.source, spec.name) == (source, name)
    assert spec.id == str(spec) == f"{source}:{name}"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[: sources.FILE_DIGEST_CHARS]


def test_parse_spec_factory_file(factory):
    spec = zoo.parse_spec(f"{factory}:make")
    assert spec == zoo.ModelSpec("file", f"{factory.resolve()}:make#{_digest(factory)}")


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("torchvision:resnet5", "torchvision:resnet50"),
        ("timm:convnext_atoo", "timm:convnext_atto"),
        ("timm:efficientnet_b00", "timm:efficientnet_b0"),
        ("resnet5", "torchvision:resnet50"),
    ],
)
def test_unknown_name_suggests_close_matches_on_one_line(text, suggestion):
    message = _error(UsageError, zoo.parse_spec, text)
    assert "unknown model" in message and "did you mean" in message
    assert suggestion in message
    assert "\n" not in message


def test_unknown_name_without_close_match_has_no_suggestion():
    message = _error(UsageError, zoo.parse_spec, "timm:qqqqqqqqqqqq")
    assert message == "unknown model 'timm:qqqqqqqqqqqq'"


def test_unknown_bare_name_suggests_from_every_source():
    message = _error(UsageError, zoo.parse_spec, "convnext_atoo")
    assert "timm:convnext_atto" in message
    assert "'convnext_atoo'" in message


@pytest.mark.parametrize("text", ["keras:resnet50", "tv:resnet50", "TIMM:resnet50"])
def test_unknown_source_lists_the_sources(text):
    message = _error(UsageError, zoo.parse_spec, text)
    assert "unknown model source" in message
    assert "torchvision" in message and "timm" in message and ".py" in message


def test_the_command_lines_check_of_a_source_says_what_parse_spec_says():
    """``cli.values.MODEL`` refuses an unknown source while parsing from its own list of the sources recognised by
    their shape (registered with torch): the registry's sources, and ``parse_spec``'s message with their hints."""
    import argparse

    from utilscope.api import MODULE_SOURCE  # the API's own, registered by a call handed a module: no CLI spec
    from utilscope.cli import values

    assert set(sources.model_sources()) - {MODULE_SOURCE} == {"torchvision", "timm", *values._SHAPED_SOURCES}
    registered = sources.model_sources().items()
    shaped = {name: s.hint for name, s in registered if s.match is not None and name != MODULE_SOURCE}
    assert shaped == values._SHAPED and list(shaped) == list(values._SHAPED)  # their hints, in registration order
    for text in ("foo:bar", "TIMM:resnet50", "tv:resnet50+reparam", "nas:mbv3", "nas:mbv3:", "file:resnet", "pt2:m"):
        assert _error(argparse.ArgumentTypeError, values.MODEL, text) == _error(UsageError, zoo.parse_spec, text)


@pytest.mark.parametrize("text", ["nas:*", "file:*", "onnx:*", "nope:*", "timm:zzz*", "zzz*", "torchvision:nosuch*"])
def test_the_command_lines_check_of_a_glob_says_what_the_zoo_says(text):
    """``cli.values.MODEL`` refuses a glob of a source without names, of no source, or that matches no name of the
    shipped tables, with ``zoo.model_names``' message; ``models``' pattern (``MODEL_PATTERN``) too."""
    import argparse

    from utilscope.cli import values
    from utilscope.models import sets, timm_sets, torchvision_names

    if torchvision_names.installed_names() is None or timm_sets.installed_names(sets.timm_version()) is None:
        pytest.skip("the installed torchvision or timm is not the one its shipped table of names was built with")
    message = _error(UsageError, zoo.model_names, text)
    assert _error(argparse.ArgumentTypeError, values.MODEL, text) == message
    assert _error(argparse.ArgumentTypeError, values.MODEL_PATTERN, text) == message
    for known in ("timm:resnet5*", "resnet5?", "torchvision:*", "*"):
        assert zoo.model_names(known) and values.MODEL(known) == known


def test_the_command_lines_check_of_a_name_says_what_parse_spec_says():
    """``cli.values.MODEL`` refuses a name from the shipped tables of torchvision's and timm's names: the message
    and suggestions ``parse_spec`` gives from the installed packages, and a name it resolves is never refused."""
    import argparse

    from utilscope.cli import values
    from utilscope.models import sets, timm_sets, torchvision_names

    if torchvision_names.installed_names() is None or timm_sets.installed_names(sets.timm_version()) is None:
        pytest.skip("the installed torchvision or timm is not the one its shipped table of names was built with")
    for text in ("resnet5", "torchvision:resnet5", "timm:resnt50.a1_in1k", "convnext_atoo", "vit_b_1", "qqqqqqqq"):
        message = _error(UsageError, zoo.parse_spec, text)
        assert _error(argparse.ArgumentTypeError, values.MODEL, text) == message, text
    for text in ("resnet18", "convnext_atto", "resnet50.a1_in1k", "timm:resnet50.a1_in1k", "torchvision:vgg11+reparam"):
        zoo.parse_spec(text)
        assert values.MODEL(text) == text


def test_the_shipped_torchvision_table_lists_the_installed_torchvisions_models():
    """``torchvision_models.csv`` is the torchvision source's list (``scripts/build_torchvision_table.py``) when
    torchvision is the table's version."""
    import torchvision

    from utilscope.models import torchvision_names

    if torchvision_names.installed_names() is None:
        pytest.skip(f"torchvision {torchvision.__version__} is not the table's {torchvision_names.table_version()}")
    assert torchvision_names.names() == sources.TORCHVISION.list_names() == tuple(tvm.list_models(module=tvm))


@pytest.mark.parametrize("text", ["timm:", "torchvision:", ""])
def test_empty_name(text):
    _error(UsageError, zoo.parse_spec, text)


# --- list_models / expand_models -------------------------------------------------------------------------------


def test_list_torchvision_all():
    names = tvm.list_models(module=tvm)
    assert zoo.list_models("torchvision:*") == [f"torchvision:{n}" for n in names]
    assert zoo.list_models() == zoo.list_models("torchvision:*")


def test_list_timm_glob():
    matched = zoo.list_models("timm:efficientnet_b*")
    assert "timm:efficientnet_b0" in matched
    assert all(m.startswith("timm:") and fnmatch.fnmatchcase(m[len("timm:") :], "efficientnet_b*") for m in matched)


def test_list_bare_glob_searches_both_sources():
    matched = zoo.list_models("resnet18*")
    assert {"torchvision:resnet18", "timm:resnet18", "timm:resnet18d"} <= set(matched)
    assert matched.index("torchvision:resnet18") < matched.index("timm:resnet18")  # torchvision first


def test_list_unknown_source():
    _error(UsageError, zoo.list_models, "keras:*")


def test_list_glob_matching_nothing_is_empty():
    assert zoo.list_models("timm:zzz_no_such_model*") == []


def test_expand_models_dedups_in_order(factory):
    specs = zoo.expand_models(
        ["resnet18", "torchvision:resnet18", "torchvision:resnet1*", f"{factory}:make", f"{factory}:make"]
    )
    assert [s.id for s in specs] == [
        "torchvision:resnet18",
        "torchvision:resnet101",
        "torchvision:resnet152",
        zoo.parse_spec(f"{factory}:make").id,
    ]


def test_expand_models_glob_matching_nothing_is_an_error():
    message = _error(UsageError, zoo.expand_models, ["torchvision:resnet18", "timm:zzz*"])
    assert "no model matches 'timm:zzz*'" in message


def test_expand_models_unknown_name_is_an_error():
    _error(UsageError, zoo.expand_models, ["torchvision:resnet18", "torchvision:resnet5"])


# --- native resolution and resolution checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "resolution"),
    [
        ("torchvision:inception_v3", 299),
        ("torchvision:efficientnet_b3", 300),
        ("torchvision:resnet50", 224),
        ("torchvision:vit_h_14", 518),  # DEFAULT = the SWAG weights at 518
        ("timm:resnet50", 224),
        ("timm:efficientnet_b3", 288),
        ("timm:vit_tiny_patch16_384", 384),
    ],
)
def test_native_resolution(text, resolution):
    assert zoo.native_resolution(zoo.parse_spec(text)) == resolution


def test_native_resolution_of_factory_files(factory, tmp_path):
    assert zoo.native_resolution(zoo.parse_spec(f"{factory}:make")) == 96
    plain = tmp_path / "plain.py"
    plain.write_text("import torch.nn as nn\n\ndef make():\n    return nn.Conv2d(3, 4, 3)\n")
    assert zoo.native_resolution(zoo.parse_spec(f"{plain}:make")) == sources.DEFAULT_FILE_RESOLUTION == 224


@pytest.mark.parametrize(
    "bad", [0, -1, 1, zoo.MIN_RESOLUTION - 1, 5000, zoo.MAX_RESOLUTION + 1, True, 224.0, "224", None]
)
def test_check_resolution_rejects(bad):
    message = _error(UsageError, zoo.check_resolution, bad)
    assert "resolution must be" in message


@pytest.mark.parametrize("good", [zoo.MIN_RESOLUTION, 224, zoo.MAX_RESOLUTION])
def test_check_resolution_accepts(good):
    assert zoo.check_resolution(good) == good


@pytest.mark.parametrize("bad", [0, -1, 5000])
def test_builders_reject_bad_resolution(bad):
    spec = zoo.parse_spec("torchvision:resnet18")
    for build in (zoo.build_model, zoo.build_uninitialized, zoo.build_on_meta):
        _error(UsageError, build, spec, bad)
    _error(UsageError, count, "torchvision:resnet18", 1, bad)


# --- factory files ---------------------------------------------------------------------------------------------


def test_good_factory_is_counted(factory):
    result = count(f"{factory}:make")
    assert result.resolution == 96 and result.unsupported == {}
    # conv 3->8, 3x3, no bias, 96x96 output: 2 * (8*96*96) * (3*3*3) = 3_981_312; linear 8->10: 2*8*10 = 160
    assert result.total.flops == 3_981_312 + 160
    # relu 8*96*96 = 73_728; adaptive pool 1 per input element 73_728; linear bias 10
    assert result.total.other_flops == 73_728 + 73_728 + 10
    assert result.total.params == 8 * 27 + (8 * 10 + 10)


def test_good_factory_builds_a_real_module(factory):
    model = zoo.build_model(zoo.parse_spec(f"{factory}:make"))
    assert isinstance(model, nn.Sequential) and not model.training
    assert model(torch.randn(2, 3, 96, 96)).shape == (2, 10)


def test_factory_that_raises_is_a_one_line_model_error(factory):
    spec = zoo.parse_spec(f"{factory}:broken")
    for fn, args in ((zoo.build_model, (spec,)), (count, (f"{factory}:broken",))):
        message = _error(ModelError, fn, *args)
        assert "RuntimeError: no such checkpoint" in message
        assert "\n" not in message


def test_factory_error_with_newlines_is_still_one_line(factory):
    message = _error(ModelError, zoo.build_model, zoo.parse_spec(f"{factory}:broken_multiline"))
    assert "first line" in message and "second line" in message
    assert "\n" not in message


def test_factory_returning_a_non_module(factory):
    message = _error(ModelError, zoo.build_model, zoo.parse_spec(f"{factory}:not_a_module"))
    assert "dict" in message and "nn.Module" in message
    _error(ModelError, count, f"{factory}:not_a_module")


@pytest.mark.parametrize("name", ["absent", "NOT_CALLABLE"])
def test_factory_name_missing_or_not_callable(factory, name):
    spec = zoo.parse_spec(f"{factory}:{name}")  # the file exists: the name is checked when building
    message = _error(UsageError, zoo.build_model, spec)
    assert f"no callable '{name}'" in message
    _error(UsageError, count, f"{factory}:{name}")


def test_factory_file_missing(tmp_path):
    message = _error(UsageError, zoo.parse_spec, f"{tmp_path}/absent.py:make")
    assert message == f"no such file: {tmp_path}/absent.py (the factory file)"


def test_factory_file_without_factory_name(factory):
    message = _error(UsageError, zoo.parse_spec, str(factory))
    assert "needs a factory name" in message


def test_factory_file_that_fails_to_import(tmp_path):
    path = tmp_path / "bad_import.py"
    path.write_text("raise ImportError('missing dependency foo')\n")
    spec = zoo.parse_spec(f"{path}:make")
    message = _error(ModelError, zoo.native_resolution, spec)
    assert "ImportError: missing dependency foo" in message


# --- building --------------------------------------------------------------------------------------------------


def test_build_model_is_eval_with_real_random_weights():
    model = zoo.build_model(zoo.parse_spec("torchvision:resnet18"))
    assert not any(m.training for m in model.modules())
    tensors = [*model.parameters(), *model.buffers()]
    assert all(t.device.type == "cpu" for t in tensors)
    assert model.conv1.weight.std() > 0 and torch.isfinite(model.conv1.weight).all()
    assert model.fc.weight.shape == (1000, 512)


def test_build_on_meta_direct():
    model, built_on = zoo.build_on_meta(zoo.parse_spec("torchvision:resnet18"))
    assert built_on == "meta"
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers()))
    assert not model.training


def test_build_on_meta_falls_back_to_cpu_for_torchvision_regnet():
    # torchvision's RegNet builder computes widths with tensor ops, which fail on meta
    model, built_on = zoo.build_on_meta(zoo.parse_spec("torchvision:regnet_x_400mf"))
    assert built_on == "cpu"
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers()))
    assert not model.training


def test_build_uninitialized_is_on_cpu():
    model = zoo.build_uninitialized(zoo.parse_spec("timm:resnet18"))
    assert all(p.device.type == "cpu" for p in model.parameters()) and not model.training


def test_torchvision_vit_at_384_gets_image_size():
    spec = zoo.parse_spec("torchvision:vit_b_16")
    model = zoo.build_model(spec, 384)
    assert model.image_size == 384
    assert model.encoder.pos_embedding.shape == (1, (384 // 16) ** 2 + 1, 768)
    result = count("torchvision:vit_b_16", resolution=384)
    assert result.resolution == 384 and result.unsupported == {}
    # torchvision's figure for the same architecture at 384 (the SWAG end-to-end weights): 55.48 GMACs
    ops = tvm.ViT_B_16_Weights.IMAGENET1K_SWAG_E2E_V1.meta["_ops"]
    assert result.total.flops / 2e9 == pytest.approx(ops, rel=0.01)


def test_timm_fixed_size_vit_at_384_gets_img_size():
    spec = zoo.parse_spec("timm:vit_tiny_patch16_224")
    model = zoo.build_model(spec, 384)
    assert tuple(model.patch_embed.img_size) == (384, 384)
    assert model.pos_embed.shape == (1, (384 // 16) ** 2 + 1, 192)
    native = count("timm:vit_tiny_patch16_224")
    large = count("timm:vit_tiny_patch16_224", resolution=384)
    assert native.resolution == 224 and large.resolution == 384
    assert large.unsupported == {} and large.total.flops > 2.5 * native.total.flops


def test_timm_pretrained_tag_resolves():
    spec = zoo.parse_spec("timm:resnet50.a1_in1k")
    assert spec.id == "timm:resnet50.a1_in1k"
    assert zoo.native_resolution(spec) == 224


def test_spec_id_round_trips(tmp_path):
    factory = tmp_path / "f.py"
    factory.write_text("import torch.nn as nn\ndef make():\n    return nn.Identity()\n")
    for text in ("torchvision:resnet18", "timm:resnet18", "resnet18", f"{factory}:make"):
        spec = zoo.parse_spec(text)
        assert zoo.parse_spec(spec.id) == spec
        assert zoo.parse_spec(zoo.portable_spec(spec)) == spec


# --- a factory file's id: its resolved path and content ---------------------------------------------------------

IDENTITY = "import torch.nn as nn\nRESOLUTION = 8\n\n\ndef make():\n    return nn.Identity()\n"


def test_two_factory_files_of_one_name_in_two_folders_are_two_models(tmp_path, monkeypatch):
    for folder, source in (("a", IDENTITY), ("b", IDENTITY.replace("8", "16"))):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "models.py").write_text(source)
    monkeypatch.chdir(tmp_path / "a")
    first = zoo.parse_spec("models.py:make")
    monkeypatch.chdir(tmp_path / "b")
    second = zoo.parse_spec("models.py:make")
    assert first.id == f"file:{tmp_path}/a/models.py:make#{_digest(tmp_path / 'a' / 'models.py')}"
    assert first != second and (zoo.native_resolution(first), zoo.native_resolution(second)) == (8, 16)
    same = zoo.parse_spec(f"{tmp_path}/b/models.py:make")  # another name of the same file: the same model
    assert same == second


def test_editing_a_factory_file_makes_a_new_id_and_an_old_id_is_refused(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(IDENTITY)
    before = zoo.parse_spec(f"{path}:make")
    path.write_text(IDENTITY.replace("8", "32"))
    after = zoo.parse_spec(f"{path}:make")
    assert before.id != after.id and zoo.native_resolution(after) == 32
    message = _error(UsageError, zoo.parse_spec, before.id)
    assert (
        message.startswith(f"{path.resolve()} changed since it was named")
        and f"name it as {path.resolve()}:make" in message
    )


def test_an_id_without_a_digest_still_names_the_file_as_it_is(tmp_path):
    """Stores written before ids had digests keep ``file:path:factory``: still a valid spec."""
    path = tmp_path / "models.py"
    path.write_text(IDENTITY)
    assert zoo.parse_spec(f"file:{path}:make") == zoo.parse_spec(f"{path}:make")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import sys\nsys.exit(7)\n", "importing {path} exited with code 7 (sys.exit)"),
        ("def make(:\n", "importing {path} raised SyntaxError"),
        ("import no_such_module_here\n", "importing {path} raised ModuleNotFoundError"),
    ],
)
def test_a_factory_file_that_cannot_be_imported_is_a_model_error_naming_it(tmp_path, source, message):
    path = tmp_path / "broken.py"
    path.write_text(source)
    spec = zoo.parse_spec(f"{path}:make")
    assert _error(ModelError, zoo.check_model, spec).startswith(message.format(path=path))


def test_a_factory_that_exits_when_called_is_a_model_error(tmp_path):
    path = tmp_path / "exits.py"
    path.write_text("import sys\n\n\ndef make():\n    sys.exit(7)\n")
    spec = zoo.parse_spec(f"{path}:make")
    zoo.check_model(spec)  # found, not called
    assert "raised SystemExit: 7" in _error(ModelError, zoo.build_model, spec)


def test_check_model_finds_the_factory_without_building_it(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(IDENTITY + "\n\ndef explodes():\n    raise RuntimeError('built')\n")
    zoo.check_model(zoo.parse_spec(f"{path}:explodes"))
    zoo.check_model(zoo.parse_spec("torchvision:resnet18"))
    assert _error(UsageError, zoo.check_model, zoo.parse_spec(f"{path}:nope")) == f"{path} has no callable 'nope'"


def test_a_reparam_spec_is_the_model_reparameterized_by_timm_and_keyed_apart():
    """timm's reparameterize_model merges MobileOne's branches: one 3x3 conv per block, 4x fewer FLOPs at the
    stem-heavy s0; the spec keeps its suffix through the id and portable form; a model with nothing to merge is
    refused, naming the suffix."""
    from utilscope.counting import count

    spec = zoo.parse_spec(" timm:mobileone_s0+reparam ")
    assert (spec.name, spec.reparam, spec.id) == ("mobileone_s0", True, "timm:mobileone_s0+reparam")
    assert zoo.parse_spec(zoo.portable_spec(spec)) == spec and zoo.native_resolution(spec) == 224
    built = {}
    for variant in (zoo.parse_spec("timm:mobileone_s0"), spec):
        torch.manual_seed(0)  # the same random weights
        built[variant.reparam] = zoo.build_model(variant, 64)
    plain, merged = built[False], built[True]
    assert zoo.reparameterizable(plain) and sum(isinstance(m, torch.nn.BatchNorm2d) for m in merged.modules()) == 0
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        reference = plain.double()(x)
        assert ((merged.double()(x) - reference).norm() / reference.norm()).item() < 1e-5  # same function
    assert count(spec.id, 1, 64, "fp16").total.flops < count("timm:mobileone_s0", 1, 64, "fp16").total.flops / 2
    with pytest.raises(UsageError, match=r"^timm:resnet18 has nothing to reparameterize: drop \+reparam$"):
        zoo.build_model(zoo.parse_spec("timm:resnet18+reparam"), 32)
