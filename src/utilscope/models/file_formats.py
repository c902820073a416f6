"""What a model file is, told from its bytes without torch: its format (ONNX, torch.export, TorchScript, a
torch.save pickle) against the formats its name allows, and whether a pickle may be opened (``refuse_untrusted``).
``model_files`` opens the files with these rules; the command line checks a file with them while parsing
(``check_file``), before torch is imported, so a file that cannot be a model is one line in a fraction of a second.
"""

from __future__ import annotations

import io
import os
import re
import warnings
import zipfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import BinaryIO

from utilscope.errors import UsageError, describe
from utilscope.models import onnx_graph
from utilscope.models.sources import FILE_DIGEST_CHARS, MODEL_FILE

TRUST_PICKLE_ENV = "UTILSCOPE_TRUST_PICKLE"  # "1": open torch.save pickles, which run code the file names
ZIP_MAGIC = b"PK\x03\x04"
PICKLE_MAGIC = b"\x80"  # a pickle's PROTO opcode: torch.save's legacy (non-zip) format, or plain pickle


class Format(str, Enum):
    ONNX = "onnx"
    PT2 = "pt2"
    TORCHSCRIPT = "torchscript"
    PICKLE = "pickle"


DESCRIPTIONS = {
    Format.ONNX: "an ONNX model",
    Format.PT2: "a torch.export archive",
    Format.TORCHSCRIPT: "a TorchScript archive",
    Format.PICKLE: "a torch.save pickle",
}
SUFFIXES = {  # a file name's suffix -> the formats a file of that name may hold
    ".onnx": (Format.ONNX,),
    ".pt2": (Format.PT2,),
    ".pt": (Format.TORCHSCRIPT, Format.PT2, Format.PICKLE),
    ".pth": (Format.TORCHSCRIPT, Format.PT2, Format.PICKLE),
    ".ts": (Format.TORCHSCRIPT,),
}


def trusts_pickles() -> bool:
    """Whether the user opted in to unpickling (``UTILSCOPE_TRUST_PICKLE=1``): the one place it is read."""
    return os.environ.get(TRUST_PICKLE_ENV, "").strip() == "1"


def split_name(text: str) -> tuple[str, str]:
    """``path#digest`` -> (path, digest); a text without a digest -> (text, '')."""
    path, sep, digest = text.rpartition("#")
    if sep and re.fullmatch(f"[0-9a-f]{{{FILE_DIGEST_CHARS}}}", digest):
        return path, digest
    return text, ""


def suffix_formats(path: str) -> tuple[Format, ...] | None:
    """The formats a file of this name may hold, None for a name that is not a model file's."""
    return SUFFIXES.get(Path(path).suffix.lower())


@dataclass(frozen=True)
class Identity:
    """What a file holds, by its bytes: its format, its digest, and for a pickle the callables it names that
    ``weights_only`` loading does not allow (None: not told, a legacy pickle)."""

    format: Format
    digest: str
    unsafe_globals: tuple[str, ...] | None = None


def sniff(stream: BinaryIO, path: str) -> Format:
    """The format of a file's bytes (read from ``stream``, from its start), told without running anything, and
    one its name allows; a UsageError naming the file otherwise."""
    head = stream.read(len(ZIP_MAGIC))
    stream.seek(0)
    if not head:
        raise UsageError(f"{path} is empty, expected a {MODEL_FILE}")
    if head.startswith(ZIP_MAGIC):
        found = _archive_format(stream, path)
    elif head.startswith(PICKLE_MAGIC):
        found = Format.PICKLE
    elif Format.ONNX in (suffix_formats(path) or ()):
        found = Format.ONNX  # a protobuf has no magic: parsing it tells (onnx_graph.decode)
    else:
        raise UsageError(f"{path} is not a PyTorch model file (TorchScript, torch.export or torch.save)")
    allowed = suffix_formats(path) or ()
    if found not in allowed:
        expected = " or ".join(DESCRIPTIONS[f] for f in allowed)
        raise UsageError(f"{path} is {DESCRIPTIONS[found]}, not {expected} as its name says")
    return found


def _archive_format(stream: BinaryIO, path: str) -> Format:
    """A PyTorch zip archive's format, by the entries each writer puts under its one top folder."""
    try:
        names = zipfile.ZipFile(stream).namelist()
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise UsageError(f"{path} is a corrupt or truncated archive ({describe(exc)})") from None
    entries = {name.partition("/")[2] for name in names}
    if "archive_format" in entries or any(entry.startswith("models/") for entry in entries):
        return Format.PT2
    if "constants.pkl" in entries and any(entry.startswith("code/") for entry in entries):
        return Format.TORCHSCRIPT
    if "data.pkl" in entries:
        return Format.PICKLE
    raise UsageError(f"{path} is a zip archive but not a PyTorch model (TorchScript, torch.export or torch.save)")


def say_trusted(path: str, identity: Identity) -> None:
    """One warning (``warnings.warn``, once per file) that a file whose pickles name Python callables is opened
    because the user trusts it; nothing for a file that names none."""
    if identity.format in (Format.PT2, Format.PICKLE) and identity.unsafe_globals and trusts_pickles():
        named = ", ".join(identity.unsafe_globals[:2])
        warnings.warn(
            f"{path}: opening {DESCRIPTIONS[identity.format]} that names Python callables ({named}...), trusted by "
            f"{TRUST_PICKLE_ENV}=1",
            UserWarning,
            stacklevel=2,
        )


def refuse_untrusted(path: str, identity: Identity) -> None:
    """A pickle is opened only when it can hold a module and the user trusts it, a torch.export archive when its
    pickles name no callable or the user trusts it; a UsageError saying why not."""
    if identity.format is Format.PT2:
        if identity.unsafe_globals and not trusts_pickles():
            named = ", ".join(identity.unsafe_globals[:2])
            raise UsageError(
                f"{path} holds pickles that name Python callables ({named}...), which torch.export.load would run: "
                f"set {TRUST_PICKLE_ENV}=1 if you trust the file"
            )
        return
    if identity.unsafe_globals == ():
        raise UsageError(
            f"{path} holds weights without an architecture (a state dict, torch.save(model.state_dict())): "
            "write a factory file that builds the model and loads them, and name it as path/file.py:factory"
        )
    if not trusts_pickles():
        named = ", ".join((identity.unsafe_globals or ())[:2]) or "the callables it names"
        raise UsageError(
            f"{path} is a pickled module (torch.save(model)): opening it runs code the file names ({named}...); "
            f"set {TRUST_PICKLE_ENV}=1 if you trust it, or save the model with torch.export or torch.jit"
        )


def check_file(path: str) -> None:
    """What a model file (named by a model file's suffix) can be refused for before torch is imported, with the
    messages opening it gives: bytes of no format its name allows (``sniff``: empty, a truncated archive, another
    format), an ONNX model whose graph cannot be used (``onnx_graph.check_file``), a legacy (non-zip) pickle not
    trusted (``refuse_untrusted``). A zip pickle's callables (which torch's weights-only rules tell), a torch.export
    archive's pickles and a TorchScript module's signature are checked when the file is opened."""
    try:
        with open(path, "rb") as stream:
            zipped = stream.read(len(ZIP_MAGIC)).startswith(ZIP_MAGIC)
            stream.seek(0)
            found = sniff(stream, path)
    except OSError:
        return  # said when the file is opened
    if found is Format.ONNX:
        onnx_graph.check_file(Path(path))
    elif found is Format.PICKLE and not zipped:
        refuse_untrusted(path, Identity(found, "", None))


def sniff_bytes(data: bytes, path: str) -> Format:
    """``sniff`` of a file's bytes already read."""
    return sniff(io.BytesIO(data), path)
