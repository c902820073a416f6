"""BatchNorm folding for the ``inference`` backend (and ``advise``): every eval-mode BatchNorm that directly follows a
convolution is folded into the convolution's weight and bias, in fp32, on an FX graph of the model.

torch's own passes miss most timm models: ``torch.fx.experimental.optimization.fuse`` folds only ``nn.BatchNorm2d``
modules, while timm's ``BatchNormAct2d`` (BatchNorm + activation in one module) traces to a functional
``F.batch_norm`` with keyword arguments, which inductor's ``fuse_conv_bn`` skips, and inductor's freezing does not
fold BatchNorm on CUDA. So both forms are folded here: a ``call_module`` of ``nn.BatchNorm2d`` and a
``call_function`` of ``F.batch_norm`` whose statistics are the model's buffers. Convolutions are traced as leaves
(timm's ``Conv2dSame`` computes its padding from the input's shape, which symbolic tracing cannot follow); weights are
folded only into the convolutions whose forward is a plain convolution of their own weight and bias
(``FOLDABLE_CONVS``), never into weight-standardized ones. A folded model whose outputs differ from the original's is
refused (the original is returned, with a note).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.utils.fusion import fuse_conv_bn_weights

FOLDABLE_CONVS = ("torch.nn.modules.conv.Conv2d", "timm.layers.conv2d_same.Conv2dSame")
METADATA = ("ndim", "shape", "dtype", "device")  # tensor attributes that folding leaves unchanged
FOLDING_RTOL = 1e-3  # the largest output difference a fold may make, relative to the largest output (fp32)


class _ConvLeafTracer(fx.Tracer):
    def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
        return isinstance(module, nn.Conv2d) or super().is_leaf_module(module, qualified_name)


def _qualified(module: nn.Module) -> str:
    return f"{type(module).__module__}.{type(module).__qualname__}"


def _batchnorm_arguments(node: fx.Node, graph_module: fx.GraphModule) -> dict | None:
    """The BatchNorm's input node, statistics and affine parameters when ``node`` is an eval-mode BatchNorm whose
    tensors are the model's own; None otherwise."""
    if node.op == "call_module" and type(graph_module.get_submodule(node.target)) is nn.BatchNorm2d:
        bn = graph_module.get_submodule(node.target)
        if bn.training or bn.running_mean is None:
            return None
        return {"input": node.args[0], "running_mean": bn.running_mean, "running_var": bn.running_var,
                "weight": bn.weight, "bias": bn.bias, "eps": bn.eps}  # fmt: skip
    if node.op != "call_function" or node.target is not F.batch_norm:
        return None
    normalized = node.normalized_arguments(graph_module, normalize_to_only_use_kwargs=True)
    if normalized is None or normalized.kwargs.get("training", False):
        return None
    arguments = dict(normalized.kwargs)
    for name in ("running_mean", "running_var", "weight", "bias"):
        value = arguments.get(name)
        if value is not None and not (isinstance(value, fx.Node) and value.op == "get_attr"):
            return None
        arguments[name] = None if value is None else _attribute(graph_module, value.target)
    if arguments["running_mean"] is None or arguments["running_var"] is None:
        return None
    return arguments


def _data_users(node: fx.Node) -> list[fx.Node]:
    """The users of ``node`` that read its values, not only its metadata (timm's ``x.ndim`` checks)."""
    return [user for user in node.users
            if not (user.op == "call_function" and user.target is getattr and user.args[1] in METADATA)
            and not (user.op == "call_method" and user.target in ("size", "dim"))]  # fmt: skip


def _attribute(graph_module: fx.GraphModule, target: str) -> torch.Tensor:
    parent, _, name = target.rpartition(".")
    return getattr(graph_module.get_submodule(parent), name)


def _fold_into_conv(node: fx.Node, graph_module: fx.GraphModule, call_counts: dict[str, int]) -> bool:
    """Folds the BatchNorm ``node`` into the convolution feeding it, when that is exact; whether it did."""
    arguments = _batchnorm_arguments(node, graph_module)
    if arguments is None:
        return False
    conv_node = arguments["input"]
    if not isinstance(conv_node, fx.Node) or conv_node.op != "call_module" or len(_data_users(conv_node)) != 1:
        return False
    conv = graph_module.get_submodule(conv_node.target)
    if _qualified(conv) not in FOLDABLE_CONVS or conv.training or call_counts[conv_node.target] != 1:
        return False
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, arguments["running_mean"], arguments["running_var"], arguments["eps"],
        arguments["weight"], arguments["bias"])  # fmt: skip
    parent, _, name = conv_node.target.rpartition(".")
    setattr(graph_module.get_submodule(parent), name, fused)
    node.replace_all_uses_with(conv_node)
    graph_module.graph.erase_node(node)
    return True


def count_batchnorm(module: nn.Module) -> int:
    """BatchNorm layers in ``module``: the BatchNorm nodes of its graph when it is an FX graph, else its modules."""
    if isinstance(module, fx.GraphModule):
        return sum(_is_batchnorm(node, module) for node in module.graph.nodes)
    return sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _is_batchnorm(node: fx.Node, graph_module: fx.GraphModule) -> bool:
    """Whether ``node`` normalizes activations with BatchNorm (not a weight standardization's batch-statistics
    ``F.batch_norm``, which runs in training mode)."""
    if node.op == "call_module":
        return isinstance(graph_module.get_submodule(node.target), nn.modules.batchnorm._BatchNorm)
    if node.op != "call_function" or node.target is not F.batch_norm:
        return False
    normalized = node.normalized_arguments(graph_module, normalize_to_only_use_kwargs=True)
    return normalized is None or not normalized.kwargs.get("training", False)


def fold(model: nn.Module) -> tuple[fx.GraphModule, int]:
    """An FX copy of ``model`` (fp32) with every foldable BatchNorm folded, and how many were folded. Raises what
    symbolic tracing raises on a model it cannot follow."""
    original = copy.deepcopy(model).float().eval()
    graph_module = fx.GraphModule(original, _ConvLeafTracer().trace(original))
    call_counts: dict[str, int] = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            call_counts[node.target] = call_counts.get(node.target, 0) + 1
    folded = sum(_fold_into_conv(node, graph_module, call_counts) for node in list(graph_module.graph.nodes))
    graph_module.graph.lint()
    graph_module.recompile()
    graph_module.delete_all_unused_submodules()
    return graph_module, folded


def output_difference(original: nn.Module, folded: nn.Module, x: torch.Tensor) -> float:
    """The largest difference between the two models' outputs on ``x`` (fp32, cuDNN without autotuning), relative
    to the largest output magnitude; infinite when the outputs differ in structure."""
    reference = copy.deepcopy(original).float().eval()
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, benchmark=False):
        outputs = [torch.utils._pytree.tree_leaves(m(x.float())) for m in (reference, folded)]
    if len(outputs[0]) != len(outputs[1]):
        return float("inf")
    pairs = [
        (e, a) for e, a in zip(*outputs, strict=True) if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)
    ]
    if any(e.shape != a.shape for e, a in pairs):
        return float("inf")
    scale = max((float(e.abs().max()) for e, _ in pairs), default=0.0) or 1.0
    return max((float((e.float() - a.float()).abs().max()) for e, a in pairs), default=0.0) / scale
