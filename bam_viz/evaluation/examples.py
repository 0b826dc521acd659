"""The explorer's example sentences, chosen by a stated rule on the movies dev split.

    python -m bam_viz examples --model bam-wc --out views/examples.json

Every dev sentence (ambiguous ones included) is scored at the model's trained setting: the mutual
information I[y; z | x] of its S prediction samples (the plug-in estimate: it ranks sentences, where
its bias, small against the differences between them, does not matter), the gap E[f(z)] - f(softmax)
in P(positive) against the deterministic pass (`bam_viz.inference.gaps`), and P(positive). Each sentence falls
in at most one category (`category`, the first that applies, in the order of CRITERIA), and in each
category the sentence of at most MAX_WORDS words with the largest mutual information is chosen
(`choose`): the sentences where attention uncertainty shows.
`RULE` says the same in words, and the written file records it beside the figures.

Each sentence is scored in a call of its own, with the generator seeded afresh, so that its
figures are exactly those of `model.explain(text, n_samples, seed, rng="torch")` (predict's stream; its
`mutual_information_plugin` and `gap_softmax`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bam_viz.core import metrics
from bam_viz.core.task import CLASSES, POSITIVE
from bam_viz.data import CLEAR_THRESHOLD, Snippet, load_split

MAX_WORDS = 30                # on a projector, a longer sentence does not read
CLEAR_MEAN = 2.0              # |human mean| at least this: raters called it strongly one way
SPLIT_STD = 1.5               # raters' std at least this: they disagree (6% of movies dev)
AGREED_STD = 1.0              # raters' std below this: they agree (68% of movies dev)
NEGATIONS = frozenset({"not", "no", "never", "nothing", "nobody", "none", "nowhere", "neither", "nor", "cannot"})
# Each category's condition in words, in the order they are tried: a sentence belongs to the first
# that it meets. `category` implements them.
CRITERIA = {
    "negated": "contains a negation word (" + ", ".join(sorted(NEGATIONS)) + ", or a word ending in n't) "
               f"and the raters' label is clear (|mean| > {CLEAR_THRESHOLD})",
    "clear": f"the raters' mean is strong (|mean| >= {CLEAR_MEAN}) and the model's P(positive) is on its side "
             "of 0.5",
    "mixed": f"the raters disagree (std >= {SPLIT_STD}) and their mean is not strong (|mean| < {CLEAR_MEAN})",
    "neutral": f"the raters agree (std < {AGREED_STD}) that it is neither (|mean| <= {CLEAR_THRESHOLD})",
}
CATEGORIES = ("clear", "mixed", "negated", "neutral")      # the order of the explorer's buttons
RULE = (
    f"Every sentence of the movies dev split (ambiguous ones included) of at most {MAX_WORDS} words is "
    "scored at the model's trained setting and falls in the first of these categories whose condition it "
    "meets: " + "; ".join(f"{c} = {CRITERIA[c]}" for c in CRITERIA) + ". In each category the sentence "
    "with the largest mutual information of its prediction samples is chosen; the default is the chosen "
    "sentence with the largest of all."
)
NOTE = ("texts quoted from the movies dev split of Hutto & Gilbert (2014), MIT licence: the only corpus "
        "text in the repository, a deliberate exception so that the explorer's examples work without the corpora")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


@dataclass(frozen=True)
class Scored:
    """One dev sentence and the model's figures on it."""

    snippet: Snippet
    mutual_information: float     # nats, of the S prediction samples
    gap_softmax: float            # E[f(z)] - f(softmax) in P(positive)
    p_positive: float             # E[f(z)]


def negated(text: str) -> bool:
    """Whether `text` contains a negation word (NEGATIONS, or a word ending in n't)."""
    words = _WORD.findall(text.lower().replace("\u2019", "'"))
    return any(w in NEGATIONS or w.endswith("n't") for w in words)


def category(s: Scored) -> str | None:
    """The first category of CRITERIA whose condition `s` meets, or None."""
    mean, std = s.snippet.mean, s.snippet.std
    if negated(s.snippet.text):
        return "negated" if abs(mean) > CLEAR_THRESHOLD else None
    if abs(mean) >= CLEAR_MEAN and (s.p_positive > 0.5) == (mean > 0):
        return "clear"
    if std >= SPLIT_STD and abs(mean) < CLEAR_MEAN:
        return "mixed"
    if abs(mean) <= CLEAR_THRESHOLD and std < AGREED_STD:
        return "neutral"
    return None


def choose(scored: list[Scored], max_words: int = MAX_WORDS) -> dict[str, Scored]:
    """Per category (in the order of CATEGORIES, those with a candidate), the sentence of at most
    `max_words` words with the largest mutual information; ties go to the earlier sentence."""
    best: dict[str, Scored] = {}
    for s in scored:
        c = category(s)
        if c is None or len(s.snippet.text.split()) > max_words:
            continue
        if c not in best or s.mutual_information > best[c].mutual_information:
            best[c] = s
    return {c: best[c] for c in CATEGORIES if c in best}


def from_probs(snippets: list[Snippet], sample_probs, softmax_probs) -> list[Scored]:
    """Scored sentences from (N, S, 2) sample probabilities and (N, 2) ones of the deterministic pass
    (CLASSES order)."""
    samples = np.asarray(sample_probs, dtype=np.float64)
    softmax = np.asarray(softmax_probs, dtype=np.float64)
    if samples.shape[:1] != (len(snippets),) or softmax.shape != (len(snippets), samples.shape[-1]):
        raise ValueError(f"{len(snippets)} snippets but probabilities {samples.shape} and {softmax.shape}")
    mi = metrics.mutual_information(samples)
    p = samples.mean(1)[:, POSITIVE]
    gap = p - softmax[:, POSITIVE]
    return [Scored(s, float(m), float(g), float(q)) for s, m, g, q in zip(snippets, mi, gap, p, strict=True)]


def score(model, snippets: list[Snippet], n_samples: int = 32, seed: int = 0) -> list[Scored]:
    """Each sentence scored by `model` at its trained setting, one call per sentence with the
    generator seeded with `seed`: the figures `model.explain(text, n_samples, seed, rng="torch")` gives."""
    from tqdm import tqdm

    samples, softmax = [], []
    for s in tqdm(snippets, desc=f"score {model.name}", unit="sent", file=sys.stderr, disable=None):
        samples.append(model.predict_samples([s.text], n_samples=n_samples, seed=seed)[0].double().numpy())
        softmax.append(model.predict_softmax([s.text])[0].double().numpy())
    return from_probs(snippets, np.stack(samples), np.stack(softmax))


def document(model_name: str, chosen: dict[str, Scored], n_sentences: int, n_samples: int, seed: int,
             trained_hyper: dict[str, float]) -> dict:
    """The examples file: the rule, the setting, and each chosen sentence (in the order of
    CATEGORIES) with the condition it met and its figures; `default` names the category of the
    one with the largest mutual information."""
    return {
        "note": NOTE,
        "rule": RULE,
        "corpus": "movies", "split": "dev", "sentences_scored": n_sentences,
        "model": model_name, "hyper": dict(trained_hyper), "n_samples": n_samples, "seed": seed,
        "default": max(chosen, key=lambda c: chosen[c].mutual_information) if chosen else None,
        "examples": [
            {"category": c, "criterion": CRITERIA[c], "text": s.snippet.text, "id": s.snippet.id,
             "human_mean": round(s.snippet.mean, 4), "human_std": round(s.snippet.std, 4),
             "mutual_information": s.mutual_information, "gap_softmax": s.gap_softmax, "p_positive": s.p_positive}
            for c, s in chosen.items()
        ],
    }


def build(model, data: str | Path | None = None, n_samples: int = 32, seed: int = 0) -> dict:
    """Score the movies dev split with `model`, choose by the rule, and return the examples file.
    The rule reads P(positive) against the raters' sentiment: `model` must predict the sentiment pair."""
    classes = tuple(getattr(model, "classes", CLASSES))
    if classes != CLASSES:
        raise ValueError(f"the explorer's examples are chosen on the rated movie reviews, by P(positive): "
                         f"{model.name} predicts {', '.join(classes)}, not {', '.join(CLASSES)}")
    snippets = load_split("movies", "dev", data, include_ambiguous=True)
    scored = score(model, snippets, n_samples, seed)
    return document(model.name, choose(scored), len(snippets), n_samples, seed, model.trained_hyper)


def write(doc: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path


# ---- an example that opens another model ---------------------------------------------------------
THREE_WAY_CLASS = "neutral"
THREE_WAY_RULE = (f"of the movies dev sentences of at most {MAX_WORDS} words whose raters' mean lies in the "
                  "neutral band [-0.5, 0.5], the one the three-class model gives the largest P(neutral) = E[f(z)]")


def three_way_example(model, data: str | Path | None = None, n_samples: int = 32, seed: int = 0) -> dict:
    """The explorer's example that opens a three-class model (negative / neutral / positive,
    `bam_viz.data.THREE_WAY`) on a sentence it calls neutral, by THREE_WAY_RULE, with its figures."""
    from bam_viz.data import THREE_WAY, three_way_label

    if tuple(model.classes) != THREE_WAY:
        raise ValueError(f"{model.name} predicts {', '.join(model.classes)}, not {', '.join(THREE_WAY)}")
    neutral = [s for s in load_split("movies", "dev", data, include_ambiguous=True)
               if three_way_label(s.mean) == THREE_WAY_CLASS and len(s.text.split()) <= MAX_WORDS]
    if not neutral:
        raise ValueError("no neutral movies dev sentence to choose from")
    t = THREE_WAY.index(THREE_WAY_CLASS)
    best = None
    for s in neutral:
        r = model.explain(s.text, n_samples, seed, target=THREE_WAY_CLASS, cache=False, rng="torch")   # as `score`
        key = (float(r.mc_probs[t]), r.mutual_information_plugin)
        if best is None or key > best[0]:
            best = (key, s, r)
    (p, mi), s, r = best
    return {"label": "three classes", "model": model.name, "target": THREE_WAY_CLASS, "criterion": THREE_WAY_RULE,
            "text": s.text, "id": s.id, "human_mean": round(s.mean, 4), "human_std": round(s.std, 4),
            "n_samples": n_samples, "seed": seed, "candidates": len(neutral), f"p_{THREE_WAY_CLASS}": p,
            "mutual_information": mi, "gap_softmax": r.gap_softmax}


def main(argv: list[str] | None = None) -> int:
    """`python -m bam_viz.evaluation.examples --three-way MODEL [--file views/examples.json]`: put the
    three-class example into the examples file (its `model_examples`), keeping the rest."""
    import argparse

    from bam_viz import zoo

    p = argparse.ArgumentParser(prog="python -m bam_viz.evaluation.examples")
    p.add_argument("--three-way", required=True, metavar="MODEL")
    p.add_argument("--file", default="views/examples.json")
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=None)
    args = p.parse_args(argv)
    doc = json.loads(Path(args.file).read_text(encoding="utf-8"))
    example = three_way_example(zoo.load_model(args.three_way), args.data, args.samples, args.seed)
    doc["model_examples"] = [example]
    print(f"wrote {write(doc, args.file)}: {example['text']} (P({THREE_WAY_CLASS}) {example['p_neutral']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
