"""`python -m bam_viz train` end to end on a slice of the data: it writes a loadable model and card."""

import json

import torch

from bam_viz.cli import main
from bam_viz.zoo import load


def test_train_writes_a_card_and_weights_that_load(tmp_path):
    assert main(["train", "--model", "bam-wc", "--limit", "48", "--epochs", "1", "--batch-size", "16",
                 "--attention", "shape_k=3", "--out", str(tmp_path)]) == 0
    card = json.loads((tmp_path / "bam-wc" / "card.json").read_text())
    assert card["training"]["steps"] == 3 and card["training"]["objective"] == "ELBO"
    # The --attention override is the trained value, and the card says so.
    assert card["trained_hyper"] == {"shape_k": 3.0, "beta": 1.0}
    assert card["config"]["attention"]["shape_k"] == 3.0 and "--attention shape_k=3" in card["command"]
    assert card["data"]["train_sentences"] == 48
    assert 0.0 <= card["dev_history"][0]["dev_softmax_accuracy"] <= 1.0
    model = load("bam-wc", root=tmp_path)
    # Something was learned: the head moved away from its initialisation for the same seed.
    torch.manual_seed(0)
    fresh = torch.nn.Linear(384, 2)
    assert not torch.allclose(model.head.weight, fresh.weight)
    assert model.predict(["Lovely."], n_samples=2).shape == (1, 2)


def test_soft_targets_reduce_to_hard_labels_when_raters_agree():
    from bam_viz.data import load_split
    from bam_viz.model import BamClassifier
    from bam_viz.train import loss_terms, soft_targets
    from bam_viz.zoo import RECIPES

    snippets = load_split("movies", "dev")[:6]
    soft = soft_targets(snippets)
    assert soft.shape == (6, 2) and torch.allclose(soft.sum(-1), torch.ones(6))
    assert all(abs(float(row[1]) - s.human_p_positive) < 1e-6 for row, s in zip(soft, snippets, strict=True))
    labels = torch.tensor([0, 1, 1, 0])
    one_hot = torch.nn.functional.one_hot(labels, 2).float()
    texts = ["Dull.", "Lovely.", "A joy.", "Awful, just awful."]
    for name in ("softmax", "categorical"):
        torch.manual_seed(0)
        model = BamClassifier(RECIPES[name]).eval()
        torch.nn.init.normal_(model.head.weight, std=0.5)
        ids, mask = model.tokenizer.batch(texts)
        with torch.no_grad():
            hard, _ = loss_terms(model, ids, mask, labels, torch.Generator().manual_seed(0))
            as_probs, _ = loss_terms(model, ids, mask, one_hot, torch.Generator().manual_seed(0))
            half, _ = loss_terms(model, ids, mask, torch.full((4, 2), 0.5), torch.Generator().manual_seed(0))
        torch.testing.assert_close(as_probs, hard)
        assert not torch.isclose(half, hard)      # the targets matter
