"""Backends: named strategies that turn a model and a static input into a function running one inference.

* ``eager``     — plain PyTorch launches under ``inference_mode``.
* ``graph``     — eager, captured once into a CUDA graph and replayed (no launch gaps); plain launches where
                  capture is impossible, with the reason recorded.
* ``compile``   — ``torch.compile`` in its default mode.
* ``inference`` — the best deployment path PyTorch offers: BatchNorm folded into the preceding convolutions
                  (in fp64, before the cast), inductor with ``freezing`` (weights as constants), CUDA graphs.

Every backend is recorded with every row, with its notes (fallbacks and why). The registry imports no torch (a
command line's help lists the backends): each backend imports it when it prepares a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from utilscope.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass(frozen=True)
class Prepared:
    run: Callable[[], torch.Tensor]  # one inference on the static input
    notes: tuple[str, ...] = ()  # fallbacks taken, and why
    graph: bool = False  # True when ``run`` replays a CUDA graph
    module: nn.Module | None = None  # the module actually run (after folding), for inspection


@dataclass(frozen=True)
class Backend:
    name: str
    prepare: Callable[[nn.Module, torch.Tensor], Prepared]
    fuses_elementwise: bool  # whether the runtime fuses elementwise/norm ops (which byte count applies)
    description: str
    cuda_graphs: bool = False  # whether it replays CUDA graphs on a CUDA device (``Prepared.graph`` says if it did)


BACKENDS: Registry[Backend] = Registry("backend")


def register_backend(name: str, fuses_elementwise: bool, description: str, cuda_graphs: bool = False):
    def decorate(prepare: Callable[[nn.Module, torch.Tensor], Prepared]):
        BACKENDS.add(name, Backend(name, prepare, fuses_elementwise, description, cuda_graphs))
        return prepare

    return decorate


def get_backend(name: str) -> Backend:
    return BACKENDS.get(name)


def _inference_call(fn: Callable, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    import torch

    def run() -> torch.Tensor:
        with torch.inference_mode():
            return fn(x)

    return run


def capture_cuda_graph(run: Callable[[], torch.Tensor], warmup_iters: int = 3) -> Callable[[], torch.Tensor]:
    """Warm ``run`` up on a side stream (cuDNN autotuning happens here), capture it, return a replay function."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup_iters):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = run()

    def replay() -> torch.Tensor:
        graph.replay()
        return static_output

    return replay


def _with_graph(run: Callable[[], torch.Tensor], x: torch.Tensor, notes: tuple[str, ...] = ()) -> Prepared:
    import torch

    if x.device.type != "cuda":
        return Prepared(run, (*notes, "CUDA graphs need a CUDA device: plain launches"))
    try:
        return Prepared(capture_cuda_graph(run), notes, graph=True)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as exc:  # capture is impossible for this model: time plain launches, say why
        torch.cuda.synchronize()
        reason = f"CUDA graph capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]}): plain launches"
        return Prepared(run, (*notes, reason))


@register_backend("eager", fuses_elementwise=False, description="plain PyTorch launches")
def eager(model: nn.Module, x: torch.Tensor) -> Prepared:
    return Prepared(_inference_call(model, x), module=model)


@register_backend("graph", fuses_elementwise=False, description="eager captured into a CUDA graph", cuda_graphs=True)
def graph(model: nn.Module, x: torch.Tensor) -> Prepared:
    prepared = _with_graph(_inference_call(model, x), x)
    return Prepared(prepared.run, prepared.notes, prepared.graph, model)


@register_backend("compile", fuses_elementwise=True, description="torch.compile, default mode")
def compiled(model: nn.Module, x: torch.Tensor) -> Prepared:
    return Prepared(_inference_call(_fresh_compile(model), x), module=model)


def _fresh_compile(model: nn.Module, **kwargs) -> Callable:
    """torch.compile for one static shape. Dynamo's caches are reset first: a sweep compiles one graph per batch
    size, and past its recompile limit dynamo would silently fall back to eager (or go dynamic-shape)."""
    import torch

    torch._dynamo.reset()
    return torch.compile(model, dynamic=False, **kwargs)


def fold_batchnorm(model: nn.Module, x: torch.Tensor) -> tuple[nn.Module, tuple[str, ...]]:
    """Fold eval-mode BatchNorm into the preceding convolutions (``measure.folding``), in fp64, then cast back to the
    input's dtype and memory format. The notes say when tracing fails (the model is returned as it is), when the
    fold would change the outputs (likewise), and how many BatchNorm layers are left unfolded."""
    import torch

    from utilscope.measure import folding

    try:
        folded, folds = folding.fold(model)
    except Exception as exc:  # symbolic tracing fails on data-dependent models: the model runs as it is
        return model, (f"FX BatchNorm folding impossible ({type(exc).__name__}); BatchNorm left unfolded",)
    try:
        difference = folding.fold_difference(model, folded, folds, x[:2])
    except Exception as exc:  # an op without fp64 support: the fold cannot be checked, so it is not used
        return model, (f"BatchNorm folding not checkable in fp64 ({type(exc).__name__}); BatchNorm left unfolded",)
    if not difference <= folding.FOLDING_RTOL:
        return model, (f"BatchNorm folding changed the outputs (relative difference {difference:.2g}): left unfolded",)
    left = folding.count_batchnorm(folded)
    why = "not after a foldable convolution, or in a module tracing cannot follow"
    notes = (f"{left} of {left + len(folds)} BatchNorm layers left unfolded ({why})",) if left else ()
    folded = folded.to(dtype=x.dtype)
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        folded = folded.to(memory_format=torch.channels_last)
    return folded.eval(), notes


@register_backend(
    "inference", fuses_elementwise=True, description="BN folded, inductor with freezing, CUDA graphs", cuda_graphs=True
)
def inference(model: nn.Module, x: torch.Tensor) -> Prepared:
    import torch

    folded, notes = fold_batchnorm(model, x)
    options = {"freezing": True}
    if x.device.type == "cuda":
        options["triton.cudagraphs"] = True
    else:
        notes = (*notes, "CUDA graphs need a CUDA device: plain launches")
    compiled_model = _fresh_compile(folded, options=options)

    def run() -> torch.Tensor:
        with torch.no_grad():  # freezing needs no_grad (inference_mode tensors cannot be frozen constants)
            return compiled_model(x)

    return Prepared(run, notes, graph=x.device.type == "cuda", module=folded)
