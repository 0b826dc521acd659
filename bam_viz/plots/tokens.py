"""Tokens on the panels: their labels on a figure's axes, and which of them a long sentence shows.

Above MAX_TICK_TOKENS tokens (a tenth of the movies test reviews) the bars and maps show a window of
TOKEN_WINDOW: three maps across leave about 10 px per token for 24 of them, and 9 px labels then
stand apart (at 40 they overlap). The window is the first and last tokens ([CLS], which the
classifier reads and which takes a quarter of the attention in the middle layers, and [SEP]) and a run
of consecutive tokens between them. A run reads as a phrase of the sentence, and it does not depend
on the weights: choosing the keys with the most attention would hide exactly the small weights,
make every map look peaked, and change the tokens shown with every slider move. Rows and columns are
the same tokens and every cell is the real weight, so a row shown adds up to less than 1 (the rest
falls on keys outside the window); the captions say how much.
"""

from __future__ import annotations

import html

from bam_viz.core.text import display_token
from bam_viz.plots.kit import runs
from bam_viz.plots.style import MAX_TICK_TOKENS, TOKEN_WINDOW

__all__ = ["axis_labels", "clip", "shown_indices", "token_window", "window_around", "window_label",
           "window_starts", "window_text"]


def axis_labels(tokens: list[str]) -> list[str]:
    """Unique, HTML-escaped labels for plotly category axes: a repeated token becomes "3·the"."""
    seen: dict[str, int] = {}
    for t in tokens:
        seen[t] = seen.get(t, 0) + 1
    labels = []
    for i, t in enumerate(tokens):
        text = html.escape(display_token(t), quote=False)
        labels.append(f"{i}·{text}" if seen[t] > 1 else text)
    # Distinct tokens can still collide after escaping ("\u200b" typed literally vs the character).
    if len(set(labels)) < len(labels):
        labels = [f"{i}·{label}" for i, label in enumerate(labels)]
    return labels


def clip(i: int, n: int) -> int:
    """A token index kept inside a sentence of n tokens."""
    return min(max(int(i), 0), n - 1)


def window_starts(T: int) -> list[int]:
    """Where the window's run of consecutive tokens may start; none when every token is shown."""
    return list(range(1, T - TOKEN_WINDOW + 2)) if T > MAX_TICK_TOKENS else []


def window_around(T: int, query: int) -> int:
    """The start of the window with `query` in the middle of its run, as near as the ends allow."""
    return min(max(int(query) - (TOKEN_WINDOW - 2) // 2, 1), max(T - TOKEN_WINDOW + 1, 1))


def token_window(T: int, start: int) -> list[int]:
    """The indices shown of T tokens: all of them up to MAX_TICK_TOKENS, else the first, the
    `TOKEN_WINDOW - 2` consecutive ones from `start` (clamped) and the last."""
    if T <= MAX_TICK_TOKENS:
        return list(range(T))
    start = min(max(int(start), 1), T - TOKEN_WINDOW + 1)
    return [0, *range(start, start + TOKEN_WINDOW - 2), T - 1]


def window_label(T: int, start: int) -> str:
    """A window as its run of tokens, "41–62" (the first and last tokens are always shown)."""
    run = token_window(T, start)[1:-1]
    return f"{run[0]}–{run[-1]}"


def shown_indices(T: int, shown: list[int] | None, query: int = 0) -> list[int]:
    """The token indices a panel of a T-token sentence shows: `shown` checked, or the window
    around `query`."""
    if shown is None:
        return token_window(T, window_around(T, query))
    idx = [int(i) for i in shown]
    if not idx or len(set(idx)) < len(idx) or not all(0 <= i < T for i in idx):
        raise ValueError(f"shown must be distinct token indices from 0 to {T - 1}, not {shown!r}")
    return idx


def window_text(T: int, idx: list[int], noun: str = "tokens") -> str:
    """"24 of 128 tokens (0, 41–62 and 127)", or "" when every one of the T tokens is shown."""
    if len(idx) == T and idx == list(range(T)):
        return ""
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs(idx)]
    where = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"{len(idx)} of {T} {noun} ({where})"
