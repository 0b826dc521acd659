"""Draws made from uniforms (`bam_viz.families.sampling.UniformNoise`), what the exported frame graph and
the browser make: each has the distribution it stands for (checked against SciPy), and a family's
sampler gives the same weights with a hyperparameter as a float or as a graph's tensor."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import special, stats

from bam_viz import families
from bam_viz.families.sampling import GivenNoise, PortableNoise, categorical_sample, draw, log_gamma_rsample

N = 200_000
LIKE = torch.zeros((), dtype=torch.float32)


def test_normals_are_standard_normal():
    z = draw(torch.randn, (N,), LIKE, PortableNoise(3)).double().numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert np.isfinite(z).all()


@pytest.mark.parametrize("alpha", [1.0, 1.2, 3.0, 40.0])
def test_gamma_draws_follow_scipys_gamma(alpha):
    noise = PortableNoise(int(alpha * 1000))
    g = noise.standard_gamma(torch.full((N,), alpha)).double().numpy()
    assert stats.kstest(g, stats.gamma(alpha).cdf).pvalue > 1e-3
    assert noise.shapes == [(2 * noise.PROPOSALS, N)]


@pytest.mark.parametrize("alpha", [1e-3, 0.3])
def test_boosted_small_alpha_gamma_draws_follow_scipys_gamma(alpha):
    """log_gamma_rsample boosts alpha < 1 by one (Marsaglia & Tsang, sec. 6): its log draws are
    finite and the draws have the Gamma(alpha) distribution, tiny alpha included."""
    log_g = log_gamma_rsample(torch.full((N,), alpha).log(), PortableNoise(11)).double().numpy()
    assert np.isfinite(log_g).all()
    # the CDF at each draw, from log x where x underflows: P(X <= x) = x^a / Gamma(a + 1) for tiny x
    small = log_g < -30
    pit = np.where(small, np.exp(alpha * np.minimum(log_g, -30) - special.gammaln(alpha + 1)),
                   stats.gamma(alpha).cdf(np.exp(np.maximum(log_g, -30))))
    assert stats.kstest(pit, "uniform").pvalue > 1e-3


def test_categorical_draws_have_their_probabilities():
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    z = categorical_sample(p.log().expand(N, 4), PortableNoise(5))
    assert torch.equal(z.sum(-1), torch.ones(N))
    counts = z.sum(0).double().numpy()
    expected = p.double().numpy()
    assert stats.chisquare(counts, N * expected / expected.sum()).pvalue > 1e-3


@pytest.mark.parametrize("family", ["weibull", "lognormal", "dirichlet"])
def test_a_tensor_hyperparameter_gives_the_floats_weights(family):
    """The graph's hyperparameter is a tensor input; Weibull then leaves out Gamma(1 + 1/k), which the
    normalisation removes: the weights agree within float32 rounding."""
    from bam_viz.inference.graph import GraphHyper

    fam = families.get(family)
    hyper = fam.hyper()
    name = [s.name for s in fam.hyper_specs if not s.prior_only][0]
    value = hyper[name] * 0.5
    log_p = torch.randn(3, 2, 5, 5, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    as_float = fam.sample(log_p, hyper.replace(**{name: value}), None, PortableNoise(9))
    as_tensor = fam.sample(log_p, GraphHyper(hyper, {name: torch.tensor(value)}), None, PortableNoise(9))
    torch.testing.assert_close(as_tensor, as_float, rtol=0, atol=2e-6)


def test_given_noise_answers_in_order_and_refuses_a_wrong_shape():
    u = [torch.full((2, 3), 0.25), torch.full((4,), 0.5)]
    noise = GivenNoise(u)
    assert torch.equal(draw(torch.rand, (2, 3), LIKE, noise), u[0])
    with pytest.raises(RuntimeError, match="draw 2 has shape"):
        draw(torch.rand, (5,), LIKE, noise)
    one = GivenNoise(u[:1])
    draw(torch.rand, (2, 3), LIKE, one)
    with pytest.raises(RuntimeError, match="asks for draw 2, but 1 were given"):
        draw(torch.rand, (2, 3), LIKE, one)
