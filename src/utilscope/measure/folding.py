"""BatchNorm folding for the ``inference`` backend (and ``advise``): every eval-mode BatchNorm that directly follows a
convolution is folded into the convolution's weight and bias, in fp64, on an FX graph of the model.

torch's own passes miss most timm models: ``torch.fx.experimental.optimization.fuse`` folds only ``nn.BatchNorm2d``
modules, while timm's ``BatchNormAct2d`` (BatchNorm + activation in one module) traces to a functional
``F.batch_norm`` with keyword arguments, which inductor's ``fuse_conv_bn`` skips, and inductor's freezing does not
fold BatchNorm on CUDA. So both forms are folded here: a ``call_module`` of ``nn.BatchNorm2d`` and a
``call_function`` of ``F.batch_norm`` whose statistics are the model's buffers. Convolutions are traced as leaves
(timm's ``Conv2dSame`` computes its padding from the input's shape, which symbolic tracing cannot follow); weights are
folded only into the convolutions whose forward is a plain convolution of their own weight and bias
(``FOLDABLE_CONVS``), never into weight-standardized ones; a module that tracing cannot follow is kept whole. A fold
that changes its BatchNorm's output is refused (the backend then runs the original, with a note). The check compares
each fold on its own, in fp64, on the
activations the original computes: a randomly initialized deep network can be chaotic (in tf_efficientnetv2_m at
96 px, a relative perturbation of 1e-7 in the weights moves the fp32 output by 55% of its largest value; in
tf_efficientnetv2_l squeeze-excite gates saturate, and the exact fold's rounding moved the fp64 output by up to 61%),
so no comparison of whole outputs can tell an exact fold from a wrong one.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.nn.utils.fusion import fuse_conv_bn_weights

from utilscope.torch_flags import cudnn_mode

FOLDABLE_CONVS = ("torch.nn.modules.conv.Conv2d", "timm.layers.conv2d_same.Conv2dSame")
METADATA = ("ndim", "shape", "dtype", "device")  # tensor attributes that folding leaves unchanged
FOLDING_RTOL = 1e-9  # the largest difference a fold may make to its BatchNorm's output, relative (fp64)


class Fold(NamedTuple):
    batchnorm_node: str  # the BatchNorm's node in the traced graph (erased from the folded one)
    conv_node: str  # the convolution's node, whose module now holds the folded weight and bias
    conv_target: str


class _ConvLeafTracer(fx.Tracer):
    """Convolutions are leaves; so is any module whose forward symbolic tracing cannot follow (shape-dependent
    control flow, as in MobileViT-V2's blocks): it stays whole and unfolded, and the rest of the model is traced."""

    def __init__(self):
        super().__init__()
        self.untraceable: set[str] = set()

    def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
        return (
            isinstance(module, nn.Conv2d)
            or qualified_name in self.untraceable
            or super().is_leaf_module(module, qualified_name)
        )

    def call_module(self, module: nn.Module, forward, args, kwargs):
        stack = list(self.module_stack.items())
        try:
            return super().call_module(module, forward, args, kwargs)
        except fx.proxy.TraceError:
            if module is self.root:
                raise
            self.module_stack.clear()  # the failed attempt left its scopes on the stack
            self.module_stack.update(stack)
            self.untraceable.add(self.path_of_module(module))
            return super().call_module(module, forward, args, kwargs)


def _trace(model: nn.Module) -> fx.GraphModule:
    graph_module = fx.GraphModule(model, _ConvLeafTracer().trace(model))
    graph_module.graph.eliminate_dead_code()  # the nodes of failed attempts
    return graph_module


def is_plain_conv(module: nn.Module) -> bool:
    """Whether ``module``'s forward is a plain convolution of its own weight and bias (``FOLDABLE_CONVS``)."""
    return f"{type(module).__module__}.{type(module).__qualname__}" in FOLDABLE_CONVS


def _batchnorm_arguments(node: fx.Node, graph_module: fx.GraphModule) -> dict | None:
    """The BatchNorm's input node, statistics and affine parameters when ``node`` is an eval-mode BatchNorm whose
    tensors are the model's own; None otherwise."""
    if node.op == "call_module" and type(graph_module.get_submodule(node.target)) is nn.BatchNorm2d:
        bn = graph_module.get_submodule(node.target)
        if bn.training or bn.running_mean is None:
            return None
        return {
            "input": node.args[0],
            "running_mean": bn.running_mean,
            "running_var": bn.running_var,
            "weight": bn.weight,
            "bias": bn.bias,
            "eps": bn.eps,
        }
    arguments = _batchnorm_call(node, graph_module)
    if not arguments:
        return None
    for name in ("running_mean", "running_var", "weight", "bias"):
        value = arguments.get(name)
        if value is not None and not (isinstance(value, fx.Node) and value.op == "get_attr"):
            return None
        arguments[name] = None if value is None else _attribute(graph_module, value.target)
    if arguments["running_mean"] is None or arguments["running_var"] is None:
        return None
    return arguments


def _batchnorm_call(node: fx.Node, graph_module: fx.GraphModule) -> dict | None:
    """The keyword arguments of an eval-mode ``F.batch_norm`` call (empty when they cannot be normalized); None for
    any other node, and for a training-mode call (a weight standardization's batch statistics)."""
    if node.op != "call_function" or node.target is not F.batch_norm:
        return None
    normalized = node.normalized_arguments(graph_module, normalize_to_only_use_kwargs=True)
    if normalized is None:
        return {}
    return None if normalized.kwargs.get("training", False) else dict(normalized.kwargs)


def _data_users(node: fx.Node) -> list[fx.Node]:
    """The users of ``node`` that read its values, not only its metadata (timm's ``x.ndim`` checks)."""
    return [
        user
        for user in node.users
        if not (user.op == "call_function" and user.target is getattr and user.args[1] in METADATA)
        and not (user.op == "call_method" and user.target in ("size", "dim"))
    ]


def _attribute(graph_module: fx.GraphModule, target: str) -> torch.Tensor:
    parent, _, name = target.rpartition(".")
    return getattr(graph_module.get_submodule(parent), name)


def _fold_into_conv(node: fx.Node, graph_module: fx.GraphModule, call_counts: dict[str, int]) -> Fold | None:
    """Folds the BatchNorm ``node`` into the convolution feeding it, when that is exact; the fold, if it did."""
    arguments = _batchnorm_arguments(node, graph_module)
    if arguments is None:
        return None
    conv_node = arguments["input"]
    if not isinstance(conv_node, fx.Node) or conv_node.op != "call_module" or len(_data_users(conv_node)) != 1:
        return None
    conv = graph_module.get_submodule(conv_node.target)
    if not is_plain_conv(conv) or conv.training or call_counts[conv_node.target] != 1:
        return None
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight,
        fused.bias,
        arguments["running_mean"],
        arguments["running_var"],
        arguments["eps"],
        arguments["weight"],
        arguments["bias"],
    )
    parent, _, name = conv_node.target.rpartition(".")
    setattr(graph_module.get_submodule(parent), name, fused)
    node.replace_all_uses_with(conv_node)
    graph_module.graph.erase_node(node)
    return Fold(node.name, conv_node.name, conv_node.target)


def count_batchnorm(module: nn.Module) -> int:
    """BatchNorm layers in ``module``: when it is an FX graph, the BatchNorm nodes of its graph and those inside the
    modules it calls whole (untraceable ones); else its BatchNorm modules."""
    if not isinstance(module, fx.GraphModule):
        return sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())
    called = [module.get_submodule(node.target) for node in module.graph.nodes if node.op == "call_module"]
    inside = sum(count_batchnorm(m) for m in called if not isinstance(m, nn.modules.batchnorm._BatchNorm))
    return inside + sum(_is_batchnorm(node, module) for node in module.graph.nodes)


def _is_batchnorm(node: fx.Node, graph_module: fx.GraphModule) -> bool:
    """Whether ``node`` normalizes activations with BatchNorm (not a weight standardization's batch-statistics
    ``F.batch_norm``, which runs in training mode)."""
    if node.op == "call_module":
        return isinstance(graph_module.get_submodule(node.target), nn.modules.batchnorm._BatchNorm)
    return _batchnorm_call(node, graph_module) is not None


def fold(model: nn.Module) -> tuple[fx.GraphModule, list[Fold]]:
    """An FX copy of ``model`` (fp64) with every foldable BatchNorm folded, and the folds. Raises what symbolic
    tracing raises when the model's own forward (not one of its modules') cannot be followed."""
    graph_module = _trace(copy.deepcopy(model).double().eval())
    call_counts: dict[str, int] = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_module":
            call_counts[node.target] = call_counts.get(node.target, 0) + 1
    folds = [
        fold for node in list(graph_module.graph.nodes) if (fold := _fold_into_conv(node, graph_module, call_counts))
    ]
    graph_module.graph.lint()
    graph_module.recompile()
    graph_module.delete_all_unused_submodules()
    return graph_module, folds


class _FoldCheck(fx.Interpreter):
    """Runs the unfolded model's graph and, at each folded BatchNorm, compares its output with the folded
    convolution's output on the same input; keeps the largest relative difference."""

    def __init__(self, traced: fx.GraphModule, folded: fx.GraphModule, folds: list[Fold]):
        super().__init__(traced)
        self.folded, self.worst = folded, 0.0
        self.by_conv = {fold.conv_node: fold for fold in folds}
        self.by_batchnorm = {fold.batchnorm_node: fold for fold in folds}
        self.conv_inputs: dict[str, torch.Tensor] = {}

    def run_node(self, node: fx.Node):
        if node.name in self.by_conv:
            self.conv_inputs[node.name] = self.env[node.args[0]]
        result = super().run_node(node)
        if fold := self.by_batchnorm.get(node.name):
            folded_output = self.folded.get_submodule(fold.conv_target)(self.conv_inputs.pop(fold.conv_node))
            scale = float(result.abs().max()) or 1.0
            self.worst = max(self.worst, float((result - folded_output).abs().max()) / scale)
        return result


def fold_difference(model: nn.Module, folded: fx.GraphModule, folds: list[Fold], x: torch.Tensor) -> float:
    """Each fold checked on its own, on the activations the original model computes from ``x`` (fp64, cuDNN without
    autotuning): the largest difference between a folded BatchNorm's output and its folded convolution's output on
    the same input, relative to the largest BatchNorm output. Well conditioned where the whole model's output is not
    (a randomly initialized deep network can be chaotic)."""
    reference = copy.deepcopy(model).double().eval()
    check = _FoldCheck(_trace(reference), folded.double(), folds)
    with torch.no_grad(), cudnn_mode(benchmark=False):  # not cudnn.flags: it trips on the new TF32 API's flags
        check.run(x.double())
    return check.worst
