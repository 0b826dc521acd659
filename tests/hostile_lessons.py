"""A teacher's lessons folder as a careless or hostile user leaves it: each file with the one line the
Lessons page says of it (after "<folder>/<file>: "). tests/test_lessons.py reads them with
`load_lessons`, tests/test_lessons_page.py opens the page on them."""

from __future__ import annotations

import os
from pathlib import Path

from views import lesson_files as lf

HEAD = 'title = "t"\nsummary = "s"\n'
STEP = '[[steps]]\ntitle = "a"\ntext = "b"\nquestion = "c"\n[steps.view]\npage = "theory"\n'
TOO_DEEP = f"nests arrays or tables more than {lf.MAX_NESTING} deep (line 3): a lesson needs 4"
TOO_MANY = "steps: must be 1 to 30 [[steps]] tables, not 10000"


def _text(text: str):
    return lambda path: path.write_text(text, encoding="utf-8")


# file name -> (what makes it at a path, the start of its line)
CASES = {
    "deep.toml": (_text(HEAD + "x = " + "[" * 5000 + "]" * 5000 + "\n"), TOO_DEEP),
    "dotted.toml": (_text(HEAD + "a." * 5000 + "a = 1\n"), TOO_DEEP),
    "pipe.toml": (os.mkfifo, "is a named pipe, not a regular file"),
    "zero.toml": (lambda path: path.symlink_to("/dev/zero"), "is a device, not a regular file"),
    "folder.toml": (Path.mkdir, "is a folder, not a regular file"),
    "big.toml": (_text(HEAD + "#" * lf.MAX_BYTES), f"is {len(HEAD) + lf.MAX_BYTES:,} bytes, over the "
                                                    f"{lf.MAX_BYTES:,} it may have"),
    "steps.toml": (_text(HEAD + "[[steps]]\n" * 10_000), TOO_MANY),
    "inline.toml": (_text(HEAD + "steps = [" + "{}, " * 10_000 + "]\n"), TOO_MANY),
    "digits.toml": (_text(HEAD + "minutes = " + "9" * 5000 + "\n"),
                    "is not valid TOML: Exceeds the limit (4300 digits) for integer string conversion"),
    "long.toml": (_text(HEAD + STEP.replace('"theory"', '"' + "x" * 100_000 + '"')),
                  f"steps[1].view.page: {lf.quoted('x' * 100_000)} is not a page (the pages: explorer, theory, "
                  "corpus)"),
    "[a](javascript:alert(1)).toml": (_text("title = "), "is not valid TOML: Invalid value (at end of document)"),
}


def hostile_folder(folder: Path, good: str) -> Path:
    """`folder` with every file of CASES and good.toml, a lesson that reads (`good`)."""
    folder.mkdir()
    (folder / "good.toml").write_text(good, encoding="utf-8")
    for name, (make, _) in CASES.items():
        make(folder / name)
    return folder


def expected(folder: Path) -> list[str]:
    """The start of each line the page shows for `folder`, in the order of its files' names."""
    return [f"{folder.name}/{name}: {why}" for name, (_, why) in sorted(CASES.items())]
