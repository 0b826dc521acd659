"""Text as the pages write it: Markdown escaped so that it shows as typed, a token as a selectbox
option, and a link into the explorer. The library's strings are plain text; the pages escape them
where Streamlit renders Markdown (`st.markdown`, `st.caption`, `st.error`, `st.toast`, ...). Markdown
that is meant as Markdown but written by someone else (a teacher's lesson) goes through `safe_links`."""

from __future__ import annotations

import html
import logging
import re
from urllib.parse import quote, urlencode

from bam_viz.core.text import display_token

_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|$:~=")


def md_escape(text: str) -> str:
    """Backslash-escape Markdown (and Streamlit's `$` LaTeX, `:colour[]`) so text shows as typed."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


# A link in Markdown someone else wrote (a teacher's lesson) goes to the web or within the app: any other
# scheme is shown as text, since Streamlit keeps `data:` and its like live.
LINK_SCHEMES = ("http", "https")
# Where CommonMark starts a link's target: an inline link or image `](`, a reference definition `]:`,
# an autolink `<`. One target may follow on the next line.
_LINK_START = re.compile(r"\]\(|\]:|<")
# The start of a target up to its scheme's colon, in any of the spellings CommonMark decodes there:
# backslash escapes and character references (`&#58;`, `&colon;`), and the tabs a browser drops.
_TARGET = re.compile(r"[ \t]*\r?\n?[ \t]*<?([\w+.\-&#;\\\t :]{0,256})")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")          # CommonMark's escapable ASCII punctuation


def _target_scheme(markdown: str, at: int) -> str | None:
    """The scheme of the link target that starts at `at`, as a browser would read it (the URL standard
    drops tabs and newlines and strips leading controls and spaces), or None for a relative one."""
    raw = _TARGET.match(markdown, at).group(1)
    url = html.unescape(_ESCAPED.sub(r"\1", raw)).replace("\t", "").lstrip("".join(map(chr, range(33))))
    found = _SCHEME.match(url)
    return found.group(1).lower() if found else None


def safe_links(markdown: str) -> str:
    """`markdown` as written, but every link and image whose target is neither http(s) nor relative is
    shown as text: the bracket or angle that would open it is backslash-escaped."""
    out, last = [], 0
    for found in _LINK_START.finditer(markdown):
        start = before = found.start()
        while before and markdown[before - 1] == "\\":
            before -= 1
        if (start - before) % 2:                         # already escaped: not an opener
            continue
        if found.group() == "<" and not markdown[found.end():found.end() + 1].isalpha():
            continue                                     # an autolink's scheme follows its `<` at once
        scheme = _target_scheme(markdown, found.end())
        if scheme is not None and scheme not in LINK_SCHEMES:
            out += [markdown[last:start], "\\"]
            last = start
    return "".join(out) + markdown[last:]


def token_option(tokens: list[str], i: int) -> str:
    """A token as a selectbox option: index and visible text (Streamlit shows options as text)."""
    return f"{i}: {display_token(tokens[i])}"


def explorer_link(text: str, model: str | None) -> str:
    """The explorer (the app's default page) on `text` with `model`, as a link relative to the Corpus
    page: the parameters `views/state.py` reads (text, model), URL-encoded. `model` None leaves the
    explorer's default model."""
    query = {"text": text} | ({"model": model} if model else {})
    return "./?" + urlencode(query, quote_via=quote)


def model_error(name: str, err: BaseException) -> str:
    """Why the model `name` could not be loaded, as a page writes it, escaped: the zoo's one line
    (a CheckpointError names files relative to the model's zoo, never a path of the server's disk),
    or only the kind of any other error, whose text may hold such a path (the server's log has it)."""
    from bam_viz.zoo import CheckpointError

    if isinstance(err, CheckpointError):
        why = str(err)
    else:
        logging.getLogger(__name__).error("loading the model %r failed", name, exc_info=err)
        why = f"{type(err).__name__} (the server's log has the details)"
    return md_escape(f"Could not load the model “{name}”: {why}")


def refused_models_line(refused: dict[str, str]) -> str:
    """The models a list leaves out since they cannot be loaded (`bam_viz.zoo.refused_models`), each
    with why, escaped."""
    return "Not offered, as they cannot be loaded: " + "; ".join(
        f"**{md_escape(name)}** ({md_escape(why)})" for name, why in refused.items())
