"""The files the bad-input cases name: built once, in one folder (the cases' working folder), each a placeholder
(``{empty}``, ``{store}``, ...) the cases' command lines use. Add a file here when a case needs one; never change
what an existing placeholder holds (other cases rely on it)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import textwrap
from pathlib import Path

FACTORY = """
import torch.nn as nn
RESOLUTION = 16


def make():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


def not_a_model():
    return 42


def raises():
    raise RuntimeError("the factory failed")
"""

TEXT_FILES = {  # placeholder -> (file name, content)
    "empty": ("empty.sqlite", b""),
    "empty_json": ("empty.json", b""),
    "empty_jsonl": ("empty.jsonl", b""),
    "empty_csv": ("empty.csv", b""),
    "empty_py": ("empty.py", b""),
    "text": ("text.txt", b"hello\n"),
    "bad_json": ("bad.json", b"{not json"),
    "list_json": ("list.json", b"[1, 2, 3]\n"),
    "bad_jsonl": ("bad.jsonl", b'{"id": "a"}\n{not json\n'),
    "binary": ("binary.bin", bytes(range(256)) * 16),
    "binary_json": ("binary.json", b"\xff\xfe\x00\x81" * 256),
    "binary_jsonl": ("binary.jsonl", b"\xff\xfe\x00\x81" * 256),
    "factory": ("models.py", FACTORY.encode()),
    "factory_exit": ("exits.py", b"import sys\nsys.exit(7)\n"),
    "factory_syntax": ("syntax.py", b"def make(:\n"),
    "factory_import": ("imports.py", b"import no_such_module_here\n"),
}


def _foreign_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('not a utilscope store')")
    conn.commit()
    conn.close()


def _store(path: Path) -> None:
    from test_store import make_row

    from utilscope.survey.store import Store

    with Store(path) as store:
        store.add(make_row())
        store.add(make_row(batch=32, latency_ms=2.0))


def build(root: Path) -> dict[str, str]:
    """Create the sandbox's files under ``root``; returns placeholder -> path (absolute)."""
    paths = {}
    for name, (file_name, content) in TEXT_FILES.items():
        (root / file_name).write_bytes(content)
        paths[name] = root / file_name
    paths["foreign"] = root / "foreign.sqlite"
    _foreign_sqlite(paths["foreign"])
    paths["store"] = root / "store.sqlite"
    _store(paths["store"])
    paths["folder"] = root / "folder"
    paths["folder"].mkdir()
    paths["missing"] = root / "missing.sqlite"  # never created
    paths["missing_dir"] = root / "no_such_folder"  # never created
    paths["unreadable"] = root / "unreadable.sqlite"
    _store(paths["unreadable"])
    paths["unreadable_json"] = root / "unreadable.json"
    paths["unreadable_json"].write_text(textwrap.dedent('{"a": 1}\n'))
    paths["rodir"] = root / "readonly"
    paths["rodir"].mkdir()
    for name in ("unreadable", "unreadable_json"):
        paths[name].chmod(0)
    paths["rodir"].chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    paths["sandbox"] = root
    paths.update(_file_kinds(root, paths))
    paths.update(_timm_tables(root))
    paths.update(_model_files(root / "models"))
    return {name: str(path) for name, path in paths.items()}


def _model_files(folder: Path) -> dict[str, Path]:
    """Model files, good and bad, in a folder of their own (``tests/model_file_helpers.py`` writes them in
    milliseconds): ONNX graphs of a conv (fixed 1x3x16x16; a free image size; an op onnx2torch lacks, twice; two
    inputs; a token input; weights in a data file that is missing; one that cannot be read), a TorchScript archive, a
    pickled module, a state dict, truncated files, files of another format under a model file's name, a folder named
    like a model file."""
    from model_file_helpers import onnx_graph, pickled_module, state_dict_file, torchscript_file

    folder.mkdir()
    paths = {
        "onnx_model": onnx_graph(folder / "model.onnx"),
        "onnx_free": onnx_graph(folder / "free.onnx", dims=("N", 3, "H", "W")),
        "onnx_unsupported": onnx_graph(folder / "unsupported.onnx", ops=("Hardmax", "Hardmax")),
        "onnx_two_inputs": onnx_graph(folder / "two_inputs.onnx", inputs=2),
        "onnx_tokens": onnx_graph(folder / "tokens.onnx", dims=(1, 16), element_type=7),
        "onnx_no_data": onnx_graph(folder / "no_data.onnx", external=True),
        "script_pt": torchscript_file(folder / "script.pt"),
        "pickled_pt": pickled_module(folder / "pickled.pt"),
        "state_pth": state_dict_file(folder / "state.pth"),
        "dir_onnx": folder / "dir.onnx",
    }
    (folder / "no_data.onnx.data").unlink()
    paths["dir_onnx"].mkdir()
    for name, source, file_name in (
        ("onnx_truncated", "onnx_model", "truncated.onnx"),
        ("pt_truncated", "script_pt", "truncated.pt"),
        ("script_as_onnx", "script_pt", "script.onnx"),
        ("onnx_as_pt2", "onnx_model", "model.pt2"),
    ):
        data = paths[source].read_bytes()
        paths[name] = folder / file_name
        paths[name].write_bytes(data[: len(data) // 2] if "truncated" in name else data)
    paths["onnx_unreadable"] = folder / "unreadable.onnx"
    paths["onnx_unreadable"].write_bytes(paths["onnx_model"].read_bytes())
    paths["onnx_unreadable"].chmod(0)
    return paths


TIMM_NAME = "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv"
TIMM_HEADER = (
    "model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size,param_count,infer_gmacs,infer_macts\n"
)
TIMM_TABLES = {  # placeholder -> (file name, content): each in a folder of its own, named as timm names its tables
    "timm_table": (TIMM_NAME, TIMM_HEADER + "resnet50,224,3000.5,341.2,1024,25.56,4.11,11.11\n"),
    "timm_empty": (TIMM_NAME, ""),
    "timm_binary": (TIMM_NAME, "\udcff\udcfe"),
    "timm_foreign": (TIMM_NAME, "name,score\nresnet50,0.8\n"),
    "timm_header_only": (TIMM_NAME, TIMM_HEADER),
    "timm_bad_number": (
        TIMM_NAME,
        TIMM_HEADER + "resnet18,224,9000,113.7,1024,11.7,1.8,2.5\nresnet50,224,fast,1,1024,,,\n",
    ),
    "timm_unknown_gpu": ("benchmark-infer-amp-nchw-pt240-cu124-quantum9000.csv", TIMM_HEADER),
    "timm_cpu": ("benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv", TIMM_HEADER),
    "unreadable_timm_table": (TIMM_NAME, TIMM_HEADER + "resnet50,224,3000.5,341.2,1024,25.56,4.11,11.11\n"),
}


def _timm_tables(root: Path) -> dict[str, Path]:
    """Tables named as timm's published inference benchmarks, good and bad, one folder each."""
    paths = {}
    for name, (file_name, content) in TIMM_TABLES.items():
        folder = root / "timm" / name
        folder.mkdir(parents=True)
        paths[name] = folder / file_name
        paths[name].write_bytes(content.encode(errors="surrogateescape"))
    paths["unreadable_timm_table"].chmod(0)
    return paths


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: its mode and, for a file, its size and content hash (or its mtime where it cannot
    be read)."""
    state = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            relative = str(path.relative_to(root))
            if stat.S_ISDIR(info.st_mode):
                state[relative] = (info.st_mode,)
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except PermissionError:
                digest = info.st_mtime_ns
            state[relative] = (info.st_mode, info.st_size, digest)
    return state


LATENCY_TABLE = (
    b'{"format": "utilscope-latency-table/1", "space": "mbv3", "device": "NVIDIA H200", '
    b'"software": "torch", "precision": "fp16", "cudnn_benchmark": true, "entries": {}}\n'
)


def _file_kinds(root: Path, paths: dict) -> dict:
    """Files of one kind where another is expected (a store named .json, JSON named .sqlite), good inputs to pair
    with a bad one (an architecture file, a latency table), read-only files and folders, a folder that cannot be
    listed, and a second name of the store (a symbolic link)."""
    store = paths["store"].read_bytes()
    extra = {
        name: root / file_name
        for name, file_name in (
            ("sqlite_json", "sqlite.json"),
            ("sqlite_jsonl", "sqlite.jsonl"),
            ("sqlite_py", "sqlite.py"),
            ("json_sqlite", "json.sqlite"),
            ("archs", "archs.jsonl"),
            ("table", "table.json"),
            ("objective_text", "objective_text.json"),
            ("unreadable_jsonl", "unreadable.jsonl"),
            ("unreadable_py", "unreadable.py"),
            ("readonly_json", "readonly.json"),
            ("readonly_csv", "readonly.csv"),
            ("readonly_jsonl", "readonly.jsonl"),
            ("rostore", "readonly_store/store.sqlite"),
            ("closed", "closed"),
            ("store_link", "link.sqlite"),
        )
    }
    for suffix in ("json", "jsonl", "py", "png", "csv", "sqlite"):  # folders named like the files expected
        extra[f"dir_{suffix}"] = root / f"dir.{suffix}"
        extra[f"dir_{suffix}"].mkdir()
    for name in ("sqlite_json", "sqlite_jsonl", "sqlite_py"):
        extra[name].write_bytes(store)
    extra["json_sqlite"].write_text('{"a": 1}\n')
    extra["archs"].write_text(_archs())
    extra["table"].write_bytes(LATENCY_TABLE)
    extra["objective_text"].write_text('{"abc": "big"}\n')
    extra["unreadable_jsonl"].write_text(_archs())
    extra["unreadable_py"].write_bytes(FACTORY.encode())
    for name in ("readonly_json", "readonly_csv", "readonly_jsonl"):
        extra[name].write_text("{}\n")
    extra["rostore"].parent.mkdir()
    extra["rostore"].write_bytes(store)
    extra["closed"].mkdir()
    (extra["closed"] / "models.py").write_bytes(FACTORY.encode())
    extra["store_link"].symlink_to(paths["store"].name)
    read_only = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
    for name in ("unreadable_jsonl", "unreadable_py", "closed"):
        extra[name].chmod(0)
    for name in ("readonly_json", "readonly_csv", "readonly_jsonl"):
        extra[name].chmod(read_only)
    extra["rostore"].parent.chmod(read_only | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    extra["arch_id"] = _archs().split('"id": "')[1].split('"')[0]
    return extra


def _archs() -> str:
    """Two architectures of the mbv3 space, as ``utilscope nas sample`` writes them."""
    import json

    from utilscope.nas.sampler import sample_architectures
    from utilscope.nas.spaces import get_space

    archs = sample_architectures(get_space("mbv3"), 2, seed=0)
    return "".join(json.dumps(arch, sort_keys=True) + "\n" for arch in archs)
