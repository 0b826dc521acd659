"""Reading a file that someone else put where the app looks (a teacher's lesson folder): within bounds.

A regular file of at most `limit` bytes, judged from its metadata before it is opened, so that a
named pipe never blocks a page and a link to /dev/zero is never read; opened without blocking and
checked again on its descriptor, in case a pipe took its place meanwhile. A refusal is a
`FileRefused` whose message is the rest of one line after the file's name ("is a named pipe, not a
regular file"), for the caller to name the file as its user knows it, never by the server's path.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a named pipe", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket"}
# What a scan of TOML steps over, strings (multi-line ones first, closed by three quotes and up to two
# more) and comments; and what it counts: the runs of brackets that open and close arrays and tables,
# the dots between a key's parts, and what ends a key (`=`, `,`, a line). Possessive quantifiers: an
# unclosed string is scanned once, never backtracked.
_TOML_TOKEN = re.compile(r'"""(?:[^"\\]++|\\[\s\S]|"(?!""))*+(?:"""""?"?)?'
                         r"|'''(?:[^']++|'(?!''))*+(?:''''?'?)?"
                         r'|"(?:[^"\\\n]++|\\.)*+"?'
                         r"|'[^'\n]*+'?|#[^\n]*+|(?P<open>[\[{]++)|(?P<close>[\]}]++)|(?P<dot>\.)|(?P<end>[=,\n])")


class FileRefused(ValueError):
    """A file left unread; the message says why, after the file's name."""


def _check(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"is {_KINDS.get(stat.S_IFMT(info.st_mode), 'not a file')}, not a regular file")
    if info.st_size > limit:
        raise FileRefused(f"is {info.st_size:,} bytes, over the {limit:,} it may have")


def _unreadable(err: OSError) -> FileRefused:
    return FileRefused(f"cannot be read ({err.strerror or type(err).__name__})")


def file_stamp(path: Path, limit: int) -> tuple[int, int, int, int]:
    """(device, inode, size, modification time in ns) of `path`, links followed: what changes when the
    file does. Only metadata is read; refused unless it is a regular file of at most `limit` bytes."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise _unreadable(err) from None
    _check(info, limit)
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; never more than `limit` + 1 read."""
    file_stamp(path, limit)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb") as file:
            _check(os.fstat(fd), limit)
            data = file.read(limit + 1)
    except OSError as err:
        raise _unreadable(err) from None
    if len(data) > limit:
        raise FileRefused(f"is over the {limit:,} bytes it may have")
    return data


def toml_too_deep(source: str, limit: int) -> int | None:
    """The line (from 1) where TOML first nests deeper than `limit`, or None: arrays and inline tables
    within each other, which `tomllib.loads` parses by recursion (5,000 levels raise RecursionError),
    or a dotted key of more than `limit` parts, which it parses in time quadratic in them (1.7 s at
    5,000). For before `tomllib.loads`."""
    depth = dots = 0
    for token in _TOML_TOKEN.finditer(source):
        kind = token.lastgroup
        if kind == "open":
            depth, dots = depth + len(token["open"]), 0
        elif kind == "close":
            depth, dots = max(depth - len(token["close"]), 0), 0
        elif kind == "dot":
            dots += 1
        elif kind == "end":
            dots = 0
        if depth > limit or dots >= limit:
            return source.count("\n", 0, token.start()) + 1
    return None
