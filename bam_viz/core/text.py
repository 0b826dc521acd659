"""How text from the tokenizer is shown: every invisible or reordering character made visible."""

from __future__ import annotations

import unicodedata


def display_token(token: str) -> str:
    """The token as visible text: control, format and separator characters become \\uXXXX.

    Zero-width spaces, bidi marks and control characters would otherwise be invisible or reorder
    their neighbours; an empty token would leave a blank label.
    """
    out = []
    for ch in token:
        if unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) or "\u2205"
