"""`python -m bam_viz train` end to end on a slice of the data: it writes a loadable model and card."""

import json

import torch

from bam_viz.__main__ import main
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
    assert 0.0 <= card["dev_history"][0]["dev_mean_field_accuracy"] <= 1.0
    model = load("bam-wc", root=tmp_path)
    # Something was learned: the head moved away from its initialisation for the same seed.
    torch.manual_seed(0)
    fresh = torch.nn.Linear(384, 2)
    assert not torch.allclose(model.head.weight, fresh.weight)
    assert model.predict(["Lovely."], n_samples=2).shape == (1, 2)
