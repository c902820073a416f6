"""utilscope.files: JSON read plain or gzip-compressed, with one-line errors."""

from __future__ import annotations

import gzip

import pytest

from utilscope.errors import UsageError
from utilscope.files import read_json, write_json


def test_read_json_reads_plain_and_gzip_files_alike(tmp_path):
    data = {"layers": [{"name": "conv1", "time_ms": 0.5}]}
    plain = write_json(tmp_path / "run.json", data)
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_json(plain, "a run") == read_json(packed, "a run") == data


def test_read_json_names_what_is_missing_or_not_json(tmp_path):
    with pytest.raises(UsageError, match="no a run at"):
        read_json(tmp_path / "absent.json", "a run")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="is not JSON .*; expected a run"):
        read_json(tmp_path / "bad.json", "a run")
