"""utilscope.files: the one rule for paths (checked before the work, one plain line naming the file and what was
expected) and JSON read plain or gzip-compressed."""

from __future__ import annotations

import errno
import gzip
import os

import pytest

from utilscope import files
from utilscope.errors import UsageError
from utilscope.files import (
    check_input_file,
    check_output_file,
    check_output_folder,
    os_error,
    read_json,
    read_text,
    write_atomically,
    write_json,
)


def _message(fn, *args) -> str:
    with pytest.raises(UsageError) as info:
        fn(*args)
    message = str(info.value)
    assert "\n" not in message and "Errno" not in message, message
    return message


@pytest.fixture()
def no_permission(monkeypatch):
    """``os.access`` answers no for the paths added to the returned set (root may read and write anything, so the
    permission checks are exercised this way; the bad-input suite runs them without root's rights)."""
    denied: set[str] = set()
    access = os.access
    monkeypatch.setattr(files.os, "access", lambda path, mode: str(path) not in denied and access(path, mode))
    return denied


def test_read_json_reads_plain_and_gzip_files_alike(tmp_path):
    data = {"layers": [{"name": "conv1", "time_ms": 0.5}]}
    plain = write_json(tmp_path / "run.json", data)
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_json(plain, "run") == read_json(packed, "run") == data
    marked = tmp_path / "marked.json"  # a leading byte-order mark (a spreadsheet's or an editor's) is not text
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_json(marked, "run") == data


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b"", "is empty, expected the run"),
        (b"  \n", "is empty, expected the run"),
        (b"SQLite format 3\x00" + bytes(100), "is a SQLite database, expected the run"),
        (b"\xff\xfe\x00\x81", "is not a text file (binary at byte 0), expected the run"),
        (b'{"a": "\x00"}', "is not a text file (binary at byte 7), expected the run"),
        (b"{", "is not JSON (Expecting property name enclosed in double quotes, line 1), expected the run"),
    ],
)
def test_a_file_that_is_not_json_text_is_one_line_naming_it_and_what_was_expected(tmp_path, content, phrase):
    path = tmp_path / "run.json"
    path.write_bytes(content)
    assert _message(read_json, path, "run") == f"{path} {phrase}"


def test_a_gz_file_that_is_not_gzip_is_said_so(tmp_path):
    (tmp_path / "run.json.gz").write_text("{}")
    assert "is not a gzip file, expected the run" in _message(read_json, tmp_path / "run.json.gz", "run")


def test_a_file_to_read_exists_is_a_file_and_can_be_read(tmp_path, no_permission):
    assert (
        _message(check_input_file, tmp_path / "absent.json", "run") == f"no such file: {tmp_path}/absent.json (the run)"
    )
    assert _message(read_text, tmp_path / "no" / "a.json", "run") == f"no such file: {tmp_path}/no/a.json (the run)"
    assert _message(read_text, tmp_path, "run") == f"{tmp_path} is a folder, expected a file (the run)"
    assert _message(read_text, "", "run") == "empty path given for the run"
    (tmp_path / "text.txt").write_text("hello")
    assert _message(read_text, tmp_path / "text.txt" / "a.json", "run").startswith("no such file")
    no_permission.add(str(tmp_path / "text.txt"))
    assert (
        _message(read_text, tmp_path / "text.txt", "run")
        == f"cannot read {tmp_path}/text.txt: permission denied (the run)"
    )


def test_a_file_to_write_is_checked_and_nothing_is_created(tmp_path, no_permission):
    (tmp_path / "text.txt").write_text("hello")
    (tmp_path / "sub.json").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert check_output_file(tmp_path / "new" / "deeper" / "out.json", "table", (".json",)).name == "out.json"
    cases = [
        ("", "empty path given for the table"),
        (tmp_path / "out.csv", "the table must be a .json file, got"),
        (tmp_path / "sub.json", f"{tmp_path}/sub.json is a folder; give a file path (the table)"),
        (
            tmp_path / "text.txt" / "a" / "out.json",
            f"cannot write {tmp_path}/text.txt/a/out.json: {tmp_path}/text.txt is not a folder (the table)",
        ),
    ]
    for path, message in cases:
        assert _message(check_output_file, path, "table", (".json",)).startswith(message)
    no_permission.update({str(tmp_path / "text.txt"), str(tmp_path / "sub.json")})
    assert _message(check_output_file, tmp_path / "text.txt", "table") == (
        f"cannot write {tmp_path}/text.txt: permission denied (the table)"
    )
    assert _message(check_output_file, tmp_path / "sub.json" / "x" / "out.json", "table") == (
        f"cannot write {tmp_path}/sub.json/x/out.json: permission denied on the folder {tmp_path}/sub.json (the table)"
    )
    assert sorted(tmp_path.rglob("*")) == before


def test_a_folder_to_write_is_checked_and_nothing_is_created(tmp_path, no_permission):
    (tmp_path / "text.txt").write_text("hello")
    before = sorted(tmp_path.rglob("*"))
    assert check_output_folder(tmp_path / "new" / "report", "report folder") == tmp_path / "new" / "report"
    assert _message(check_output_folder, "", "report folder") == "empty path given for the report folder"
    assert "report folder" in _message(check_output_folder, tmp_path / "text.txt", "report folder")
    assert "text.txt is not a folder" in _message(check_output_folder, tmp_path / "text.txt" / "r", "report folder")
    no_permission.add(str(tmp_path))
    assert _message(check_output_folder, tmp_path, "report folder") == (
        f"cannot write {tmp_path}: permission denied (the report folder)"
    )
    assert sorted(tmp_path.rglob("*")) == before


def test_write_atomically_says_plainly_why_it_cannot_write_and_leaves_no_partial_file(tmp_path):
    (tmp_path / "text.txt").write_text("hello")
    message = _message(write_atomically, tmp_path / "text.txt" / "out.json", "{}", "table")
    assert message == f"cannot write {tmp_path}/text.txt/out.json: a part of the path is not a folder (the table)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.txt"]


def test_a_folder_the_file_system_refuses_is_one_line_naming_it_and_nothing_is_created(tmp_path):
    (tmp_path / "text.txt").write_text("hello")
    message = _message(files.make_folder, tmp_path / "text.txt" / "report", "report folder")
    expected = f"cannot create {tmp_path}/text.txt/report: a part of the path is not a folder (the report folder)"
    assert message == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.txt"]
    assert files.make_folder(tmp_path / "a" / "b", "report folder").is_dir()


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (errno.ENOENT, "no such file"),
        (errno.EACCES, "permission denied"),
        (errno.EISDIR, "it is a folder"),
        (errno.ENOSPC, "no space left on the device"),
        (errno.EIO, "input/output error"),
    ],
)
def test_os_errors_are_said_in_plain_words(code, reason):
    exc = OSError(code, os.strerror(code), "x.json")
    assert str(os_error(exc, "x.json", "read", "table")) == f"cannot read x.json: {reason} (the table)"
