"""Small model files for the tests, written without exporting a network: ONNX graphs built node by node with
``onnx.helper`` (a conv and a global pool: milliseconds to write), a TorchScript archive, a pickled module and a state
dict of a one-conv module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

SIDE = 16  # the image side of the ONNX graphs below
CONV_OUT = 4
# the conv graph, 3 -> 4 channels, 3x3, padding 1, at 16x16, batch 1: 2 * (4*16*16) * (3*3*3) = 55_296 FLOPs
CONV_FLOPS = 2 * CONV_OUT * SIDE * SIDE * 3 * 3 * 3


def onnx_graph(
    path: Path,
    dims=(1, 3, SIDE, SIDE),
    ops: tuple[str, ...] = (),
    inputs: int = 1,
    element_type: int = 1,
    external: bool = False,
    opset: int = 17,
    channels: int | None = None,
) -> Path:
    """An ONNX model: Conv(C -> 4, 3x3, pad 1) then GlobalAveragePool on input ``x`` of ``dims`` (a str is a named,
    free dimension; not 4 of them: an Identity instead), then each op of ``ops`` (one input, one output:
    ``Hardmax``...); ``inputs`` > 1 adds inputs the graph adds to its first; ``element_type``: the input's ONNX data
    type (7: int64); ``external``: the weights in ``<name>.data`` beside it; C: ``channels``, else the input's
    (``dims[1]``) where it is a number, else 3."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    channels = channels or (dims[1] if len(dims) == 4 and isinstance(dims[1], int) else 3)
    shape = (CONV_OUT, channels, 3, 3)
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal(shape, np.float32), "w")
    bias = numpy_helper.from_array(np.zeros(CONV_OUT, np.float32) + 0.1, "b")
    values = [helper.make_tensor_value_info(f"x{i}" if i else "x", element_type, list(dims)) for i in range(inputs)]
    nodes = [helper.make_node("Add", ["x" if i == 1 else f"s{i - 1}", f"x{i}"], [f"s{i}"]) for i in range(1, inputs)]
    source = f"s{inputs - 1}" if inputs > 1 else "x"
    if len(dims) == 4:
        nodes += [
            helper.make_node("Conv", [source, "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("GlobalAveragePool", ["c"], ["p0"]),
        ]
        out_type, out_dims, weights = TensorProto.FLOAT, [dims[0], CONV_OUT, 1, 1], [weight, bias]
    else:  # not an image: the input as it is
        nodes.append(helper.make_node("Identity", [source], ["p0"]))
        out_type, out_dims, weights = element_type, list(dims), []
    for index, op in enumerate(ops):
        nodes.append(helper.make_node(op, [f"p{index}"], [f"p{index + 1}"]))
    output = helper.make_tensor_value_info(f"p{len(ops)}", out_type, out_dims)
    graph = helper.make_graph(nodes, "tiny", values, [output], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if external:
        onnx.save(model, path, save_as_external_data=True, location=f"{path.name}.data", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


class OneConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, CONV_OUT, 3, padding=1)

    def forward(self, x):
        return self.conv(x).mean((2, 3))


def torchscript_file(path: Path) -> Path:
    torch.jit.save(torch.jit.script(OneConv()), path)
    return path


def pickled_module(path: Path) -> Path:
    torch.save(OneConv(), path)
    return path


def state_dict_file(path: Path) -> Path:
    torch.save(OneConv().state_dict(), path)
    return path
