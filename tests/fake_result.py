"""A synthetic `ExplainResult` with the shapes and constraints of a real one, for chart tests, and a
real model with a random K-class head (`k_class_model`).

Weights are drawn from the same distributions the families use (torch.distributions), rows sum
to 1, and the parameter dictionaries carry the keys documented in `bam_viz.inference.result`. As in the shipped
models: "categorical" is stochastic in its top layer only and draws from its prior p(z|x) itself
(prior and posterior panels coincide); "mc-dropout" is the softmax family made random by dropout on
the weights in every layer (rows then need not sum to 1), with no prior (its prior panels repeat the
posterior). KL is zero where a family learns no prior.

The network f is faked as one whose logit is linear in the drawn attention: sample s has logit l_s,
so f(E[w]) is the sigmoid of the mean logit m and f at the mean without sample s the sigmoid of
(S m - l_s) / (S - 1); the deterministic pass f(softmax) is P(positive) = 0.7. Where no attention
weight is drawn (mc-dropout, softmax) f(E[w]) is the deterministic pass and there are no
leave-one-out values,
as in `explain` (`bam_viz.inference.gaps`). `posterior_softmax_weights` is the result's own mean of the samples.
"""

from __future__ import annotations

import math

import torch
from torch.distributions import Categorical, Dirichlet, Gamma, LogNormal, Weibull

from bam_viz import families
from bam_viz.inference.result import ExplainResult

WORDS = ["the", "film", "<b>is</b>", "not", "bad", "&", "the", "plot", "ends", "well"]
HYPER = {
    "weibull": {"shape_k": 10.0, "beta": 1.0},
    "lognormal": {"sigma": 0.3},
    "dirichlet": {"concentration": 20.0},
    "categorical": {},
    "softmax": {},
    "mc-dropout": {},
}
DROPOUT = 0.1


def fake_tokens(T: int) -> list[str]:
    """[CLS] first, [SEP] last; repeats ("the") and HTML-looking tokens included once T allows."""
    if T == 1:
        return ["[CLS]"]
    middle = [WORDS[i % len(WORDS)] for i in range(T - 2)]
    return ["[CLS]", *middle, "[SEP]"]


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return x / x.sum(-1, keepdim=True).clamp_min(1e-30)


def make_fake_result(
    family: str = "weibull", T: int = 7, S: int = 8, L: int = 6, H: int = 12, seed: int = 0,
    tokens: list[str] | None = None, stochastic_layers: list[int] | None = None,
    hyper: dict[str, float] | None = None, n_classes: int = 2, target: int | str | None = None,
) -> ExplainResult:
    """`hyper` overrides the family's `HYPER` (shape_k, beta; sigma, prior_sigma; concentration,
    prior_concentration): the sliders' extremes, say. `n_classes` > 2: classes "c0", "c1", ..., each
    sample's logits a random vector and f(E[w]) the softmax of their mean (and of each leave-one-out mean)."""
    g = torch.Generator().manual_seed(seed)
    tokens = tokens if tokens is not None else fake_tokens(T)
    assert len(tokens) == T
    if stochastic_layers is None:
        stochastic_layers = {"softmax": [], "mc-dropout": list(range(L)), "categorical": [L - 1]}.get(
            family, [layer for layer in (L - 2, L - 1) if layer >= 0])
    scores = torch.randn(L, H, T, T, generator=g) * 2.0              # (L, H, T, T)
    prior_scores = torch.randn(L, H, 1, T, generator=g).expand(L, H, T, T)  # keys only
    softmax_weights = scores.softmax(-1)                              # softmax(psi), the deterministic pass
    if family not in HYPER:
        raise ValueError(f"unknown family {family!r}")
    hyper = {**HYPER[family], **(hyper or {})}
    posterior_params: dict[str, torch.Tensor] = {}
    prior_params: dict[str, torch.Tensor] = {}

    if family == "weibull":
        k, beta = hyper["shape_k"], hyper["beta"]
        scale = scores.exp() / math.gamma(1 + 1 / k)                  # E[S] = exp(score)
        alpha = beta * prior_scores.exp()                              # E[prior] = exp(prior score)
        posterior_params = {"shape_k": torch.full_like(scores, k), "scale": scale}
        prior_params = {"alpha": alpha, "beta": torch.full_like(scores, beta)}
        post = Weibull(scale, torch.full_like(scores, k))
        prior = Gamma(alpha, torch.full_like(scores, beta))
        prior_weights = _normalise(alpha / beta)
    elif family == "lognormal":
        sigma, prior_sigma = hyper["sigma"], hyper.get("prior_sigma", hyper["sigma"])
        loc = scores - sigma**2 / 2
        posterior_params = {"loc": loc, "sigma": torch.full_like(scores, sigma)}
        prior_params = {"loc": prior_scores - prior_sigma**2 / 2, "sigma": torch.full_like(scores, prior_sigma)}
        post = LogNormal(loc, sigma)
        prior = LogNormal(prior_params["loc"], prior_sigma)
        prior_weights = prior_scores.softmax(-1)
    elif family == "dirichlet":
        a0, prior_a0 = hyper["concentration"], hyper.get("prior_concentration", hyper["concentration"])
        posterior_params = {"concentration": a0 * softmax_weights}
        prior_params = {"concentration": prior_a0 * prior_scores.softmax(-1)}
        post = Dirichlet(posterior_params["concentration"])
        prior = Dirichlet(prior_params["concentration"])
        prior_weights = prior_scores.softmax(-1)
    elif family == "categorical":                                   # samples from its prior p(z|x) itself
        post = prior = Categorical(probs=softmax_weights)
        prior_weights = softmax_weights
    elif family in ("softmax", "mc-dropout"):
        post = prior = None
        prior_weights = softmax_weights
    else:
        raise ValueError(f"unknown family {family!r}")

    def draw(dist) -> torch.Tensor:                                    # (S, L, H, T, T)
        if dist is None:
            w = softmax_weights.expand(S, L, H, T, T).clone()
            # dropout on the attention weights, as nn.Dropout: zeros, the rest scaled up
            return w * torch.bernoulli(torch.full_like(w, 1 - DROPOUT)) / (1 - DROPOUT) if family == "mc-dropout" else w
        x = dist.sample((S,))
        if isinstance(dist, Categorical):
            x = torch.nn.functional.one_hot(x, T).float()
        return _normalise(x)

    # torch.distributions samplers take no generator: seed a forked global one, leave the caller's alone.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sample_weights, prior_sample_weights = draw(post), draw(prior)
    if family == "mc-dropout":                                         # no prior: it repeats the posterior
        prior_sample_weights = sample_weights.clone()
    deterministic = [layer for layer in range(L) if layer not in stochastic_layers]
    sample_weights[:, deterministic] = softmax_weights[deterministic]
    prior_sample_weights[:, deterministic] = softmax_weights[deterministic]
    prior_weights = prior_weights.clone()
    prior_weights[deterministic] = softmax_weights[deterministic]

    name = "softmax" if family == "mc-dropout" else family
    kl = torch.rand(L, H, generator=g) * 50.0                         # (L, H)
    kl[deterministic] = 0.0
    if not families.get(name).learned_prior:
        kl.zero_()
    logits = 1.0 + 0.8 * torch.randn(S, generator=g)                   # (S,)
    if not stochastic_layers:
        logits = logits[:1].expand(S)
    p_pos = logits.sigmoid()
    sample_probs = torch.stack([1 - p_pos, p_pos], -1)                 # (S, 2)

    def probs(logit: torch.Tensor) -> torch.Tensor:
        p = logit.sigmoid()
        return torch.stack([1 - p, p], -1)

    softmax_probs = torch.tensor([1 - 0.7, 0.7]) if stochastic_layers else sample_probs[0]
    classes = ["negative", "positive"]
    if n_classes > 2:
        classes = [f"c{c}" for c in range(n_classes)]
        logits = 1.5 * torch.randn(n_classes, generator=g) + 0.8 * torch.randn(S, n_classes, generator=g)  # (S, C)
        if not stochastic_layers:
            logits = logits[:1].expand(S, n_classes)
        sample_probs = logits.softmax(-1)
        softmax_probs = (logits.mean(0) + 0.3).softmax(-1) if stochastic_layers else sample_probs[0]
    loo_probs = None
    if not stochastic_layers or family == "mc-dropout":                # no attention weight is drawn
        mean_attention_probs = softmax_probs
    else:
        mean_attention_probs = logits.mean(0).softmax(-1) if n_classes > 2 else probs(logits.mean())
        if S >= 2:
            without = (logits.sum(0, keepdim=True) - logits) / (S - 1)  # (S, C) or (S,): the mean without s
            loo_probs = without.softmax(-1) if n_classes > 2 else probs(without)   # (S, C)
    return ExplainResult(
        text=" ".join(tokens[1:-1]), tokens=tokens, classes=classes, target=target,
        model_name=f"fake-{family}", family=name, stochastic_layers=stochastic_layers,
        hyper=hyper, n_samples=S, seed=seed, truncated=False,
        sample_weights=sample_weights, softmax_weights=softmax_weights, prior_weights=prior_weights,
        prior_sample_weights=prior_sample_weights, kl=kl, sample_probs=sample_probs,
        mc_probs=sample_probs.mean(0), softmax_probs=softmax_probs, mean_attention_probs=mean_attention_probs,
        mean_attention_loo_probs=loo_probs, posterior_params=posterior_params, prior_params=prior_params,
        attention_dropout=DROPOUT if family == "mc-dropout" else 0.0,
    )


def k_class_model(n_classes: int, seed: int = 0, spread: float = 0.4):
    """A real bam-wc-like model with a random K-class head (`k_class_models.k_class_model`): classes
    "c0", "c1", ..., head weights and biases `spread` times standard normals, so that its predictions
    are far enough from uniform for the predicted class to be clear. Share it in a fixture."""
    from k_class_models import k_class_model as build

    return build(tuple(f"c{i}" for i in range(n_classes)), f"t{n_classes}", seed=seed, weight_scale=spread,
                 bias_scale=spread)
