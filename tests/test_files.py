"""bam_viz/core/files.py: a file someone else put where the app looks is read only when it is a
regular file within its limit, and TOML's nesting is measured before tomllib parses it."""

from __future__ import annotations

import os
import tomllib

import pytest

from bam_viz.core import files
from bam_viz.core.files import FileRefused, file_stamp, read_regular, toml_too_deep

LIMIT = 16


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a named pipe, not a regular file"),
    (lambda path: path.symlink_to("/dev/zero"), "is a device, not a regular file"),
    (lambda path: path.mkdir(), "is a folder, not a regular file"),
    (lambda path: path.write_bytes(b"x" * 101), "is 101 bytes, over the 100 it may have"),
    (lambda path: path.symlink_to(path.parent / "nowhere"), "cannot be read (No such file or directory)"),
])
def test_anything_but_a_regular_file_within_the_limit_is_refused_unopened(tmp_path, monkeypatch, make, says):
    path = tmp_path / "x.toml"
    make(path)
    monkeypatch.setattr(os, "open", lambda *a, **k: pytest.fail("opened"))
    for read in (file_stamp, read_regular):
        with pytest.raises(FileRefused) as refused:
            read(path, 100)
        assert str(refused.value) == says


def test_a_pipe_put_in_a_files_place_after_its_stat_is_opened_without_blocking_and_refused(tmp_path, monkeypatch):
    path = tmp_path / "x.toml"
    os.mkfifo(path)
    monkeypatch.setattr(files, "file_stamp", lambda path, limit: None)        # the stat saw a regular file
    with pytest.raises(FileRefused, match="is a named pipe, not a regular file"):
        read_regular(path, 100)


def test_a_regular_file_is_read_whole_and_its_stamp_follows_its_changes(tmp_path):
    path = tmp_path / "x.toml"
    path.write_bytes(b"x" * 100)
    assert read_regular(path, 100) == b"x" * 100
    stamp = file_stamp(path, 100)
    assert stamp == file_stamp(path, 100)
    path.write_bytes(b"y" * 99)
    assert file_stamp(path, 100) != stamp


@pytest.mark.parametrize("source, line", [
    ("x = " + "[" * 5000 + "]" * 5000, 1),
    ("a = 1\nx = " + "{a = " * 5000 + "1" + "}" * 5000, 2),
    ("a." * 5000 + "a = 1", 1),
    ('"a".' * 5000 + "a = 1", 1),
    ("[" + "a." * 5000 + "a]", 1),
    ("x = " + "[" * (LIMIT + 1) + "]" * (LIMIT + 1), 1),
    ("a." * LIMIT + "a = 1", 1),
])
def test_nesting_past_the_limit_is_found_before_tomllib_recurses_or_slows(source, line):
    assert toml_too_deep(source, LIMIT) == line


def test_tomllib_itself_recurses_once_a_level():
    """Why the scan: tomllib raises RecursionError on 5,000 nested arrays, which no TOML error catches."""
    with pytest.raises(RecursionError):
        tomllib.loads("x = " + "[" * 5000 + "]" * 5000)


@pytest.mark.parametrize("source", [
    "x = " + "[" * LIMIT + "]" * LIMIT,
    "a." * (LIMIT - 1) + "a = 1",
    'x = "' + "[" * 40 + '"',
    "x = '" + "[" * 40 + "'",
    'x = "a\\"' + "[" * 40 + '"',
    "x = 'a\\'\ny = [[1]]",
    '# ' + "[" * 40 + "\nx = 1",
    'x = """\n' + "[" * 40 + '\n"""',
    'x = """a\\"""' + "[" * 40 + '"""',
    "x = '''" + "[" * 40 + "'''''",
    'x = ["""a"""", [[1]]]',
    'x = "' + "a." * 40 + '"\ny = 1.5\nz = 1979-05-27T07:32:00.999',
    "[[steps]]\n[steps.view]\na.b.c = 1\n[x]\ny = [1.5, 2.5, {a.b = 1}]",
])
def test_brackets_and_dots_in_strings_comments_and_values_nest_nothing(source):
    tomllib.loads(source)                                        # valid TOML, as tomllib reads it
    assert toml_too_deep(source, LIMIT) is None


@pytest.mark.parametrize("source", [
    'x = ["""a"""", ' + "[" * 20 + "]" * 21,
    "x = ['''a''''', " + "[" * 20 + "]" * 21,
    'x = ["a\\\\", ' + "[" * 20 + "]" * 21,
    "x = ['a\\', " + "[" * 20 + "]" * 21,
])
def test_brackets_after_a_string_that_ends_in_quotes_or_backslashes_are_counted(source):
    tomllib.loads(source)
    assert toml_too_deep(source, LIMIT) == 1
