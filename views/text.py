"""Text as the pages write it: Markdown escaped so that it shows as typed, a token as a selectbox
option, and a link into the explorer. The library's strings are plain text; the pages escape them
where Streamlit renders Markdown (`st.markdown`, `st.caption`, `st.error`, `st.toast`, ...)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from bam_viz.core.text import display_token

_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|$:~=")


def md_escape(text: str) -> str:
    """Backslash-escape Markdown (and Streamlit's `$` LaTeX, `:colour[]`) so text shows as typed."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def token_option(tokens: list[str], i: int) -> str:
    """A token as a selectbox option: index and visible text (Streamlit shows options as text)."""
    return f"{i}: {display_token(tokens[i])}"


def explorer_link(text: str, model: str | None) -> str:
    """The explorer (the app's default page) on `text` with `model`, as a link relative to the Corpus
    page: the parameters `views/state.py` reads (text, model), URL-encoded. `model` None leaves the
    explorer's default model."""
    query = {"text": text} | ({"model": model} if model else {})
    return "./?" + urlencode(query, quote_via=quote)
