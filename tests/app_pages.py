"""What the AppTest files share: a page of the whole app opened at a query string, and the check
that a run raised nothing and showed no error."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "app.py"


def app_page(page: str, timeout: float, **query) -> AppTest:
    """`app.py` at `page` (e.g. "views/corpus.py") with the URL's `query`; not run yet."""
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page)
    return at


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def as_shown(markdown: str) -> str:
    """Markdown a page escaped (`views.text.md_escape`) as the reader sees it: each `\\x` as `x`."""
    return re.sub(r"\\(.)", r"\1", markdown)
