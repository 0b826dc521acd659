"""The package's architecture, as rules per package (docs/design.md, "The layout").

Each unit of `bam_viz` is a subpackage or a top-level module, and the units have layers: every
import, at the top of a module or inside a function, points into its own unit or into a strictly
lower layer. Inside a unit modules import each other freely, but the whole module graph has no
cycles. A new subpackage or top-level module must be placed in a layer here and in the design notes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bam_viz import families

PACKAGE = Path(__file__).resolve().parents[1] / "bam_viz"

# Lowest first. A unit is a subpackage ("core") or a top-level module ("model"); "bam_viz" is the
# package's facade (__init__).
LAYERS = [
    {"core"},
    {"families", "data"},
    {"nn"},
    {"inference"},
    {"plots", "model", "model_files"},
    {"zoo"},
    {"live", "evaluation"},
    {"dataset", "theory"},
    {"train"},
    {"bench"},
    {"cli"},
    {"__main__", "bam_viz", "sweep", "charts"},   # the facade, and the two old import paths it keeps
]
LAYER = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    name = ".".join(p for p in parts if p != "__init__")
    return name or "bam_viz"


def unit(module: str) -> str:
    return module.split(".")[0]


def imports(path: Path) -> set[str]:
    """Every bam_viz module `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bam_viz")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bam_viz"):
            for a in node.names:         # from bam_viz.core import metrics -> bam_viz.core.metrics
                sub = f"{node.module}.{a.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else node.module)
    return {"bam_viz" if n == "bam_viz" else n.removeprefix("bam_viz.") for n in found}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `g`, or None."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(g.get(node, ())):
            if dep == node or dep not in g:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep] if dep in path else [node, dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(g):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_every_unit_has_a_layer():
    assert {unit(m) for m in graph()} == set(LAYER), "place new units in LAYERS (and in docs/design.md)"


def test_every_import_points_down_or_inside():
    upward = [(m, d) for m, deps in graph().items() for d in deps
              if unit(d) != unit(m) and LAYER[unit(d)] >= LAYER[unit(m)]]
    assert not upward, upward


def test_no_import_cycles():
    found = cycle(graph())
    assert found is None, found


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
    bad = tmp_path / "explain.py"
    bad.write_text("def f():\n    from bam_viz.model import BamClassifier\n")
    assert imports(bad) == {"model"} and LAYER["model"] >= LAYER["inference"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


DESIGN = PACKAGE.parent / "docs" / "design.md"


def design_section() -> str:
    text = DESIGN.read_text()
    start = text.index("## The layout")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def unit_edges() -> set[tuple[str, str]]:
    """Which unit imports which, `core` left out: every unit may use the foundations."""
    return {(unit(m), unit(d)) for m, deps in graph().items() for d in deps
            if unit(m) != unit(d) and unit(d) != "core"}


def drawn_edges(section: str) -> set[tuple[str, str]]:
    block = section.split("```mermaid", 1)[1].split("```", 1)[0]
    edges = set()
    for line in block.splitlines():
        if "-->" not in line:
            continue
        left, right = (side.split("&") for side in line.split("-->"))
        edges |= {(a.strip(), b.strip()) for a in left for b in right}
    return edges


def drawn_tree(section: str) -> set[str]:
    """The units the tree names: its entries indented by two spaces, one a line ("core/", "zoo.py")."""
    block = section.split("```text", 1)[1].split("```", 1)[0]
    entries = [line.split()[0] for line in block.splitlines() if line.startswith("  ") and line[2] != " "]
    return {"bam_viz" if e == "__init__.py" else e.removesuffix("/").removesuffix(".py") for e in entries}


def drawn_layers(section: str) -> list[set[str]]:
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    return [{cell.strip(" `") for cell in row.split("|")[2].split(",")} for row in rows]


def test_the_design_notes_picture_is_the_code():
    section = design_section()
    assert drawn_edges(section) == unit_edges(), "docs/design.md's graph is not the code's"
    assert drawn_tree(section) == set(LAYER), "docs/design.md's tree is not the package's"
    assert drawn_layers(section) == LAYERS, "docs/design.md's layer table is not LAYERS"


def test_no_module_is_over_500_lines():
    """A module that long mixes concerns: split it by what it is about (docs/design.md, "The layout")."""
    views = PACKAGE.parent / "views"
    long = {str(p.relative_to(PACKAGE.parent)): n for p in [*PACKAGE.rglob("*.py"), *views.rglob("*.py")]
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


# ---- a family's words and facts live in its class ------------------------------------------------
# Outside bam_viz/families/ no module names a family: it asks the registry or the family's attributes.
# The zoo's recipes name their families' models ("dirichlet", "categorical"); "softmax" is also the
# deterministic pass's name (LABELS["softmax"], the evaluation's "softmax" variant), so that name counts
# only where it is compared or looked up as a family.
ZOO_RECIPES = {"RECIPES", "SHARED_WEIGHTS"}
DETERMINISTIC = "softmax"


def python_family_literals(path: Path, names: set[str]) -> list[str]:
    """Where the Python module `path` names a family by a string literal: ["line: 'name'", ...]."""
    tree = ast.parse(path.read_text())
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    skip = set()
    if path == PACKAGE / "zoo.py":
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id in ZOO_RECIPES for t in targets):
                skip |= set(ast.walk(node))

    def as_family(node) -> bool:
        up = parent.get(node)
        if isinstance(up, (ast.Tuple, ast.List, ast.Set)):
            up = parent.get(up)
        looked_up = (isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and up.func.attr == "get"
                     and isinstance(up.func.value, ast.Name) and up.func.value.id == "families")
        return isinstance(up, ast.Compare) or looked_up or (isinstance(up, ast.keyword) and up.arg == "family")

    return [f"{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and node not in skip
            and (node.value != DETERMINISTIC or as_family(node))]


def js_family_literals(path: Path, names: set[str]) -> list[str]:
    """Where the JavaScript file `path` names a family by a string literal, comments left out."""
    text = re.sub(r"/\*.*?\*/|(?<![:\\])//[^\n]*", "", path.read_text(), flags=re.S)
    quoted = "|".join(re.escape(n) for n in sorted(names - {DETERMINISTIC}))
    soft = re.escape(DETERMINISTIC)
    pattern = (rf"[\"'`](?:{quoted})[\"'`]|[!=]==?\s*[\"'`]{soft}[\"'`]|[\"'`]{soft}[\"'`]\s*[!=]==?")
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {m.group()}" for m in re.finditer(pattern, text)]


def family_literals(root: Path) -> dict[str, list[str]]:
    names = set(families.names())
    found = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.js")]):
        if PACKAGE / "families" in path.parents or "node_modules" in path.parts:
            continue
        hits = (python_family_literals if path.suffix == ".py" else js_family_literals)(path, names)
        if hits:
            found[str(path.relative_to(PACKAGE.parent))] = hits
    return found


def test_no_module_outside_the_families_names_one():
    """A family's facts and words (`AttentionFamily.mean_pull`, `short_label`, ...) are its class's:
    a module that compares a result's family with a name, or keys a table by one, is a second home."""
    found = {**family_literals(PACKAGE), **family_literals(PACKAGE.parent / "views")}
    assert not found, found


def test_the_family_check_catches_a_literal(tmp_path):
    names = set(families.names())
    py = tmp_path / "captions.py"
    py.write_text('WORDS = {"weibull": "k shrinks"}\nif family == "softmax":\n    pass\n'
                  'label = LABELS["softmax"]\nfamilies.get("softmax")\n')
    assert python_family_literals(py, names) == ["1: 'weibull'", "2: 'softmax'", "5: 'softmax'"]
    js = tmp_path / "summary.js"
    js.write_text('// "weibull" in a comment\nif (h.family === "softmax") x = "lognormal";\nlabel(h, "softmax");\n')
    assert js_family_literals(js, names) == ['2: === "softmax"', '2: "lognormal"']
