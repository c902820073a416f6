"""Terminal views and the JSON beside them: what the tables leave out, how they name things, what they hide."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

import utilscope
from utilscope.cli import main
from utilscope.present.count_view import layer_table

# Block allocates an empty tensor in a non-leaf module, as timm's BatchNormAct2d does: an op-level layer of no cost
EMPTY_OPS = """
import torch
import torch.nn as nn

RESOLUTION = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x):
        torch.empty(0, device=x.device)
        return self.act(self.conv(x)) + x.mean()


def make():
    return nn.Sequential(Block(), nn.Identity(), nn.Flatten())
"""


@pytest.fixture(scope="module")
def empty_ops(write_factory) -> str:
    return f"{write_factory(EMPTY_OPS, 'empty_ops')}:make"


def render(renderable, width: int = 200) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_count_leaves_out_zero_cost_op_layers(empty_ops, capsys):
    result = utilscope.count(empty_ops)
    assert [lay.type for lay in result.layers if lay.is_empty_op] == ["aten.empty"]
    text = render(layer_table(result))
    assert "0.empty" not in text and "0.conv" in text and "0.add" in text  # the add of the block is real work
    assert "not shown: zero-cost op layers (aten.empty ×1)" in text
    assert "Identity" in text  # a module stays, even when it does nothing: the user wrote it
    assert main(["count", empty_ops, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [layer["name"] for layer in doc["layers"]] == [lay.name for lay in result.layers if not lay.is_empty_op]
    assert doc["omitted_layers"] == {"aten.empty": 1}
    other = {row["op_class"]: row["layers"] for row in doc["op_classes"]}.get("other", 0)
    assert other == 2  # Identity and Flatten, not the empty op
