"""Posterior attention given the label: where the model would look if it were told the answer.

The [CLS] query's attention row z (a key for a hard alignment, a point of the simplex for
continuous attention) is random given the text x. Told the label y, one of the model's K classes,
Bayes' rule reweights it:

    p(z | x, y) = p(z | x) p(y | x, z) / p(y | x),   p(y | x) = sum_z p(z | x) p(y | x, z)

For the `categorical` model this is exact: z is one key j of the top layer, shared by every head,
and `BamClassifier.exact_log_marginal` enumerates p(z = j | x) and p(y | x, z = j) for every j
(Deng et al. 2018, eq. 1 and the posterior p(z | x, y) of their sec. 3). method = "exact".

For continuous attention (and mc-dropout) z has no table to enumerate. The model's own S samples
z_s ~ p(z | x) (the pass `predict_samples` and `explain` make for (text, S, seed, hyper)) give the
self-normalised importance estimate, with the prior itself as proposal, so that the weights are
the likelihoods alone (Owen 2013, "Monte Carlo theory, methods and examples", sec. 9.2):

    w_s(y) = p(y | x, z_s) / sum_r p(y | x, z_r)
    prior row      a_bar   = (1/S) sum_s a_s            a_s: the [CLS] row of the chosen layer
    posterior row  a_bar_y = sum_s w_s(y) a_s
    p_hat(y | x)           = (1/S) sum_s p(y | x, z_s)  (= `predict`)

Because sum_y p(y | x, z_s) = 1 for every sample, sum_y p_hat(y | x) a_bar_y = a_bar exactly: the
law of total probability holds for the estimate itself, not only in the limit. method = "importance".

The per-key log-likelihood: exactly log p(y | x, z = j) for the alignment; for continuous attention
the attention-weighted mean of the samples' log-likelihoods,

    log_lik[y, j] = sum_s a_sj log p(y | x, z_s) / sum_s a_sj,

which for one-hot rows a_s is again log p(y | x, z = j). A key that no sample attends to carries
no evidence and gets log p_hat(y | x), which leaves its posterior equal to its prior (zero).

What the page reports is the shift posterior_y - prior, a ratio estimate minus a plain mean of the
same S draws. Linearised (the delta method; Owen 2013, sec. 9.2, eq. 9.8 for the ratio alone), its
error is (1/S) sum_s g_s with g_s = (p(y | x, z_s) / p(y | x)) (a_s - posterior_y) - (a_s - prior),
a mean of zero-mean terms, so Var = E_p[g^2] / S. Both parts move together (a sample that pulls the
prior toward a key pulls the posterior too), which is why the difference has its own variance, not
the sum of the two. Plugging in p_hat(y | x), so that p(y | x, z_s) / p_hat(y | x) = S w_s(y):

    shift_se[y, j]^2 = sum_s (w_s(y) (a_sj - a_bar_yj) - (a_sj - a_bar_j) / S)^2

`describe()` names a word only when its shift exceeds `NOISE_SES` of these standard errors.

The estimate is as good as its effective sample size, ESS = (sum_s w_s)^2 / sum_s w_s^2 (Kong 1992),
in [1, S]: S when every sample explains y equally well, near 1 when one sample carries the weight.
A deterministic model (softmax) has one attention row: told the label it looks at the same keys,
so it answers with posterior = prior, one sample, ESS 1, method = "deterministic".

Every label is computed (the K rows cost one pass); `target` names the one a picture shows, by
default the predicted class, the argmax of p(y | x) (exact, or the estimate p_hat(y | x)).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np
import torch

from bam_viz.core.cache import WORK, WORK_ENV, explain_bytes
from bam_viz.core.inputs import check_n_samples, check_seed, check_text, shown
from bam_viz.core.task import resolve_target
from bam_viz.core.text import display_token
from bam_viz.inference.attribution import check_target
from bam_viz.inference.explain import DEFAULT_RNG, lower_states, sample_generator
from bam_viz.nn.attention import Trace

METHODS = ("exact", "importance")
# Reliable when ESS >= max(RELIABLE_FRACTION * S, MIN_RELIABLE_ESS). The self-normalised estimate
# varies about as a plain mean of ESS independent draws would (Kong 1992): fewer than ten leave a
# standard error of a third of the rows' spread or more, and an ESS under a tenth of S says the
# proposal p(z|x) and the posterior barely overlap, so what the samples missed may matter.
RELIABLE_FRACTION = 0.1
MIN_RELIABLE_ESS = 10.0
# A shift of attention smaller than this (a fiftieth of the row's unit mass) is "barely moves".
NOTICEABLE_SHIFT = 0.02
# An estimated shift within this many of its standard errors (`shift_se`) is not told apart from
# Monte Carlo noise: a word whose true shift is zero passes with about 5% chance (the normal
# approximation), a sentence of several words more often; NOTICEABLE_SHIFT keeps out most of those.
NOISE_SES = 2.0
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]"})   # attention's resting places, not words


@dataclass(frozen=True, eq=False)
class LabelPosterior:
    """The [CLS] query's attention in one layer before and after being told each of K labels.

    Arrays are read-only float64 NumPy. `ess`, `n_samples` and `shift_se` are None for the exact
    method, which draws nothing; the per-head arrays are None there too (the alignment is shared by
    every head); every other method has a `shift_se`.
    `target` is the label a picture shows, an index of `labels`: given as a name, an index, or None
    for the predicted label (the argmax of p(y | x)), it is stored as its index.
    """

    tokens: tuple[str, ...]                # [CLS] first and [SEP] last
    labels: tuple[str, ...]                # model.classes, the order of every (K, ..) array
    prior: np.ndarray                      # (T,) p(z | x), or the mean sampled row
    posterior: np.ndarray                  # (K, T) p(z | x, y) per label, or its estimate
    log_lik: np.ndarray                    # (K, T) log p(y | x, z = j), or its attention-weighted mean
    log_marginal: np.ndarray               # (K,) log p(y | x), exact or log mean_s p(y | x, z_s)
    method: str                            # "exact", "importance" or "deterministic"
    ess: np.ndarray | None                 # (K,) effective sample size per label
    n_samples: int | None
    layer: int
    prior_heads: np.ndarray | None = None        # (H, T)
    posterior_heads: np.ndarray | None = None    # (K, H, T)
    sample_log_lik: np.ndarray | None = None     # (S, K) log p(y | x, z_s), the weights' logs
    target: int | str | None = None              # the label shown: stored as its index
    shift_se: np.ndarray | None = None           # (K, T) Monte Carlo s.e. of posterior - prior

    def __post_init__(self):
        if (self.shift_se is None) != (self.method == "exact"):
            raise ValueError(f"shift_se must be given for the {self.method} method and only for it: the exact "
                             "posterior has no Monte Carlo error, an estimate has one")
        object.__setattr__(self, "target", resolve_target(self.labels, self.target, np.exp(self.log_marginal)))

    @property
    def target_label(self) -> str:
        """The name of the label shown."""
        return self.labels[self.target]

    def with_target(self, target: int | str | None) -> LabelPosterior:
        """The same posterior showing another label (a name, an index, or None for the predicted one)."""
        return replace(self, target=check_target(self.labels, target))

    @property
    def reliable(self) -> np.ndarray:
        """(K,) bool: whether each label's estimate rests on enough effective samples (always True
        for the exact and deterministic methods; see `RELIABLE_FRACTION`)."""
        if self.method != "importance":
            return np.ones(len(self.labels), dtype=bool)
        return self.ess >= reliable_ess(self.n_samples)

    def index(self, label: str) -> int:
        if label not in self.labels:
            raise ValueError(f"label must be one of {list(self.labels)}, got {shown(label)}")
        return self.labels.index(label)


def reliable_ess(n_samples: int) -> float:
    """The ESS below which an estimate from `n_samples` samples is flagged as unreliable."""
    return max(RELIABLE_FRACTION * n_samples, MIN_RELIABLE_ESS)


def effective_sample_size(log_weights: torch.Tensor) -> torch.Tensor:
    """(sum w)^2 / sum w^2 over the last axis, from unnormalised log-weights (in log space, so
    weights that all underflow still give their ratio)."""
    return (2 * log_weights.logsumexp(-1) - (2 * log_weights).logsumexp(-1)).exp()


def importance_posterior(sample_log_lik: torch.Tensor, attention: torch.Tensor) -> dict[str, torch.Tensor]:
    """The self-normalised estimate from S samples: `sample_log_lik` (S, Y) log p(y | x, z_s) and
    `attention` (S, H, T) the sampled rows. Returns prior_heads (H, T), posterior_heads (Y, H, T),
    prior (T,), posterior (Y, T), log_lik (Y, T), log_marginal (Y,), ess (Y,) and shift_se (Y, T),
    the delta method's standard error of posterior - prior (the module docstring derives it)."""
    log_w = sample_log_lik.T                                                     # (Y, S)
    w = log_w.softmax(-1)                                                        # (Y, S) sums to 1 over s
    rows = attention.mean(1)                                                     # (S, T) head mean
    S = rows.shape[0]
    log_marginal = log_w.logsumexp(-1) - math.log(S)                             # (Y,)
    mass = rows.sum(0)                                                           # (T,) sum_s a_sj
    weighted = (log_w @ rows) / mass.where(mass > 0, torch.ones_like(mass))      # (Y, T)
    prior, posterior = rows.mean(0), w @ rows                                    # (T,), (Y, T)
    # One label at a time: (S, T) each, where all at once would hold (Y, S, T).
    shift_se = torch.stack([(w_y[:, None] * (rows - post_y) - (rows - prior) / S).square().sum(0).sqrt()
                            for w_y, post_y in zip(w, posterior, strict=True)])  # (Y, T)
    return dict(
        prior_heads=attention.mean(0),
        posterior_heads=torch.einsum("ys,sht->yht", w, attention),
        prior=prior,
        posterior=posterior,
        log_lik=torch.where(mass > 0, weighted, log_marginal[:, None]),
        log_marginal=log_marginal,
        ess=effective_sample_size(log_w),
        shift_se=shift_se,
    )


def label_posterior(model, text: str, n_samples: int = 64, seed: int = 0, layer: int | None = None, *,
                    method: str | None = None, target: int | str | None = None, **hyper: float) -> LabelPosterior:
    """Where `model`'s [CLS] query would attend in `layer` if it were told each label of `text`, one
    of `model.classes`; `target` (a class name, an index, or None / "predicted") the label shown.

    `layer` None: the top stochastic layer (the top layer for a deterministic model). `method` None:
    "exact" where the model's alignment can be enumerated (`categorical`), else "importance" over
    the model's own `n_samples` samples for `seed` and `hyper` (the samples `predict_samples` and
    `explain` draw). `method="importance"` on the categorical model gives the estimate the exact
    answer checks. Layers below the first stochastic one attend alike in every sample: there the
    posterior equals the prior. See the module docstring for the estimator and its ESS."""
    check_text(text)
    n_samples, seed = check_n_samples(n_samples), check_seed(seed)
    target = check_target(tuple(model.classes), target)
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)} or None, got {shown(method)}")
    resolved = model.hyper(**hyper)
    family = model.attention_family
    top_stochastic = max(model.config.stochastic_layers) if model.stochastic else model.n_layers - 1
    layer = _check_layer(layer, model.n_layers, top_stochastic)
    exact = model.stochastic and family.hard_alignment and method != "importance"
    if method == "exact" and model.stochastic and not family.hard_alignment:
        raise ValueError(f"{model.name} has {family.name} attention, which has no alignment to enumerate: "
                         "use method='importance'")
    if exact and layer != model.n_layers - 1:
        raise ValueError(f"the exact posterior is over the top layer's alignment: layer must be "
                         f"{model.n_layers - 1} or None, got {layer}")
    model.eval()
    if exact:
        return _exact(model, lower_states(model, text), layer, target)
    S = n_samples if model.stochastic else 1
    T = len(model.tokenize(text))
    n_stochastic = len(model.config.stochastic_layers) if model.stochastic else 0
    per_sample = explain_bytes(1, 0, n_stochastic, model.n_heads, T)
    try:
        check_n_samples(S, max(1, WORK.budget // max(per_sample, 1)))
    except ValueError as err:
        raise ValueError(f"{err}: at {T} tokens one sample's attention takes {per_sample / 2**20:.2f} MB of the "
                         f"{WORK.budget / 2**20:.0f} MB working memory (${WORK_ENV}); use fewer samples "
                         "or a shorter text") from None
    with WORK.hold(per_sample * S):
        return _importance(model, lower_states(model, text), S, seed, resolved, layer, target)


def _check_layer(layer, n_layers: int, default: int) -> int:
    if layer is None:
        return default
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral):
        raise TypeError(f"layer must be an int, not {type(layer).__name__} {shown(layer)}")
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer must be between 0 and {n_layers - 1}, got {shown(layer)}")
    return int(layer)


@torch.inference_mode()
def _exact(model, lower, layer: int, target: int | None) -> LabelPosterior:
    family = model.attention_family
    _, log_pz, log_lik = model.exact_log_marginal(lower.x, lower.mask)
    # Renormalised in float64 so that rows sum to one to rounding, not to float32's 1e-7.
    log_prior = log_pz[0].double().log_softmax(-1)                               # (T,)
    log_lik = log_lik[0].double().log_softmax(-1).T                              # (K, T)
    return LabelPosterior(
        tokens=tuple(lower.tokens), labels=tuple(model.classes),
        prior=_frozen(log_prior.exp()),
        posterior=_frozen(family.exact_posterior(log_prior, log_lik).exp()),
        log_lik=_frozen(log_lik),
        log_marginal=_frozen(family.exact_log_marginal(log_prior, log_lik)),
        method="exact", ess=None, n_samples=None, layer=layer, target=target,
    )


@torch.inference_mode()
def _importance(model, lower, S: int, seed: int, hyper, layer: int, target: int | None) -> LabelPosterior:
    # explain()'s sampled pass: the same draws.
    g = sample_generator(DEFAULT_RNG, seed, model.device)
    logits, traces, _ = model.upper(lower.x, lower.mask, n_samples=S, generator=g, hyper=hyper,
                                    trace=Trace.SAMPLES)
    first = model.first_stochastic
    if layer < first:
        rows = lower.traces[layer].softmax_weights[:, :, 0]                          # (1, H, T)
    else:
        rows = traces[layer - first].weights[:, :, 0]                             # (S or 1, H, T)
    rows = rows.double().cpu().expand(S, *rows.shape[1:])                         # (S, H, T)
    sample_log_lik = logits.double().cpu().log_softmax(-1)                        # (S, K)
    est = importance_posterior(sample_log_lik, rows)
    return LabelPosterior(
        tokens=tuple(lower.tokens), labels=tuple(model.classes),
        prior=_frozen(est["prior"]), posterior=_frozen(est["posterior"]), log_lik=_frozen(est["log_lik"]),
        log_marginal=_frozen(est["log_marginal"]),
        method="importance" if model.stochastic else "deterministic",
        ess=_frozen(est["ess"]), n_samples=S, layer=layer,
        prior_heads=_frozen(est["prior_heads"]), posterior_heads=_frozen(est["posterior_heads"]),
        sample_log_lik=_frozen(sample_log_lik), target=target, shift_se=_frozen(est["shift_se"]),
    )


def _frozen(t: torch.Tensor) -> np.ndarray:
    a = t.detach().cpu().double().numpy().copy()
    if not np.isfinite(a).all():
        raise FloatingPointError("the label posterior is not finite: a bug, please report the text and settings")
    a.flags.writeable = False
    return a


def describe(lp: LabelPosterior, label: str | None = None) -> str:
    """One plain-text sentence on what being told `label` (None: the label shown, `lp.target`)
    changes: the word whose attention rises most and the one that falls most, special tokens left
    out, among the words whose shift is `NOTICEABLE_SHIFT` or more and, for an estimate, beyond
    `NOISE_SES` of its standard errors (`lp.shift_se`); a different sentence when no word moves by
    `NOTICEABLE_SHIFT`, another when the shifts that large are within Monte Carlo noise, and a
    warning when the estimate's ESS is low (`lp.reliable` says so as a flag)."""
    if label is None:
        label = lp.target_label
    y = lp.index(label)
    told = f"the sentence is {label}"
    if lp.method == "deterministic":
        return (f"This model's attention is deterministic: being told {told} would not change where it "
                "looks.")
    shift = lp.posterior[y] - lp.prior                                            # (T,)
    se = np.zeros_like(shift) if lp.shift_se is None else lp.shift_se[y]          # (T,) exact: no error
    words = [i for i, t in enumerate(lp.tokens) if t not in SPECIAL_TOKENS]
    large = [i for i in words if abs(shift[i]) >= NOTICEABLE_SHIFT]
    beyond_noise = [i for i in large if abs(shift[i]) > NOISE_SES * se[i]]

    def named(i: int) -> str:
        text = f"'{display_token(lp.tokens[i])}'"
        repeated = sum(t == lp.tokens[i] for t in lp.tokens) > 1
        text += f" (token {i})" if repeated else ""
        error = "" if lp.shift_se is None else f"; shift {shift[i]:+.2g}, s.e. {se[i]:.2g}"
        return f"{text} ({_number(lp.posterior[y, i])} vs {_number(lp.prior[i])}{error})"

    up = max((i for i in beyond_noise if shift[i] > 0), key=lambda i: shift[i], default=None)
    down = min((i for i in beyond_noise if shift[i] < 0), key=lambda i: shift[i], default=None)
    parts = ([] if up is None else [f"more at {named(up)}"]) + ([] if down is None else [f"less at {named(down)}"])
    if parts:
        sentence = f"If the model were told {told}, it would look {' and '.join(parts)}."
    elif large:
        sentence = (f"Being told {told} shifts no word's attention distinguishably from Monte Carlo noise at "
                    f"{lp.n_samples} samples: every shift of {NOTICEABLE_SHIFT:g} or more is within "
                    f"{NOISE_SES:g} standard errors of zero. Draw more samples to tell.")
    else:
        sentence = (f"Being told {told} would barely change where the model looks: no word's attention "
                    f"moves by {NOTICEABLE_SHIFT:g} or more.")
    if not lp.reliable[y]:
        sentence += (f" This rests on only {lp.ess[y]:.1f} effective samples of {lp.n_samples}, too few "
                     "to trust: draw more samples.")
    return sentence


def _number(v: float) -> str:
    return f"{v:.2f}" if v >= 0.1 else f"{v:.2g}"


__all__ = ["LabelPosterior", "describe", "effective_sample_size", "importance_posterior", "label_posterior",
           "reliable_ess"]
