"""views/text.py: the pages' text helpers, Markdown escaping, token options and explorer links."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from hostile_links import DEAD, LIVE

from views.text import explorer_link, md_escape, safe_links, token_option

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = ["[CLS]", "<script>alert(1)</script>", "a&b", "<b>", "the", "the", "\u200b", "\x07", "שלום",
           "[SEP]"]


def test_markdown_is_escaped_to_show_as_typed():
    assert md_escape("$x$ *a* :red[b]") == "\\$x\\$ \\*a\\* \\:red\\[b\\]"
    assert md_escape("<script>") == "\\<script\\>"


def test_a_token_option_is_its_index_and_visible_text():
    assert token_option(HOSTILE, 7) == "7: \\u0007"
    assert token_option(HOSTILE, 1) == "1: <script>alert(1)</script>"


@pytest.mark.parametrize("text", ["plain words", "a & b = c? #1 100%", "<b>bold</b> +plus+",
                                  "emoji 😍 and עברית", "line\nbreak\ttab"])
def test_the_explorer_link_carries_text_and_model(text):
    link = explorer_link(text, "bam-wc")
    url = urlparse(link)
    assert link.startswith("./?") and url.path == "./"
    assert parse_qs(url.query, keep_blank_values=True) == {"text": [text], "model": ["bam-wc"]}
    assert " " not in link and "\n" not in link
    assert parse_qs(urlparse(explorer_link(text, None)).query) == {"text": [text]}


@pytest.mark.parametrize("text", DEAD)
def test_a_link_to_another_scheme_is_shown_as_text(text):
    shown = safe_links(text)
    assert shown.replace("\\", "") == text.replace("\\", "")        # what it shows: the text as typed
    opener = "<" if text.startswith("<") else "]"
    at = shown.index("\\" + opener)                                  # its opener escaped: no link starts there
    assert (len(shown[:at]) - len(shown[:at].rstrip("\\"))) % 2 == 0
    assert safe_links(shown) == shown


@pytest.mark.parametrize("text", list(LIVE))
def test_an_http_relative_or_already_escaped_link_is_left_as_written(text):
    assert safe_links(text) == text


def test_every_error_a_page_shows_goes_through_the_escaping_path():
    """An exception's message can carry a user's text (a class name, a file's name, a URL value): a page
    shows it as `md_escape(str(err))` or through `model_error`, never raw in Markdown."""
    shown_raw = re.compile(r"st\.(?:error|warning|info|caption|markdown|success|toast)\((?!md_escape|model_error)"
                           r"[^\n]*\{(?:err|error|exc|e)\b")
    found = [f"{path.name}:{n}" for path in sorted((ROOT / "views").glob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if shown_raw.search(line)]
    assert found == []
    assert shown_raw.search('    st.info(f"{err}")') and not shown_raw.search("    st.info(md_escape(str(err)))")
