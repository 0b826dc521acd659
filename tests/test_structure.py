"""The package's module graph has layers (docs/design.md): every import, at the top of a module
or inside a function, points to a strictly lower layer, so there are no cycles and no upward
imports. A new module must be placed in a layer here and in the design notes."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bam_viz"

# Lowest first. Names are relative to bam_viz; "bam_viz" is the package's facade (__init__).
LAYERS = [
    {"inputs", "labels", "wire"},
    {"task", "kl", "metrics", "device", "families.base", "families.sampling"},
    {"families.softmax", "families.weibull", "families.lognormal", "families.dirichlet", "families.categorical",
     "data", "cache"},
    {"families", "tables"},
    {"attention", "result"},
    {"encoder", "charts", "export", "gaps"},
    {"explain"},
    {"attribution", "posterior", "why"},
    {"model"},
    {"zoo", "predictors", "sweep"},
    {"frames"},
    {"scheduler"},
    {"evaluate", "train", "examples", "live", "score", "theory"},
    {"report", "corpus", "bench_theory"},
    {"bench"},
    {"cli"},
    {"__main__", "bam_viz"},
]
LAYER = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    name = ".".join(p for p in parts if p != "__init__")
    return name or "bam_viz"


def imports(path: Path) -> set[str]:
    """Every bam_viz module `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bam_viz")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bam_viz"):
            if node.module == "bam_viz":       # from bam_viz import families -> bam_viz.families
                found |= {f"bam_viz.{a.name}" for a in node.names}
            else:
                found.add(node.module)
    return {"bam_viz" if n == "bam_viz" else n.removeprefix("bam_viz.") for n in found}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer():
    assert set(graph()) == set(LAYER), "place new modules in LAYERS (and in docs/design.md)"


def test_every_import_points_down():
    upward = [(m, d) for m, deps in graph().items() for d in deps if d in LAYER and LAYER[d] >= LAYER[m]]
    assert not upward, upward


def test_the_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "explain.py"
    bad.write_text("def f():\n    from bam_viz.model import BamClassifier\n")
    assert imports(bad) == {"model"} and LAYER["model"] >= LAYER["explain"]
