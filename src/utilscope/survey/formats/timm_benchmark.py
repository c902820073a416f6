"""timm's inference benchmark tables (``benchmark-infer-PRECISION-LAYOUT-ptTORCH-cuCUDA-GPU[-dynamo].csv``, made
with timm's ``benchmark.py``): format ``timm-benchmark``.

A table's condition is read from its file name (precision, memory layout, torch and CUDA versions, the GPU,
``-dynamo``: compiled) and from each row (resolution, batch size); its GPU is a row of the spec table (found by
an alias such as ``5090``). Every row keeps the repository, path and commit a ``provenance.csv`` beside the file
gives (``data/public/timm-benchmark``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from utilscope.errors import UsageError
from utilscope.files import read_text
from utilscope.hardware import get_spec
from utilscope.survey.formats.table import TableFormat, csv_records, positive_number, register_format

FORMAT = "timm-benchmark"
COLUMNS = (
    "model",
    "infer_img_size",
    "infer_samples_per_sec",
    "infer_step_time",
    "infer_batch_size",
    "param_count",
    "infer_gmacs",
    "infer_macts",
)
NAME = re.compile(
    r"benchmark-infer-(?P<precision>amp|amp_bf16|bf16|fp16|fp32|tf32)-(?P<layout>nchw|nhwc)-pt(?P<torch>\d{3})"
    r"-(?P<device>cu\d{3}|cpu)-(?P<gpu>[A-Za-z0-9_]+?)(?P<dynamo>-dynamo)?\.csv"
)
NAME_FORM = "benchmark-infer-PRECISION-LAYOUT-ptTORCH-cuCUDA-GPU[-dynamo].csv"
LAYOUTS = {"nchw": "contiguous", "nhwc": "channels_last"}  # as the store names a memory format
PROVENANCE_FILE = "provenance.csv"


@dataclass(frozen=True)
class TableCondition:
    """What a table's file name says of every row of it."""

    gpu: str  # the spec table's key
    gpu_label: str  # the name the file gives the GPU
    precision: str  # amp | amp_bf16 | bf16 | ...
    memory_format: str  # contiguous | channels_last
    backend: str  # eager | compile (timm's ``--torchcompile``, "-dynamo")
    torch: str  # "2.9.1"
    cuda: str  # "13.0"


def torch_version(digits: str) -> str:
    """timm's ``pt291`` -> "2.9.1", ``pt240`` -> "2.4.0", ``pt113`` -> "1.13" (torch 1.x had two-digit minors)."""
    return f"1.{digits[1:]}" if digits[0] == "1" else ".".join(digits)


def condition_of(path: Path) -> TableCondition:
    """The condition a timm benchmark file's name gives; a one-line UsageError for any other name, a CPU's table,
    or a GPU the spec table does not know."""
    match = NAME.fullmatch(path.name)
    if match is None:
        raise UsageError(f"{path} is not named like a timm inference benchmark table ({NAME_FORM})")
    if match["device"] == "cpu":
        raise UsageError(f"{path} is a CPU's table: utilscope ingests GPU tables")
    try:
        spec = get_spec(match["gpu"])
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
    cuda = match["device"][2:]
    return TableCondition(
        spec.key,
        match["gpu"],
        match["precision"],
        LAYOUTS[match["layout"]],
        "compile" if match["dynamo"] else "eager",
        torch_version(match["torch"]),
        f"{cuda[:2]}.{cuda[2:]}",
    )


def read_rows(path: Path, text: str | None = None) -> list[dict]:
    """The table's rows (``text``: its content, else read), checked: every column of ``COLUMNS`` present, a model
    name, positive resolution, batch size, throughput and step time (params, GMACs and activations may be empty).
    One line naming the file (and row) for anything else."""
    text = read_text(path, "timm benchmark table") if text is None else text
    rows = []
    for number, record in enumerate(csv_records(path, text, "timm inference benchmark table", COLUMNS), start=1):
        if None in record or not (record["model"] or "").strip():
            raise UsageError(f"{path} row {number}: {'no model name' if None not in record else 'extra cells'}")
        rows.append(
            {
                "source_row": number,
                "model": f"timm:{record['model'].strip()}",
                "resolution": positive_number(record["infer_img_size"], path, number, "infer_img_size", integer=True),
                "batch": positive_number(record["infer_batch_size"], path, number, "infer_batch_size", integer=True),
                "samples_per_s": positive_number(
                    record["infer_samples_per_sec"], path, number, "infer_samples_per_sec"
                ),
                "step_time_ms": positive_number(record["infer_step_time"], path, number, "infer_step_time"),
                **{
                    name: positive_number(record[column], path, number, column, optional=True)
                    for name, column in (
                        ("params_m", "param_count"),
                        ("gmacs", "infer_gmacs"),
                        ("macts_m", "infer_macts"),
                    )
                },
            }
        )
    if not rows:
        raise UsageError(f"{path} is a timm inference benchmark table without rows")
    return rows


def provenance(path: Path, sha256: str) -> dict:
    """Repository, path and commit of ``path`` from the ``provenance.csv`` beside it, when it lists the file with
    this content; else empty (a table of unknown origin keeps its name and SHA-256 only)."""
    listing = path.parent / PROVENANCE_FILE
    if not listing.is_file():
        return {"repository": "", "source_path": "", "source_commit": ""}
    for entry in csv.DictReader(io.StringIO(read_text(listing, "provenance list"))):
        if entry.get("file") == path.name and entry.get("sha256") == sha256:
            return {
                "repository": entry.get("repository", ""),
                "source_path": entry.get("path", ""),
                "source_commit": entry.get("last_changed_commit", ""),
            }
    return {"repository": "", "source_path": "", "source_commit": ""}


def read(path: Path, text: str, sha256: str) -> list[dict]:
    """The file's rows, each with the condition its name gives (``condition_of``) and its provenance."""
    condition = condition_of(path)
    source = provenance(path, sha256)
    return [{**source, **asdict(condition), **row} for row in read_rows(path, text)]


register_format(
    TableFormat(
        FORMAT, "timm's benchmark-infer-*.csv (those utilscope cites: data/public/timm-benchmark)", read, condition_of
    )
)
