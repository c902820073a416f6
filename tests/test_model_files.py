"""Model files as model sources: a tiny CNN exported to ONNX, torch.export and TorchScript (and pickled) counts like
the module it came from, or differs by a named cause; a file's id is its resolved path and content; a fixed input
shape is the only one it runs at; every verb takes a file. The bad inputs' one-line errors are in
``bad_inputs/model_files.py``; the 15-CNN proof runs with ``UTILSCOPE_EXPORT_PROOF=1`` (slow), and
``scripts/model_file_equality.py`` tables the 61 curated CNNs."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import QUICK, load_script, randomized
from model_file_helpers import CONV_FLOPS, onnx_graph, pickled_module, state_dict_file
from torch import nn
from torch.export import Dim

import utilscope
from utilscope import api
from utilscope.cli import main
from utilscope.errors import ModelError, UsageError
from utilscope.measure.folding import fold
from utilscope.measure.settings import MeasureRequest
from utilscope.measure.sweep import prepare_sweep, run_sweep
from utilscope.models import model_files, onnx_import, zoo

SIDE = 16
ON_CPU = {"device": "cpu", "backend": "eager", "plan": QUICK, "ceilings": "skip"}
TOTALS = ("flops", "other_flops", "bytes", "params")


class TinyNet(nn.Module):
    """conv 3->8 + BatchNorm + ReLU; its channels split in halves (ShuffleNet's split), one through a depthwise conv
    and GELU; concatenated; global average pool; linear 8->4. Exported at opset 20 it has Gelu (an op of opset 20)
    and Split (of opset 18): both take onnx_import's private path."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.GELU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, x):
        a, b = self.stem(x).chunk(2, dim=1)
        return self.head(torch.cat([self.dw(a), b], dim=1))


def _quiet(write) -> None:
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write()


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict:
    """TinyNet (random weights, BatchNorm not the identity) written at batch 1, 16x16, in every format, in one
    folder: ``onnx`` (PyTorch's exporter, opset 20, weights in external data), ``pt2``, ``pt2_dynamic`` (a free
    batch), ``torchscript``, ``pickle``, ``state_dict``; and ``module``."""
    folder = tmp_path_factory.mktemp("exports")
    torch.manual_seed(0)
    model = randomized(TinyNet())
    x, x2 = torch.randn(1, 3, SIDE, SIDE), torch.randn(2, 3, SIDE, SIDE)
    batch = {"x": {0: Dim("batch")}}
    paths = {name: folder / file for name, file in (
        ("onnx", "tiny.onnx"), ("pt2", "tiny.pt2"), ("pt2_dynamic", "dynamic.pt2"),
        ("torchscript", "tiny.pt"), ("pickle", "pickled.pt"), ("state_dict", "state.pth"),
    )}  # fmt: skip
    _quiet(lambda: torch.onnx.export(model, (x,), paths["onnx"], input_names=["x"]))
    torch.export.save(torch.export.export(model, (x,)), paths["pt2"])
    torch.export.save(torch.export.export(model, (x2,), dynamic_shapes=batch), paths["pt2_dynamic"])
    _quiet(lambda: torch.jit.save(torch.jit.trace(model, x, check_trace=False), paths["torchscript"]))
    torch.save(model, paths["pickle"])
    torch.save(model.state_dict(), paths["state_dict"])
    return {**{name: str(path) for name, path in paths.items()}, "module": model, "folder": folder}


def _totals(result) -> dict:
    return {name: getattr(result.total, name) for name in TOTALS}


# --- counts ------------------------------------------------------------------------------------------------------


def test_torch_export_and_torchscript_count_like_the_module(exports):
    original = _totals(utilscope.count(exports["module"], resolution=SIDE))
    assert original["flops"] == 2 * 8 * SIDE * SIDE * 27 + 2 * 4 * SIDE * SIDE * 9 + 2 * 8 * 4  # conv, dw conv, linear
    for name in ("pt2", "pt2_dynamic"):
        assert _totals(utilscope.count(exports[name])) == original, name
    assert _totals(utilscope.count(exports["torchscript"], resolution=SIDE)) == original
    result = utilscope.count(exports["pt2"])
    assert result.resolution == SIDE and result.model.startswith("pt2:") and result.unsupported == {}


def test_onnx_counts_like_the_module_with_its_batchnorm_folded(exports):
    """PyTorch's exporter folds BatchNorm into the conv before it: the file counts as the module folded (fewer
    other FLOPs, bytes and params: the BatchNorm's 8 scales and 8 shifts are gone), the same FLOPs."""
    folded, _ = fold(exports["module"])
    expected = _totals(utilscope.count(folded, resolution=SIDE))
    result = utilscope.count(exports["onnx"])
    assert result.traced_on == "meta" and result.unsupported == {}
    assert _totals(result) == expected
    original = _totals(utilscope.count(exports["module"], resolution=SIDE))
    assert (result.total.flops, result.total.params) == (original["flops"], original["params"] - 16)


def test_the_converted_onnx_module_computes_what_the_module_does(exports):
    x = torch.randn(1, 3, SIDE, SIDE)
    converted = zoo.build_model(zoo.parse_spec(exports["onnx"]))
    kinds = {type(module).__name__ for module in converted.modules()}
    assert {"Conv2d", "GELU", "OnnxSplit13", "StaticReshape"} <= kinds  # Gelu and Split through the private path
    with torch.no_grad():
        torch.testing.assert_close(converted(x), exports["module"](x), rtol=1e-4, atol=1e-5)


def test_a_pickled_module_opens_only_when_trusted_and_a_state_dict_never(exports, monkeypatch):
    with pytest.raises(UsageError, match=r"is a pickled module \(torch.save\(model\)\): opening it runs code .*"):
        zoo.parse_spec(exports["pickle"])
    named = model_files.identify(exports["pickle"]).unsafe_globals  # the same names in the same order on every run
    assert named == tuple(sorted(named)) and "torch.nn.modules.conv.Conv2d" in named
    monkeypatch.setenv(model_files.TRUST_PICKLE_ENV, "1")
    spec = zoo.parse_spec(exports["pickle"])
    assert spec.source == "pickle"
    original = _totals(utilscope.count(exports["module"], resolution=SIDE))
    with pytest.warns(UserWarning, match=r"pickled.pt: opening a torch.save pickle that names Python callables"):
        assert _totals(utilscope.count(exports["pickle"], resolution=SIDE)) == original
    with pytest.raises(UsageError, match="holds weights without an architecture .* factory file"):
        zoo.parse_spec(exports["state_dict"])


def _pt2_with_a_pickled_module(pt2: str, evil: Path) -> str:
    """A copy of the torch.export archive ``pt2`` whose sample inputs carry a pickled module: torch.export.load
    unpickles it with weights_only=False, which would run code."""
    import zipfile

    with zipfile.ZipFile(pt2) as source, zipfile.ZipFile(evil, "w") as out:
        for name in source.namelist():
            data = source.read(name)
            if "sample_inputs" in name:
                buffer = io.BytesIO()
                sample = torch.zeros(1, 3, SIDE, SIDE)
                sample.note = nn.Conv2d(1, 1, 1)  # an attribute torch.save pickles with the tensor
                torch.save(((sample,), {}), buffer)
                data = buffer.getvalue()
            out.writestr(name, data)
    return str(evil)


def test_a_torch_export_archive_whose_pickles_name_callables_opens_only_when_trusted(exports, tmp_path, monkeypatch):
    """torch.export.load unpickles the archive's pickled entries with weights_only=False: one that names a module
    class (here its sample inputs carry a pickled module) would run code, and is refused by default."""
    evil = _pt2_with_a_pickled_module(exports["pt2"], tmp_path / "evil.pt2")
    assert model_files.identify(exports["pt2"]).unsafe_globals == ()
    with pytest.raises(UsageError, match=r"holds pickles that name Python callables \(torch.nn.modules.conv.Conv2d"):
        zoo.parse_spec(evil)
    monkeypatch.setenv(model_files.TRUST_PICKLE_ENV, "1")
    with pytest.warns(UserWarning, match=r"evil.pt2: opening a torch.export archive that names Python"):
        assert utilscope.count(evil).total.flops == utilscope.count(exports["pt2"]).total.flops


def test_the_cli_says_a_trusted_archive_in_one_line_and_nothing_of_torchs_fallback(
    exports, tmp_path, monkeypatch, capsys
):
    """torch.export.load's fallback to weights_only=False logs a warning with a broken format string (torch 2.14: a
    "--- Logging error ---" traceback on stderr); the CLI says instead, once, that the file is trusted."""
    evil = _pt2_with_a_pickled_module(exports["pt2"], tmp_path / "trusted.pt2")
    monkeypatch.setenv(model_files.TRUST_PICKLE_ENV, "1")
    assert main(["count", evil]) == 0
    captured = capsys.readouterr()
    assert "FLOPs" in captured.out
    assert captured.err.splitlines() == [
        f"utilscope: warning: {Path(evil).resolve()}: opening a torch.export archive that names Python callables "
        f"(torch.nn.modules.conv.Conv2d...), trusted by {model_files.TRUST_PICKLE_ENV}=1"
    ]


def test_a_real_cnn_exported_to_each_format_counts_alike_or_by_a_named_cause():
    """SqueezeNet 1.1 at 64 px through scripts/model_file_equality.py: every format counts the same totals."""
    rows = _equality_script().compare("torchvision:squeezenet1_1", 64, _empty_folder())
    assert [(row["format"], row["equal"]) for row in rows] == [("onnx", True), ("pt2", True), ("torchscript", True)]


# --- identity ----------------------------------------------------------------------------------------------------


def test_a_file_is_keyed_by_its_resolved_path_and_content(exports, tmp_path, monkeypatch):
    path = Path(exports["pt2"])
    spec = zoo.parse_spec(str(path))
    digest = spec.name.rpartition("#")[2]
    assert spec.id == f"pt2:{path.resolve()}#{digest}" and len(digest) == 12 and zoo.parse_spec(spec.id) == spec
    monkeypatch.chdir(path.parent)
    assert zoo.parse_spec(path.name) == spec == zoo.parse_spec(f"pt2:{path.name}")  # another name, the same file
    moved = tmp_path / "moved.pt2"
    shutil.copy(path, moved)
    assert zoo.parse_spec(str(moved)).name == f"{moved.resolve()}#{digest}"  # the same content found elsewhere
    moved.write_bytes(moved.read_bytes() + b"\0")  # an edited file is another model, and its old id is refused
    with pytest.raises(UsageError, match="changed since it was named"):
        zoo.parse_spec(f"{moved}#{digest}")


def test_an_onnx_files_digest_covers_its_external_data(tmp_path):
    path = onnx_graph(tmp_path / "g.onnx", external=True)
    before = zoo.parse_spec(str(path)).id
    data = tmp_path / "g.onnx.data"
    data.write_bytes(data.read_bytes()[::-1])
    model_files._identify.cache_clear()  # a new process would see the new data; this one caches by the .onnx file
    assert zoo.parse_spec(str(path)).id != before


# --- shapes ------------------------------------------------------------------------------------------------------


def test_a_fixed_input_shape_is_the_only_one_a_file_runs_at(exports):
    with pytest.raises(UsageError, match=r"tiny.onnx runs only at batch 1 \(the file fixes its input's batch\), not"):
        utilscope.count(exports["onnx"], batch=2)
    with pytest.raises(UsageError, match=r"tiny.pt2 takes only 16x16 images \(the file fixes its input's size\)"):
        utilscope.count(exports["pt2"], resolution=32)
    module = zoo.build_model(zoo.parse_spec(exports["onnx"]))
    with pytest.raises(ModelError, match="runs only at batch 1"):  # the guard a survey's row meets at forward
        module(torch.randn(2, 3, SIDE, SIDE))
    assert (
        utilscope.count(exports["pt2_dynamic"], batch=3).total.flops == 3 * utilscope.count(exports["pt2"]).total.flops
    )
    assert zoo.fixed_batch(zoo.parse_spec(exports["onnx"])) == 1
    assert zoo.fixed_batch(zoo.parse_spec(exports["pt2_dynamic"])) is None


def test_a_named_batch_dimension_of_an_onnx_file_runs_at_any_batch(tmp_path):
    free = onnx_graph(tmp_path / "batch.onnx", dims=("N", 3, SIDE, SIDE))
    assert utilscope.count(str(free), batch=3).total.flops == 3 * CONV_FLOPS
    assert zoo.fixed_batch(zoo.parse_spec(str(free))) is None


def test_a_free_image_size_needs_a_resolution(exports, tmp_path):
    free = onnx_graph(tmp_path / "free.onnx", dims=("N", 3, "H", "W"))
    with pytest.raises(UsageError, match=r"has a dynamic input size \(x: \? x 3 x \? x \?\): give the resolution"):
        utilscope.count(str(free))
    assert utilscope.count(str(free), batch=2, resolution=SIDE).total.flops == 2 * CONV_FLOPS
    with pytest.raises(UsageError, match=r"\(a TorchScript archive\) records no input size: give the resolution"):
        utilscope.count(exports["torchscript"])


# --- verbs -------------------------------------------------------------------------------------------------------


def test_profile_runs_a_fixed_batch_file_at_its_batch_and_refuses_another(exports):
    result = api.profile(exports["onnx"], **ON_CPU)  # the default batches: the file's one
    assert [(row.batch, row.status) for row in result.rows] == [(1, "ok")] and result.model.startswith("onnx:")
    with pytest.raises(UsageError, match="runs only at batch 1"):
        api.profile(exports["onnx"], batches=[1, 2], **ON_CPU)


def test_a_survey_row_at_a_batch_the_file_refuses_is_an_error_row():
    """The survey worker's sweep (``run_sweep``) over batch 1 and 2 of a file fixed at batch 1: a row each."""
    path = onnx_graph(_empty_folder() / "fixed.onnx")
    sweep = prepare_sweep(MeasureRequest(str(path), **ON_CPU))
    rows = run_sweep(sweep, [1, 2])
    assert rows[0].status == "ok" and rows[1].status.startswith("error: ModelError: ") and "batch 1" in rows[1].status


def test_layers_and_advise_take_model_files(exports):
    layers = api.attribute(exports["torchscript"], batch=2, iters=1, resolution=SIDE, **ON_CPU).to_frame()
    assert layers["flops"].sum() == 2 * utilscope.count(exports["torchscript"], resolution=SIDE).total.flops
    assert "_convolution" in set(layers["name"])  # TorchScript keeps no module names: its layers are its ops
    advice = api.advise(exports["onnx"], ladder=(), repeats=1, **ON_CPU)
    assert {trial.batch for trial in advice.trials} == {1}  # the file's one batch
    assert advice.flops_per_sample == utilscope.count(exports["onnx"]).total.flops


def test_the_cli_counts_a_glob_of_files_and_plans_a_survey_of_them(exports, capsys, tmp_path):
    folder = exports["folder"]
    assert main(["count", f"{folder}/*.pt2"]) == 0
    out = capsys.readouterr().out
    assert "dynamic.pt2" in out and "tiny.pt2" in out
    listing = tmp_path / "models.txt"
    listing.write_text(f"{exports['onnx']}  # a model file per line\n{exports['torchscript']}@16\n")
    db = tmp_path / "s.sqlite"
    survey = ["survey", "--device", "cpu", "--dry-run", "--db", str(db), "--batch", "1"]
    assert main([*survey, "--models", f"{folder}/*.pt2", "--models-file", str(listing)]) == 0
    out = capsys.readouterr().out
    assert not db.exists() and all(f"{source}:" in out for source in ("pt2", "onnx", "torchscript"))


# --- ONNX specifics ----------------------------------------------------------------------------------------------


def test_identity_of_a_weight_and_reshape_allowzero_are_made_convertible(tmp_path):
    import onnx
    from onnx import helper, numpy_helper

    path = onnx_graph(tmp_path / "g.onnx")
    model = onnx.load(path)
    conv = next(node for node in model.graph.node if node.op_type == "Conv")
    model.graph.node.insert(0, helper.make_node("Identity", ["w"], ["w_alias"]))  # as the older exporter writes
    conv.input[1] = "w_alias"
    model.graph.initializer.append(numpy_helper.from_array(torch.tensor([1, -1]).numpy(), "shape"))
    model.graph.node.append(helper.make_node("Reshape", ["p0", "shape"], ["flat"], allowzero=1))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("flat", 1, [1, 4]))
    onnx.save(model, path)
    result = utilscope.count(str(path))
    assert result.total.flops == CONV_FLOPS and result.unsupported == {} and result.traced_on == "meta"


def test_a_missing_onnx_extra_is_one_line_naming_it(tmp_path, monkeypatch):
    path = onnx_graph(tmp_path / "g.onnx")
    monkeypatch.setitem(sys.modules, "onnx2torch", None)
    with pytest.raises(
        UsageError, match=r"needs the onnx extra \(onnx2torch is missing\): pip install 'utilscope\[onnx\]'"
    ):
        onnx_import.require_onnx()
    with pytest.raises(UsageError, match="needs the onnx extra"):
        zoo.parse_spec(str(path))


def test_pickles_and_state_dicts_are_told_apart_without_unpickling(tmp_path):
    module = model_files.identify(str(pickled_module(tmp_path / "m.pt")))
    weights = model_files.identify(str(state_dict_file(tmp_path / "w.pt")))
    assert module.format is weights.format is model_files.Format.PICKLE
    assert "model_file_helpers.OneConv" in module.unsafe_globals and weights.unsafe_globals == ()


# --- the 15-CNN proof (slow: UTILSCOPE_EXPORT_PROOF=1) -----------------------------------------------------------

# What an exported file may change, and why: ops whose cost moves between formats for a named reason.
NAMED_CAUSES = {
    "native_batch_norm": "the ONNX exporter folds BatchNorm into the conv before it",
    "empty": "a BatchNorm's placeholder output, gone with it",
    "convolution": "a folded BatchNorm adds a bias to its conv (one add per output element)",
    "hardsigmoid": "onnx2torch computes HardSigmoid as mul, add, clamp",
    "mul": "onnx2torch's HardSigmoid; the exporter's SiLU (sigmoid times input)",
    "add": "onnx2torch's HardSigmoid; the exporter's Linear on a 4-D input (MatMul then Add)",
    "clamp": "onnx2torch's HardSigmoid",
    "silu": "the ONNX exporter writes SiLU as Sigmoid and Mul",
    "sigmoid": "the ONNX exporter writes SiLU as Sigmoid and Mul",
    "addmm": "the exporter's Linear on a 4-D input (MatMul then Add)",
    "mm": "the exporter's Linear on a 4-D input (MatMul then Add)",
    "index": "the exporter's Gather of the class token (timm's ConvNeXt head)",
    "floor_divide": "TorchScript's trace records channel_shuffle's size arithmetic as tensor ops",
    "equal": "TorchScript's trace records channel_shuffle's size arithmetic as tensor ops",
    "_local_scalar_dense": "TorchScript's trace records channel_shuffle's size arithmetic as tensor ops",
}


def _equality_script():
    return load_script("scripts/model_file_equality.py")


def _empty_folder() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="utilscope-exports-"))


PROOF = _equality_script().PROOF if os.environ.get("UTILSCOPE_EXPORT_PROOF") == "1" else ()


@pytest.mark.slow
@pytest.mark.parametrize("model", PROOF)
def test_fifteen_cnns_exported_count_alike_or_by_a_named_cause(model):
    rows = _equality_script().compare(model, 64, _empty_folder())
    for row in rows:
        assert "error" not in row or not isinstance(row["error"], str), row
        assert row["flops_diff"] == 0, row
        ops = [part.split(" ")[0] for part in row["ops"].split("; ") if part]
        assert set(ops) <= set(NAMED_CAUSES), (row["format"], row["ops"])
        assert row["format"] != "pt2" or row["equal"], row


def test_a_glob_with_a_bad_file_counts_the_good_ones_and_names_the_bad_one(exports, tmp_path, capsys):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(exports["pt2"], folder / "good.pt2")
    (folder / "bad.pt2").write_bytes(b"not a zip archive")
    assert main(["count", f"{folder}/*.pt2"]) == 1  # some models failed, each printed; the others ran
    captured = capsys.readouterr()
    assert "good.pt2" in captured.out and "bad.pt2" not in captured.out
    assert captured.err.count("\n") == 1 and captured.err.startswith("utilscope: error: ")
    assert captured.err.count("bad.pt2") == 1  # the file named once


def test_a_survey_of_a_glob_with_a_bad_file_measures_the_good_ones_and_names_the_bad_one(exports, tmp_path, capsys):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(exports["pt2"], folder / "good.pt2")
    (folder / "bad.pt2").write_bytes(b"not a zip archive")
    db = tmp_path / "s.sqlite"
    survey = ["survey", "--device", "cpu", "--dry-run", "--db", str(db), "--batch", "1", "--models"]
    assert main([*survey, f"{folder}/*.pt2"]) == 1  # the good file planned, the bad one named, not zero
    captured = capsys.readouterr()
    assert "good.pt2" in captured.out and "bad.pt2" not in captured.out
    assert captured.err.count("\n") == 1 and "bad.pt2" in captured.err and "left out of the survey" in captured.err
    assert main([*survey, f"{folder}/bad*.pt2"]) == 2  # every file of the glob bad: a usage error
    assert "no file that" in capsys.readouterr().err and not db.exists()


def test_a_folder_named_without_a_separator_is_said_to_be_one(tmp_path, monkeypatch, capsys):
    (tmp_path / "exports").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["count", "exports"]) == 2  # said while parsing, before a model file is opened
    assert capsys.readouterr().err == (
        "utilscope: error: argument model: exports is a folder: name a model file in it, or a glob such as "
        "'exports/*.onnx' (see: utilscope count --help)\n"
    )


def test_a_torchscript_files_convolutions_keep_channels_last_as_the_modules_do(exports):
    """TorchScript's graph calls aten._convolution, whose meta kernel returns NCHW: laid out as cuDNN's output, as
    aten.convolution's is, its network's rows (layouts, no layout copies) are the module's, so they predict alike."""
    from utilscope.counting.counter import count_traced
    from utilscope.predict.features import Gpu
    from utilscope.predict.predictor import network_rows

    gpu = Gpu.of("NVIDIA H200", "fp16")
    module, script = (
        network_rows(count_traced(model, 2, SIDE, "fp16", channels_last=True)[1], gpu)
        for model in (exports["module"], exports["torchscript"])
    )
    assert len(script) == len(module) and "layout_copy" not in set(script["op"])
    convs = [frame.loc[frame["group"] == "conv", "channels_last_input"].tolist() for frame in (module, script)]
    assert convs[0] == convs[1] and all(convs[0])
