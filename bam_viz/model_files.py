"""A model folder's files, read with care before any tensor is: regular files of bounded size, paths
that stay in the folder's zoo, the weights' shapes against the model the card builds, and each
folder's verdict remembered until its files change.

A folder may be a teacher's or a user's (`$BAM_VIZ_MODELS`), so a card.json can be a folder, a
named pipe or a link to /dev/zero (read with `bam_viz.core.files`), a `weights_from` can point
anywhere, a head can disagree with the card's classes; each is one `CheckpointError` line that names
the file relative to the zoo the folder is in ("runs/card.json"), never a path of the server's disk.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

from bam_viz.core.files import FileRefused, file_stamp, read_regular

MAX_CARD_BYTES = 1 << 20            # the shipped cards are ~7 KB; a card's metrics grow by ~1 KB a corpus
MAX_MANIFEST_BYTES = 1 << 16        # two sha256 entries
MAX_VERDICTS = 256                  # folders' verdicts remembered (a line each)


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt or does not match its card. Its message is one line
    for a person (a wrapped library error's lines joined), so a page or the CLI can show it whole."""

    def __init__(self, message: str):
        super().__init__(" ".join(line.strip() for line in str(message).splitlines() if line.strip()))


def shown(path: Path, zoo: Path) -> str:
    """`path` as a message names it: relative to the zoo the user named ("bam-wc/card.json")."""
    try:
        return Path(os.path.relpath(path, zoo)).as_posix()
    except ValueError:                  # another drive (Windows)
        return Path(path).name


def _missing(path: Path, zoo: Path) -> CheckpointError:
    return CheckpointError(f"{shown(path, zoo)} is missing: a model folder holds card.json, "
                           "model.safetensors and MANIFEST.json")


def regular_file(path: Path, zoo: Path, limit: int = sys.maxsize) -> None:
    """Refuse `path` unless it is a regular file of at most `limit` bytes, judged from its metadata
    (`bam_viz.core.files`): a named pipe is never opened, /dev/zero never read."""
    if not os.path.exists(path):
        raise _missing(path, zoo)
    try:
        file_stamp(path, limit)
    except FileRefused as e:
        raise CheckpointError(f"{shown(path, zoo)} {e}") from None


def read_json(path: Path, zoo: Path, limit: int):
    """The JSON in `path`, a regular file of at most `limit` bytes."""
    if not os.path.exists(path):
        raise _missing(path, zoo)
    try:
        data = read_regular(path, limit)
    except FileRefused as e:
        raise CheckpointError(f"{shown(path, zoo)} {e}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{shown(path, zoo)} is not valid JSON: {e}") from None
    except RecursionError:
        raise CheckpointError(f"{shown(path, zoo)} is nested too deeply to be a {path.name}") from None


def inside(path: Path, zoo: Path, what: str) -> Path:
    """`path` resolved (links followed), refused unless it lies in `zoo`: a card names files by
    paths relative to its folder's parent, and none may lead elsewhere on the disk."""
    resolved, root = Path(path).resolve(), Path(zoo).resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise CheckpointError(f"{what} leaves the folder its model is in")
    return resolved


def header_shapes(path: Path, zoo: Path) -> dict[str, tuple[int, ...]]:
    """The shapes a safetensors file declares, from its header alone (safetensors also checks that
    the data covers them, so a truncated file is refused here, before it is hashed)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{shown(path, zoo)} cannot be read as safetensors: {e}") from None


def check_fit(shapes: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], trainable: set[str],
              classes: list[str], what: str) -> None:
    """Refuse weights that do not fit the model the card builds (`expected`: its state's shapes),
    before load_state_dict, whose shape error is three lines of torch: the head against the card's
    classes first (the likeliest edit), then every tensor, then what is foreign or missing."""
    def show(shape):
        return f"({', '.join(map(str, shape))})"

    head = shapes.get("head.weight")
    if head is not None and expected.get("head.weight") is not None and head[:1] != expected["head.weight"][:1]:
        raise CheckpointError(f"{what} has a head of {head[0]} classes, but the card names {len(classes)}: "
                              f"{', '.join(classes)}")
    misfits = [f"{k} is {show(s)}, the card's model has {show(expected[k])}" for k, s in shapes.items()
               if k in expected and tuple(expected[k]) != s]
    misfits += [f"{k} is no tensor of the card's model" for k in shapes if k not in expected]
    misfits += [f"{k} is missing" for k in sorted(trainable - set(shapes))]
    if misfits:
        more = f" (and {len(misfits) - 1} more)" if len(misfits) > 1 else ""
        raise CheckpointError(f"{what} does not fit its card: {misfits[0]}{more}")


def file_key(path: Path) -> tuple:
    """What says a file is unchanged: its path and stamp (device, inode, size, mtime_ns), or, for
    what is no regular file, what it is instead ("is a folder, not a regular file")."""
    try:
        return (str(path), *file_stamp(path, sys.maxsize))
    except (FileRefused, ValueError) as e:             # ValueError: a NUL in a path a card names
        return str(path), str(e)


class Refusals:
    """The one line that refused a load, by the keys (`file_key`) of the files it read: asked again
    for the same files, the load is refused from here, so a 2 GB weights file is hashed once rather
    than on every run of a page that tries it. Bounded: the oldest are forgotten first."""

    def __init__(self, size: int = MAX_VERDICTS):
        self.size, self.lines, self.lock = size, {}, threading.Lock()

    def get(self, key: tuple) -> str | None:
        return self.lines.get(key)

    def put(self, key: tuple, line: str) -> None:
        with self.lock:
            self.lines.pop(key, None)
            self.lines[key] = line
            while len(self.lines) > self.size:
                self.lines.pop(next(iter(self.lines)))
