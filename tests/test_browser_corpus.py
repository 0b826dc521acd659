"""The Corpus page in headless Debian chromium: brush the scatter with the mouse and the table follows
(its row count becomes the number of sentences inside the brushed ranges), and the page asks nothing
of any other host.

Fails (never skips) when chromium is missing. Screenshots land in artifacts/ (git-ignored).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bam_viz.evaluation import corpus
from bam_viz.evaluation.score import scorer as score

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"

pytestmark = pytest.mark.browser
MEASURE = "mutual_information"
COUNT = ".st-key-corpus_count"
SCATTER = "[class*='st-key-corpus_scatter_'] canvas, [class*='st-key-corpus_scatter_'] svg.marks"


def shown_count(page) -> int:
    """N from the caption above the table, "N sentences, …"."""
    text = page.locator(COUNT).inner_text()
    return int(re.match(r"\s*([\d,]+) sentences", text).group(1).replace(",", ""))


def grid_rows(page) -> int:
    """Rows of the table's data grid, from its ARIA row count (less the header row)."""
    grid = page.locator("[class*='st-key-corpus_table_'] [role=grid]").first
    return int(grid.get_attribute("aria-rowcount")) - 1


def open_corpus(browser, url: str, outside: list[str]):
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith((url, "data:", "blob:")) else outside.append(r.url))
    page.goto(f"{url}/corpus")
    page.locator(COUNT).wait_for(timeout=120_000)
    page.locator(SCATTER).first.wait_for(timeout=120_000)
    page.wait_for_timeout(1000)                     # vega-embed's first paint
    return page


def brushed_ranges(page) -> dict[str, tuple[float, float]]:
    """The ranges the page says it brushed ("Brushed: mutual information 0.01 to 0.05 · raters' std …")."""
    text = page.get_by_text(re.compile(r"^Brushed:")).inner_text()
    words = {"raters' std": "raters_std", **{v: k for k, v in corpus.MEASURES.items()}}
    out = {}
    for part in text.removeprefix("Brushed:").split("·"):
        found = re.match(r"\s*(.+?) (-?[\d.e+-]+) to (-?[\d.e+-]+)\s*$", part)
        out[words[found.group(1)]] = (float(found.group(2)), float(found.group(3)))
    return out


def count_inside(ranges: dict[str, tuple[float, float]], slack: float) -> int:
    """bam-wc's sentences inside `ranges`, each end moved out by `slack` of its value (the caption
    rounds to 4 significant digits): negative slack moves the ends in."""
    rows = corpus.with_keys(score.shipped_scores())
    rows = rows[rows["model"] == "bam-wc"]
    keep = rows["raters_std"].notna()
    for column, (lo, hi) in ranges.items():
        keep &= rows[column].between(lo - slack * abs(lo) - 1e-12, hi + slack * abs(hi) + 1e-12)
    return int(keep.sum())


def test_brushing_the_scatter_filters_the_table(server, browser):
    outside: list[str] = []
    page = open_corpus(browser, server, outside)
    try:
        before = shown_count(page)
        assert before == grid_rows(page) > 0
        box = page.locator(SCATTER).first.bounding_box()
        # A drag across the middle of the plot: an interval over both axes.
        x0, x1 = box["x"] + 0.3 * box["width"], box["x"] + 0.7 * box["width"]
        y0, y1 = box["y"] + 0.25 * box["height"], box["y"] + 0.75 * box["height"]
        page.mouse.move(x0, y0)
        page.mouse.down()
        for i in range(1, 11):
            page.mouse.move(x0 + (x1 - x0) * i / 10, y0 + (y1 - y0) * i / 10)
        page.mouse.up()
        page.wait_for_function("([sel, n]) => { const e = document.querySelector(sel); return e && "
                               "!e.innerText.trim().startsWith(n.toLocaleString('en-US') + ' sentences'); }",
                               arg=[COUNT, before], timeout=60_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "browser-corpus-brushed.png"), full_page=True)
        after = shown_count(page)
        assert 0 < after < before
        assert grid_rows(page) == after
        ranges = brushed_ranges(page)
        assert set(ranges) == {MEASURE, "raters_std"}
        assert count_inside(ranges, -1e-3) <= after <= count_inside(ranges, 1e-3)
        assert page.errors == []
    finally:
        page.close()
    assert outside == []


def test_the_page_asks_nothing_of_the_network(server, browser):
    """Every request the Corpus page makes goes to its own server: a classroom may have no internet."""
    outside: list[str] = []
    page = open_corpus(browser, server, outside)
    try:
        page.get_by_text("Score your own sentences").click()
        page.wait_for_timeout(1500)
        assert urlparse(page.url).path.endswith("/corpus")
    finally:
        page.close()
    assert outside == []
