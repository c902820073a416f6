"""The generic name -> item registry, and the project's registries built on it."""

from __future__ import annotations

import pytest

from utilscope.counting import formulas
from utilscope.errors import UsageError
from utilscope.measure import backends
from utilscope.models import sources
from utilscope.nas import space, spaces
from utilscope.registry import Registry


@pytest.fixture()
def widgets() -> Registry[int]:
    registry = Registry("widget")
    registry.add("bolt", 1)
    registry.add("nut", 2)
    return registry


def test_a_registry_is_a_mapping_in_registration_order(widgets):
    assert widgets.add("axle", 3) == 3
    assert list(widgets) == ["bolt", "nut", "axle"] and len(widgets) == 3
    assert widgets["nut"] == 2 and "axle" in widgets and "gear" not in widgets
    assert dict(widgets.items()) == {"bolt": 1, "nut": 2, "axle": 3}
    del widgets["axle"]
    assert list(widgets) == ["bolt", "nut"]


def test_a_name_registered_twice_is_an_error_and_changes_nothing(widgets):
    with pytest.raises(ValueError, match="^widget bolt registered twice$"):
        widgets.add("bolt", 9)
    with pytest.raises(ValueError, match="registered twice"):
        widgets["nut"] = 9
    assert dict(widgets) == {"bolt": 1, "nut": 2}


def test_add_all_adds_every_name_or_none(widgets):
    assert widgets.add_all(["washer", "spacer"], 5) == 5
    assert widgets["washer"] == widgets["spacer"] == 5
    with pytest.raises(ValueError, match="^widget nut registered twice$"):
        widgets.add_all(["gear", "nut"], 6)  # "gear" is free, but "nut" is taken: neither is added
    with pytest.raises(ValueError, match="^widget cog registered twice$"):
        widgets.add_all(["cog", "cog"], 7)
    assert list(widgets) == ["bolt", "nut", "washer", "spacer"]


def test_an_unknown_name_lists_the_choices_on_one_line(widgets):
    with pytest.raises(UsageError) as info:
        widgets.get("gear")
    assert str(info.value) == "unknown widget 'gear'; use one of: bolt, nut"
    assert widgets.get("bolt") == 1
    assert widgets.get("gear", None) is None and widgets.get("gear", 0) == 0


def test_names_filter_by_glob_in_registration_order(widgets):
    widgets.add("bracket", 3)
    assert widgets.names() == ["bolt", "nut", "bracket"]
    assert widgets.names("b*") == ["bolt", "bracket"]
    assert widgets.names("?ut") == ["nut"]
    assert widgets.names("B*") == []  # case-sensitive, like model names
    assert widgets.names("gear*") == []


@pytest.mark.parametrize(
    ("registry", "known", "unknown_message"),
    [
        (backends.BACKENDS, "eager", "unknown backend 'nope'; use one of: eager, graph, compile, inference"),
        (formulas.REGISTRY, "aten.relu", "unknown op 'nope'; use one of: aten.convolution, "),
        (space.SPACES, "mbv3", "unknown search space 'nope'; use one of: mbv3, regnet"),
        (
            sources.model_sources(),
            "timm",
            "unknown model source 'nope'; use one of: torchvision, timm, file, onnx, pt2, torchscript, pickle, nas",
        ),
    ],
)
def test_the_project_registries(registry, known, unknown_message):
    spaces.get_space("mbv3")  # registers the spaces
    assert known in registry
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(known, registry[known])
    with pytest.raises(UsageError) as info:
        registry.get("nope")
    assert str(info.value).startswith(unknown_message)


def test_public_lookups_use_the_registries():
    assert backends.get_backend("graph") is backends.BACKENDS["graph"]
    assert formulas.lookup("aten.relu") is formulas.REGISTRY["aten.relu"] and formulas.lookup("aten.nope") is None
    assert spaces.get_space("regnet") is space.SPACES["regnet"] and spaces.list_spaces("r*") == ["regnet"]
    assert spaces.list_spaces() == sorted(spaces.MODULES)  # what `nas --help` names without importing them
    with pytest.raises(UsageError, match="unknown search space 'nope'; use one of: mbv3, regnet"):
        spaces.get_space("nope")
