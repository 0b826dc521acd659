"""Checks of what the public entry points take: texts, the number of samples, a seed. Each bad
input is a ValueError or TypeError whose message names the argument and what it must be, raised
before any tensor is made (never a torch, tokenizer or shape error from deep inside)."""

from __future__ import annotations

import numbers

MAX_SEED = 2**63 - 1             # torch.Generator.manual_seed takes a signed 64-bit integer


def check_text(text, name: str = "text") -> str:
    """`text` if it is a non-empty str of valid Unicode."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, not {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} is empty: type a sentence")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} is not valid Unicode: a lone surrogate at character {err.start}") from None
    return text


def check_texts(texts) -> list[str]:
    """A non-empty list (or tuple) of texts, each as `check_text` wants it."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of str: pass [text] for one")
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    if not texts:
        raise ValueError("texts is empty: pass at least one text")
    return [check_text(t, f"texts[{i}]") for i, t in enumerate(texts)]


def _integer(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} {value!r}")
    return int(value)


def check_n_samples(n_samples, upper: int | None = None) -> int:
    """An int of at least 1 (and at most `upper`, when given)."""
    n = _integer(n_samples, "n_samples")
    if n < 1:
        raise ValueError(f"n_samples must be at least 1, got {n}")
    if upper is not None and n > upper:
        raise ValueError(f"n_samples must be at most {upper}, got {n}")
    return n


def check_seed(seed) -> int:
    """An int in [0, 2**63 - 1]."""
    s = _integer(seed, "seed")
    if not 0 <= s <= MAX_SEED:
        raise ValueError(f"seed must be between 0 and 2**63 - 1, got {s}")
    return s
