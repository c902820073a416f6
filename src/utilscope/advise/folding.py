"""BatchNorm folding: each batch norm right after a conv (or linear) layer folded into its weights, for inference.

The folding itself is torch's (``torch.fx.experimental.optimization.fuse``); this module checks the model is in eval
mode (folding uses the running statistics), keeps the original untouched and counts what was folded.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import fx, nn
from torch.fx.experimental.optimization import fuse

from utilscope.errors import ModelError, UsageError, describe

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@dataclass(frozen=True)
class FoldResult:
    """``model``: the folded ``fx.GraphModule``, or the model passed in, untouched, when nothing was folded."""

    model: nn.Module
    folded_count: int


def fold_batchnorm(model: nn.Module) -> FoldResult:
    if not isinstance(model, nn.Module):
        raise UsageError(f"fold_batchnorm needs a torch.nn.Module, got {type(model).__name__}")
    if any(module.training for module in model.modules()):
        raise UsageError("fold_batchnorm needs a model in eval mode (model.eval()): folding uses running statistics")
    try:
        traced = fx.symbolic_trace(copy.deepcopy(model))
    except Exception as exc:
        raise ModelError(f"torch.fx cannot trace {type(model).__name__}: {describe(exc)}") from exc
    batchnorms_before = batchnorm_calls(traced)
    folded = fuse(traced, inplace=True, no_trace=True)
    folded_count = batchnorms_before - batchnorm_calls(folded)
    return FoldResult(folded if folded_count else model, folded_count)


def batchnorm_calls(module: fx.GraphModule) -> int:
    modules = dict(module.named_modules())
    return sum(1 for node in module.graph.nodes
               if node.op == "call_module" and isinstance(modules[node.target], BATCH_NORMS))  # fmt: skip
