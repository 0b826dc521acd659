"""The README's Python runs as written, and where a line's comment is a Python value, the line gives it."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

from bam_viz.live import grid as live

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def _stated_value(line: str):
    """(expression, value) for `expr  # <a Python literal>`, else None."""
    code, sep, comment = line.partition("#")
    if not sep or not code.strip():
        return None
    try:
        value = ast.literal_eval(comment.strip())
        ast.parse(code.strip(), mode="eval")
    except (ValueError, SyntaxError):
        return None
    return code.strip(), value


def test_every_python_block_of_the_readme_runs_and_says_what_it_gives():
    blocks = python_blocks()
    assert blocks, "the README has no Python block"
    for block in blocks:
        namespace: dict = {}
        checked = 0
        for line in block.splitlines():
            exec(compile(line, str(README), "exec"), namespace)   # one line at a time: a failure names it
            stated = _stated_value(line)
            if stated is not None:
                assert eval(stated[0], namespace) == stated[1], line
                checked += 1
        assert checked >= 2                                    # available_models() and families.names()
    assert live.wait_idle(120)                                 # the block's LiveGrid finished in the background


def test_the_readme_imports_each_name_from_its_own_module():
    """A `from M import N` in the README names the module N is defined in, not an old path kept for
    code written against it (a re-export would hide which module a reader should open)."""
    imports = [(m, n.strip()) for block in python_blocks()
               for m, names in re.findall(r"^from (\S+) import (.+)$", block, flags=re.M) for n in names.split(",")]
    assert imports
    for module, name in imports:
        value = getattr(importlib.import_module(module), name)
        if not inspect.ismodule(value):
            assert value.__module__ == module, f"from {module} import {name}: defined in {value.__module__}"
