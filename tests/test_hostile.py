"""The hostile-input sweep: every surface a careless or hostile user, teacher or file can feed, with what
they feed it. Each input is accepted, refused in one clear line that names no path of the server's disk,
or it failed (an exception, a line over one, a server path, a dead link left live, a formula left to run).
A new surface joins by adding one function to SURFACES; the counts land in artifacts/hostile-sweep.json.

The surfaces' own test files check each refusal's exact words; this sweep holds them all to one rule.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import hostile_lessons
import hostile_links
import pytest
from app_pages import app_page

from bam_viz import zoo
from bam_viz.core.spreadsheet import safe_cell
from bam_viz.model_files import CheckpointError
from views import join, lesson_files, text

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
ACCEPTED, REFUSED, FAILED = "accepted", "refused", "failed"
COUNTS: dict[str, dict[str, int]] = {}
MARKUP = "<script>alert(1)</script>[a](javascript:alert(1))"


def _one_line(message: str, tmp: Path) -> str:
    """REFUSED when `message` is one clear line naming no path of the server's disk, else FAILED."""
    clear = message.strip() and "\n" not in message.strip()
    return REFUSED if clear and str(tmp) not in message and str(ROOT) not in message else FAILED


# ---- the surfaces: each (tmp_path) -> [(input, outcome, detail)] ----------------------------------------------
def lesson_file(tmp_path: Path) -> list[tuple]:
    """A teacher's lessons folder ($BAM_VIZ_LESSONS) holding each hostile file of tests/hostile_lessons.py."""
    good = (lesson_files.SHIPPED / "attention-random-variable.toml").read_text(encoding="utf-8")
    folder = hostile_lessons.hostile_folder(tmp_path / "class", good)
    lessons, problems = lesson_files.load_lessons(str(folder))
    out = []
    for name in hostile_lessons.CASES:
        lines = [p for p in problems if p.startswith(f"{folder.name}/{name}: ")]
        out.append((name, _one_line(lines[0], tmp_path) if len(lines) == 1 else FAILED, lines))
    read = any(lesson.id == "good" for lesson in lessons)
    out.append(("good.toml beside them", ACCEPTED if read else FAILED, [lesson.id for lesson in lessons]))
    return out


def lesson_link(tmp_path: Path) -> list[tuple]:
    """A lesson's Markdown links: a scheme other than http(s) or a relative path is shown as text."""
    out = [(link, REFUSED if text.safe_links(link) != link else FAILED, text.safe_links(link))
           for link in hostile_links.DEAD]
    return out + [(link, ACCEPTED if text.safe_links(link) == link else FAILED, "") for link in hostile_links.LIVE]


PUBLIC_URLS = ["http://" + "a" * 5000 + ".org", "javascript:alert(1)", "data:text/html,x", "ftp://host",
               "http://user@host", "http://host:99999", "http://[::1", "http://host/?q=1", "http://host/#f",
               MARKUP, "\x00", "   ", "http://ex\u00e4mple.org", "https://class.example.org/bam"]


def public_url(tmp_path: Path) -> list[tuple]:
    """$BAM_VIZ_PUBLIC_URL: a join link and its QR code made from it (or a note when none fits)."""
    out = []
    for value in PUBLIC_URLS:
        try:
            base, warning = join.server_base_url("localhost", 8501, public_url=value, lan=lambda: None)
            join.qr_png(join.join_link(base, "a" * 255, 30))
            out.append((value[:40], ACCEPTED if warning is None else _one_line(warning, tmp_path), warning))
        except Exception as err:  # noqa: BLE001 -- the sweep counts every failure
            out.append((value[:40], FAILED, repr(err)))
    return out


def _damage(root: Path) -> dict:
    """How a copied bam-wc folder is broken, by name (the folder's files before each)."""
    def replace(name, make):
        def damage(folder):
            (folder / name).unlink()
            make(folder / name)
        return damage

    def card(edit):
        def damage(folder):
            data = json.loads((folder / "card.json").read_text())
            edit(data)
            (folder / "card.json").write_text(json.dumps(data))
            zoo.write_folder_manifest(folder)
        return damage

    def classes(names):
        return lambda c: (c.__setitem__("classes", names), c["config"].__setitem__("classes", names))

    return {
        "card.json a folder": replace("card.json", Path.mkdir),
        "card.json a named pipe": replace("card.json", os.mkfifo),
        "card.json -> /dev/zero": replace("card.json", lambda p: p.symlink_to("/dev/zero")),
        "card.json not JSON": lambda f: (f / "card.json").write_text("{"),
        "card.json nested 100k": lambda f: (f / "card.json").write_text("[" * 100_000 + "]" * 100_000),
        "card.json a list": lambda f: (f / "card.json").write_text("[]"),
        "MANIFEST.json a folder": replace(zoo.MANIFEST, Path.mkdir),
        "model.safetensors -> /dev/zero": replace("model.safetensors", lambda p: p.symlink_to("/dev/zero")),
        "model.safetensors missing": lambda f: (f / "model.safetensors").unlink(),
        "model.safetensors truncated": lambda f: (f / "model.safetensors").write_bytes(
            (f / "model.safetensors").read_bytes()[:1000]),
        "weights_from ../outside": card(lambda c: c.__setitem__("weights_from", "../outside")),
        "weights_from /etc": card(lambda c: c.__setitem__("weights_from", "/etc")),
        "classes disagree with the head, one a link": card(classes(["negative", "neutral", "[p](https://x.org)"])),
        "classes with markup": card(classes([MARKUP, "=1+1"])),
        "lora_rank doubled": card(lambda c: c["config"].__setitem__("lora_rank", 16)),
        "an empty folder": lambda f: [p.unlink() for p in list(f.iterdir())],
    }


def model_folder(tmp_path: Path) -> list[tuple]:
    """A model folder of $BAM_VIZ_MODELS, broken one way each: loaded, and left out of the model lists."""
    out = []
    for i, (name, damage) in enumerate(_damage(tmp_path).items()):
        root = tmp_path / f"runs{i}"
        shutil.copytree(zoo.PRETRAINED / "bam-wc", root / "bam-wc")
        listed = f"{root.name}/bam-wc"                              # a zoo name is qualified by its parent
        try:
            damage(root / "bam-wc")
            zoo.load(path=root / "bam-wc")
            out.append((name, ACCEPTED, ""))
        except CheckpointError as err:
            os.environ[zoo.MODELS_ENV] = str(root)
            try:
                offered = listed in zoo.available_models()
            finally:
                del os.environ[zoo.MODELS_ENV]
            out.append((name, FAILED if offered else _one_line(str(err), tmp_path), str(err)))
        except Exception as err:  # noqa: BLE001
            out.append((name, FAILED, repr(err)))
    return out


CELLS = ["=1+1", '=HYPERLINK("https://example.org","x")', "+SUM(A1:A2)", "-2+3", "@SUM(1,1)", "\t=1", "\r=1",
         "nice -- movie", "a = b", "5", "", "'=already text"]


def csv_cell(tmp_path: Path) -> list[tuple]:
    """A class name, label or sentence written to a CSV: a cell a spreadsheet would run starts with '."""
    out = []
    for cell in CELLS:
        runs = cell.startswith(("=", "+", "-", "@", "\t", "\r"))
        safe = safe_cell(cell)
        out.append((repr(cell), (REFUSED if safe == "'" + cell else FAILED) if runs
                    else (ACCEPTED if safe == cell else FAILED), safe))
    return out


QUERIES = {
    "markup": MARKUP, "huge number": "1e309", "nan": "nan", "negative": "-1", "path": "../../etc/passwd",
    "long": "x" * 20_000, "nul": "\x00", "odd unicode": "\u202e\ud7ff\ufffe",
}
PAGES = {"views/explorer.py": list(lesson_files.PAGES["explorer"].params),
         "views/theory.py": list(lesson_files.PAGES["theory"].params),
         "views/corpus.py": list(lesson_files.PAGES["corpus"].params), "views/lessons.py": ["lesson", "step"]}


def page_query(tmp_path: Path) -> list[tuple]:
    """Every URL parameter of every page at once set to one hostile value: the page runs without an
    exception (a bad value is ignored or named in one line)."""
    out = []
    for page, keys in PAGES.items():
        for name, value in QUERIES.items():
            at = app_page(page, 300, **dict.fromkeys(keys, value)).run()
            errors = [e.value for e in at.exception]
            shown = [e.value for e in [*at.error, *at.warning]]
            outcome = FAILED if errors else ACCEPTED if not shown else \
                min((_one_line(s, tmp_path) for s in shown), key=[FAILED, REFUSED].index)
            out.append((f"{page} {name}", outcome, errors or shown))
    return out


SURFACES = [lesson_file, lesson_link, public_url, model_folder, csv_cell, page_query]


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    ARTIFACTS.mkdir(exist_ok=True)
    total = {k: sum(c.get(k, 0) for c in COUNTS.values()) for k in ("tried", ACCEPTED, REFUSED, FAILED)}
    (ARTIFACTS / "hostile-sweep.json").write_text(json.dumps({"surfaces": COUNTS, "total": total}, indent=2))


@pytest.mark.parametrize("surface", SURFACES, ids=lambda s: s.__name__)
def test_no_hostile_input_gets_through_or_takes_a_page_down(surface, tmp_path, monkeypatch):
    monkeypatch.delenv(zoo.MODELS_ENV, raising=False)
    results = surface(tmp_path)
    counts = {"tried": len(results)} | {k: sum(r[1] == k for r in results) for k in (ACCEPTED, REFUSED, FAILED)}
    COUNTS[surface.__name__] = counts
    assert results and counts[FAILED] == 0, [r for r in results if r[1] == FAILED]
