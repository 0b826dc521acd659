"""The explorer's examples: the rule of `bam_viz.evaluation.examples` on a small fake corpus, the subcommand
that writes the file, and the shipped views/examples.json against the model and the corpus."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import bam_viz
from bam_viz import cli, zoo
from bam_viz.data import Snippet, label_of, load_split, split_of
from bam_viz.evaluation import examples

SHIPPED = Path(__file__).resolve().parents[1] / "views" / "examples.json"
LONG = " ".join(["good"] * (examples.MAX_WORDS + 1))
# id: (raters' ratings, text, the P(positive) of the fake model's samples, alternating)
FAKE = {
    "clear": ([3, 3, 3, 2], "A superb film.", (0.6, 0.9)),
    "clear_less": ([3, 3, 3, 3], "A fine film.", (0.7, 0.8)),
    "clear_but_the_model_disagrees": ([-3, -3, -3, -3], "A dull film.", (0.55, 0.95)),
    "clear_but_too_long": ([4, 4, 4, 4], LONG, (0.1, 0.99)),
    "negated": ([2, 2, 1, 1], "It isn't bad at all.", (0.3, 0.7)),
    "negated_but_ambiguous": ([0, 0, 1, -1], "Not a film.", (0.05, 0.95)),
    "mixed": ([4, -4, 3, -2], "A glorious mess.", (0.4, 0.6)),
    "neutral": ([0, 0, 0, 1], "It runs two hours.", (0.45, 0.55)),
    "disagreeing_a_little": ([1, -1, 1, -1], "It is a film.", (0.02, 0.98)),
}


def snippet(id_: str, ratings: list[int], text: str) -> Snippet:
    mean = sum(ratings) / len(ratings)
    std = math.sqrt(sum((r - mean) ** 2 for r in ratings) / len(ratings))
    return Snippet("movies", id_, text, mean, tuple(ratings), std, label_of(mean), 0.5, "dev")


def fake_probs(pairs, n_samples: int = 4) -> np.ndarray:
    """(N, S, 2) samples alternating between the two values of P(positive) of each pair."""
    p = np.array([[pair[s % 2] for s in range(n_samples)] for pair in pairs])
    return np.stack([1 - p, p], -1)


class FakeModel:
    """Stands in for a bam_viz model: each text's samples alternate between two P(positive)."""

    name = "fake-model"
    trained_hyper = {"shape_k": 3.0}

    def __init__(self, pairs: dict[str, tuple[float, float]]):
        self.pairs = pairs

    def predict_samples(self, texts, n_samples=32, seed=0):
        return torch.tensor(fake_probs([self.pairs[t] for t in texts], n_samples))

    def predict_softmax(self, texts):
        p = torch.tensor([sum(self.pairs[t]) / 2 + 0.01 for t in texts], dtype=torch.float64)
        return torch.stack([1 - p, p], -1)


def test_the_rule_picks_the_largest_mutual_information_per_category():
    snippets = [snippet(id_, ratings, text) for id_, (ratings, text, _) in FAKE.items()]
    probs = fake_probs([pair for _, _, pair in FAKE.values()])
    scored = examples.from_probs(snippets, probs, probs.mean(1) - [0.01, -0.01])
    assert {s.snippet.id: examples.category(s) for s in scored} == {
        "clear": "clear", "clear_less": "clear", "clear_but_the_model_disagrees": None,
        "clear_but_too_long": "clear", "negated": "negated", "negated_but_ambiguous": None,
        "mixed": "mixed", "neutral": "neutral", "disagreeing_a_little": None,
    }
    chosen = examples.choose(scored)
    assert list(chosen) == list(examples.CATEGORIES)
    assert {c: s.snippet.id for c, s in chosen.items()} == {c: c for c in examples.CATEGORIES}
    s = chosen["negated"]
    assert s.mutual_information == pytest.approx(math.log(2) - (0.3 * -math.log(0.3) + 0.7 * -math.log(0.7)))
    assert s.gap_softmax == pytest.approx(-0.01) and s.p_positive == pytest.approx(0.5)
    doc = examples.document("fake-model", chosen, len(snippets), 4, 0, {"shape_k": 3.0})
    assert doc["default"] == "negated" == max(chosen, key=lambda c: chosen[c].mutual_information)
    assert [e["category"] for e in doc["examples"]] == list(examples.CATEGORIES)
    assert doc["rule"] == examples.RULE and all(e["criterion"] in doc["rule"] for e in doc["examples"])


@pytest.mark.parametrize("text, expected", [
    ("It isn't good.", True), ("It isn’t good.", True), ("Nothing works here.", True),
    ("You cannot look away.", True), ("Not once.", True),
    ("Notably good.", False), ("A nonstop, knotty thriller.", False), ("Nowadays films are long.", False),
])
def test_negation_words(text, expected):
    assert examples.negated(text) is expected


def _write_corpus(folder: Path) -> list[str]:
    """The FAKE sentences as a movies corpus in `folder`, under ids that the split rule puts in dev."""
    ids = [str(i) for i in range(1000) if split_of("movies", str(i)) == "dev"][: len(FAKE)]
    truth, ratings = [], []
    for id_, (r, text, _) in zip(ids, FAKE.values(), strict=True):
        s = snippet(id_, r, text)
        truth.append(f"{id_}\t{s.mean}\t{text}\n")
        ratings.append(f"{id_}\t{s.mean}\t{s.std}\t{list(r)}\n")
    (folder / "movieReviewSnippets_GroundTruth.txt").write_text("".join(truth))
    (folder / "movieReviewSnippets_anonDataRatings.txt").write_text("".join(ratings))
    return ids


def test_the_examples_subcommand_writes_the_file(tmp_path, monkeypatch, capsys):
    ids = _write_corpus(tmp_path)
    model = FakeModel({text: pair for _, text, pair in FAKE.values()})
    monkeypatch.setattr(zoo, "load_model", lambda name: model if name == "fake-model" else pytest.fail(name))
    out = tmp_path / "out" / "examples.json"
    assert cli.main(["examples", "--model", "fake-model", "--out", str(out), "--data", str(tmp_path),
                     "--samples", "4"]) == 0
    doc = json.loads(out.read_text())
    assert doc["model"] == "fake-model" and doc["n_samples"] == 4 and doc["seed"] == 0
    assert doc["sentences_scored"] == len(FAKE) and doc["hyper"] == {"shape_k": 3.0}
    by_id = dict(zip(ids, FAKE, strict=True))
    assert {e["category"]: by_id[e["id"]] for e in doc["examples"]} == {c: c for c in examples.CATEGORIES}
    assert doc["default"] == "negated" and "MIT licence" in doc["note"]
    assert "A glorious mess." in capsys.readouterr().out
    defaults = cli.build_parser().parse_args(["examples"])
    assert (defaults.model, defaults.out, defaults.samples, defaults.seed, defaults.data) == (
        "bam-wc", "views/examples.json", 32, 0, None)


def test_a_model_of_other_classes_is_refused_before_any_sentence_is_scored(tmp_path):
    _write_corpus(tmp_path)
    model = FakeModel({text: pair for _, text, pair in FAKE.values()})
    model.classes = ("sports", "politics", "science")
    with pytest.raises(ValueError, match="by P\\(positive\\): fake-model predicts sports, politics, science"):
        examples.build(model, tmp_path, n_samples=2)


# ---- the shipped file ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


def test_the_shipped_figures_are_what_explain_gives(shipped):
    model = bam_viz.load(shipped["model"])
    assert shipped["hyper"] == model.trained_hyper
    for e in shipped["examples"]:
        # The file's figures are in P(positive), whatever the model predicts for the sentence.
        r = model.explain(e["text"], shipped["n_samples"], seed=shipped["seed"], rng="torch").for_target("positive")
        assert r.mutual_information_plugin == pytest.approx(e["mutual_information"], abs=1e-4), e["category"]
        assert r.gap_softmax == pytest.approx(e["gap_softmax"], abs=1e-4), e["category"]
        assert float(r.mc_probs[r.classes.index("positive")]) == pytest.approx(e["p_positive"], abs=1e-4)


def test_the_shipped_file_follows_the_rule(shipped):
    assert shipped["rule"] == examples.RULE
    assert [e["category"] for e in shipped["examples"]] == list(examples.CATEGORIES)
    best = max(shipped["examples"], key=lambda e: e["mutual_information"])
    assert shipped["default"] == best["category"]
    for e in shipped["examples"]:
        s = examples.Scored(Snippet("movies", e["id"], e["text"], e["human_mean"], (), e["human_std"],
                                    label_of(e["human_mean"]), 0.5, "dev"),
                            e["mutual_information"], e["gap_softmax"], e["p_positive"])
        assert examples.category(s) == e["category"] and e["criterion"] == examples.CRITERIA[e["category"]]
        assert len(e["text"].split()) <= examples.MAX_WORDS
    assert "Hutto & Gilbert (2014), MIT licence" in shipped["note"]


def test_the_shipped_texts_are_the_corpus_sentences(shipped, corpus_dir):
    dev = {s.id: s for s in load_split("movies", "dev", corpus_dir, include_ambiguous=True)}
    assert shipped["sentences_scored"] == len(dev)
    for e in shipped["examples"]:
        s = dev[e["id"]]
        assert (s.text, round(s.mean, 4), round(s.std, 4)) == (e["text"], e["human_mean"], e["human_std"])


def test_the_explorer_reads_its_examples_from_the_file(shipped):
    from views import state

    assert state.EXAMPLES == {e["category"]: e["text"] for e in shipped["examples"]}
    assert state.DEFAULT_TEXT == state.EXAMPLES[shipped["default"]]
    for e in shipped["examples"]:
        assert f"MI {e['mutual_information']:.3f}" in state.EXAMPLE_HELP[e["category"]]
        assert f"E[f(z)] − f(softmax) {e['gap_softmax']:+.3f}" in state.EXAMPLE_HELP[e["category"]]


def test_the_three_class_example_reproduces_and_follows_its_rule(shipped):
    from bam_viz.data import three_way_label

    (example,) = shipped["model_examples"]
    model = bam_viz.load(example["model"])
    assert model.classes == ("negative", "neutral", "positive") and example["target"] == "neutral"
    dev = {s.id: s for s in load_split("movies", "dev", include_ambiguous=True)}
    s = dev[example["id"]]
    assert s.text == example["text"] and three_way_label(s.mean) == "neutral"
    assert len(s.text.split()) <= examples.MAX_WORDS
    r = model.explain(s.text, example["n_samples"], example["seed"], target="neutral", rng="torch")
    assert float(r.mc_probs[1]) == pytest.approx(example["p_neutral"], abs=1e-4)
    assert r.gap_softmax == pytest.approx(example["gap_softmax"], abs=1e-4)
