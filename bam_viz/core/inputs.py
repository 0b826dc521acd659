"""Checks of what the public entry points take: texts, the number of samples, a seed. Each bad
input is a ValueError or TypeError whose message names the argument and what it must be, raised
before any tensor is made (never a torch, tokenizer or shape error from deep inside)."""

from __future__ import annotations

import numbers

from bam_viz.core.budgets import MB, attention_bytes, env_megabytes

MAX_SEED = 2**63 - 1             # torch.Generator.manual_seed takes a signed 64-bit integer
# Past any memory budget at any length (one S-sample pass of 2 tokens holds S x 6 x 12 x 2 x 2 float32
# attention weights: 2.5 TB at this S): refused by every entry point before a budget is even asked, so
# that no size computation or message downstream meets an int of thousands of digits.
MAX_SAMPLES = 2**31 - 1
BUDGET_ENV = "BAM_VIZ_MAX_ATTENTION_MB"
DEFAULT_BUDGET_MB = 1024         # explain() at 128 tokens, 6 layers x 12 heads: up to 227 samples (the explorer: 64)


def shown(value, limit: int = 60) -> str:
    """repr(value) for an error message, cut to `limit` characters: an int of thousands of digits
    cannot even be printed (Python refuses the conversion with a ValueError of its own)."""
    try:
        text = repr(value)
    except ValueError:
        text = f"<an int of {value.bit_length()} bits>" if isinstance(value, int) else f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
        raise TypeError(f"{name} must be an int, not {type(value).__name__} {shown(value)}")
    return int(value)


def check_n_samples(n_samples, upper: int | None = None) -> int:
    """An int of at least 1 and at most `upper` (when given) and `MAX_SAMPLES`."""
    n = _integer(n_samples, "n_samples")
    if n < 1:
        raise ValueError(f"n_samples must be at least 1, got {shown(n)}")
    limit = MAX_SAMPLES if upper is None else min(upper, MAX_SAMPLES)
    if n > limit:
        raise ValueError(f"n_samples must be at most {limit}, got {shown(n)}")
    return n


def check_batch_size(batch_size) -> int:
    """An int of at least 1 (how many texts `predict_samples` / `predict_softmax` run at once)."""
    b = _integer(batch_size, "batch_size")
    if b < 1:
        raise ValueError(f"batch_size must be at least 1, got {shown(b)}")
    return b


def check_seed(seed) -> int:
    """An int in [0, 2**63 - 1]."""
    s = _integer(seed, "seed")
    if not 0 <= s <= MAX_SEED:
        raise ValueError(f"seed must be between 0 and 2**63 - 1, got {shown(s)}")
    return s


def check_attention_budget(n_samples: int, layers: int, heads: int, tokens: int) -> None:
    """Refuse, before anything is allocated, an explain() whose sampled attention weights (float32,
    S x L x H x T x T) would pass the budget ($BAM_VIZ_MAX_ATTENTION_MB, default 1024), saying how
    many samples fit at this length."""
    n_samples = check_n_samples(n_samples)
    budget_mb = env_megabytes(BUDGET_ENV, DEFAULT_BUDGET_MB)
    per_sample = attention_bytes(layers, heads, tokens)
    if n_samples * per_sample > budget_mb * MB:
        fit = int(budget_mb * MB // per_sample)
        raise ValueError(
            f"n_samples={n_samples} at {tokens} tokens would hold {n_samples * per_sample / 2**30:.1f} GB of "
            f"attention weights, over the {budget_mb:g} MB budget (${BUDGET_ENV}): at most {fit} samples "
            "fit at this length; use fewer samples or a shorter text")
