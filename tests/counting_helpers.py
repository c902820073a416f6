"""Helpers shared by the counting tests: count a tiny module, force the CPU fallback, pick a layer."""

from __future__ import annotations

import pytest
from torch import nn

import utilscope
from utilscope.counting import counter


def count(module: nn.Module, batch: int = 2, resolution: int = 8, dtype: str = "fp32"):
    return utilscope.count(module, batch=batch, resolution=resolution, dtype=dtype)


def count_on_cpu(module: nn.Module, monkeypatch: pytest.MonkeyPatch, **kwargs):
    """``count`` with the meta trace refused, so that it falls back to tracing a copy of ``module`` on the CPU."""
    trace = counter.trace

    def refuse_meta(model, example, *rest):
        if example.device.type == "meta":
            raise RuntimeError("meta tracing refused by the test")
        return trace(model, example, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(counter, "trace", refuse_meta)
        return count(module, **kwargs)


def layer(result, name: str):
    matches = [lay for lay in result.layers if lay.name == name]
    assert len(matches) == 1, [lay.name for lay in result.layers]
    return matches[0]


class Lambda(nn.Module):
    """A leaf module running ``fn`` on its input: every op lands in one layer named after the class."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)
