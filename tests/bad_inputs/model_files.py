"""Bad model files (ONNX, torch.export, TorchScript, pickles) over the verbs that take a model: a corrupt or truncated
file, a file of another format under a model file's name, an ONNX op the converter lacks (named, with its count),
missing external data, two inputs or a non-image input, a pickled module without the opt-in, a state dict, a folder;
and shapes a file does not allow (another batch or image size than it fixes, a free size without --res). Each is one
line, exit 2, and writes nothing."""

from bad_inputs import Case
from bad_inputs.files import MODEL_VERBS

TRUNCATED = "corrupt or truncated archive"
KINDS = [
    ("{onnx_truncated}", "is a truncated or corrupt ONNX model, or no ONNX model"),
    ("{pt_truncated}", TRUNCATED),
    ("{script_as_onnx}", "is a TorchScript archive, not an ONNX model"),
    ("{onnx_as_pt2}", "is not a PyTorch model file"),
    ("{onnx_unsupported}", "uses ONNX ops onnx2torch cannot convert: Hardmax (opset 17) x2"),
    ("{onnx_no_data}", "keeps its weights in no_data.onnx.data, which is missing"),
    ("{onnx_two_inputs}", "takes 2 inputs (x, x1): utilscope runs models of one image input"),
    ("{onnx_tokens}", "takes a 2-D int64 input 'x'"),
    ("{pickled_pt}", "is a pickled module (torch.save(model)): opening it runs code"),
    ("{state_pth}", "holds weights without an architecture"),
    ("{dir_onnx}", "is a folder"),
    ("{sandbox}/models/", "is a folder: name a model file in it"),
    ("{sandbox}/models/absent.onnx", "no such file"),
]
EVERY_VERB = ("{pt_truncated}", "{onnx_unsupported}", "{pickled_pt}")  # the others with count alone

SHAPES = [
    Case("count {onnx_model} --batch 2", 2, "runs only at batch 1 (the file fixes its input's batch), not at batch 2"),
    Case("count {onnx_model} --res 32", 2, "takes only 16x16 images (the file fixes its input's size), not 32x32"),
    Case("count {onnx_free}", 2, "has a dynamic input size (x: ? x 3 x ? x ?): give the resolution (--res R)"),
    Case(
        "count {script_pt}",
        2,
        "(a TorchScript archive) records no input size: give the resolution (--res R), or export it with torch.export",
    ),
    Case("profile {onnx_model} --device cpu --batch 1,2", 2, "runs only at batch 1"),
    Case("layers {onnx_model} --device cpu --batch 2", 2, "runs only at batch 1"),
    Case("advise {onnx_model} --device cpu --batch 2", 2, "runs only at batch 1"),
    Case("survey --models {onnx_free} --device cpu --dry-run", 2, "give the resolution"),
]

UNREADABLE = [Case(verb.replace("@", "{onnx_unreadable}"), 2, "permission denied", True) for verb in MODEL_VERBS]

CASES = [
    *UNREADABLE,
    *[Case(verb.replace("@", path), 2, phrase) for path, phrase in KINDS for verb in MODEL_VERBS[:1]],
    *[
        Case(verb.replace("@", path), 2, phrase)
        for path, phrase in KINDS
        if path in EVERY_VERB
        for verb in MODEL_VERBS[1:]
    ],
    *SHAPES,
]
