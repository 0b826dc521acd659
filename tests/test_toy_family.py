"""Adding a family is one class and one `register` call: a toy Gumbel-softmax (Concrete) family,
registered here, runs through the layer, the model and `explain()` end to end (docs/design.md,
"Adding a family"). Nothing else in the library is told about it."""

from __future__ import annotations

import pytest
import torch
from scipy import stats
from torch.distributions import RelaxedOneHotCategorical

from bam_viz import families
from bam_viz.families import AttentionFamily, HyperSpec
from bam_viz.families.sampling import masked_log_softmax, normalize_log, uniform
from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig


class Concrete(AttentionFamily):
    """w = softmax((log p + G) / tau), G ~ Gumbel(0, 1) (Maddison et al. 2017; Jang et al. 2017)."""

    name = "toy-concrete"
    label = "Gumbel-softmax (Concrete)"
    source = "Maddison et al. 2017"
    row_sliceable = True            # one uniform per cell
    hyper_specs = (HyperSpec("temperature", 1.0, 0.05, 10.0, "log", "temperature · Concrete τ",
                             "Smaller τ gives draws closer to one-hot."),)

    def sample(self, log_p, hyper, mask, generator, drawn_rows=None):
        gumbel = -torch.log(-torch.log(uniform(log_p.shape, log_p, generator, drawn_rows)))
        return normalize_log((log_p + gumbel) / hyper.temperature, mask)

    def posterior(self, scores, hyper, mask=None):
        return RelaxedOneHotCategorical(torch.tensor(hyper.temperature, dtype=scores.dtype),
                                        logits=masked_log_softmax(scores, mask))


@pytest.fixture(scope="module")
def concrete():
    family = families.register(Concrete())
    yield family
    families.unregister(Concrete.name)


def test_the_sampler_follows_its_torch_distribution(concrete):
    scores = torch.tensor([0.3, -1.0, 2.0, 0.0], dtype=torch.float64)
    hyper = concrete.hyper(temperature=0.7)
    n = 20_000
    ours = concrete.sample(scores.log_softmax(-1).expand(n, -1), hyper, None, torch.Generator().manual_seed(0))
    theirs = concrete.posterior(scores, hyper).sample((n,))
    for key in range(4):
        assert stats.ks_2samp(ours[:, key].numpy(), theirs[:, key].numpy()).pvalue > 1e-3


def test_a_registered_family_runs_end_to_end(concrete):
    assert "toy-concrete" in families.names()
    torch.manual_seed(0)
    config = ModelConfig("toy", AttentionConfig(Concrete.name, "constant", hyper={"temperature": 0.5}),
                         stochastic_layers=(4, 5))
    model = BamClassifier(config).eval()
    torch.nn.init.normal_(model.head.weight, std=0.5)
    assert model.hyper_names == ["temperature"] and model.trained_hyper == {"temperature": 0.5}

    r = model.explain("Not bad at all.", n_samples=6, seed=1, temperature=0.2)
    S, L, H, T = 6, model.n_layers, model.n_heads, len(r.tokens)
    assert r.sample_weights.shape == (S, L, H, T, T) and r.family == "toy-concrete"
    assert r.hyper == {"temperature": 0.2} and r.stochastic_layers == [4, 5]
    torch.testing.assert_close(r.sample_weights.sum(-1), torch.ones(S, L, H, T))
    assert r.spread[4:].min() > 1e-3 and r.spread[:4].max() < 1e-6       # random only where it was put
    assert r.key_densities(5, 0, 0, 1) is None                           # it declares no density
    assert r.prior_draws(5, 0).shape == (S, T, T)
    assert 0 <= r.mutual_information and torch.isfinite(r.sample_probs).all()
    # with predict()'s stream, explain() samples what predict() samples; the same seed gives the same picture
    torch.testing.assert_close(model.explain("Not bad at all.", n_samples=6, seed=1, rng="torch",
                                             temperature=0.2).sample_probs,
                               model.predict_samples([r.text], n_samples=S, seed=1, temperature=0.2)[0],
                               atol=1e-5, rtol=0)
    assert torch.equal(model.explain("Not bad at all.", 6, seed=1, temperature=0.2).sample_weights,
                       r.sample_weights)
    # the family's own validation guards its hyperparameters
    with pytest.raises(ValueError, match="unknown hyperparameters.*toy-concrete.*known: temperature"):
        model.predict(["fine"], shape_k=2.0)
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        model.explain("fine", temperature=-1.0)


def test_a_name_is_registered_once(concrete):
    with pytest.raises(ValueError, match="registered already"):
        families.register(Concrete())
