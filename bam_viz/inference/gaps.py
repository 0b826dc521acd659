"""What a prediction averaged over attention samples is compared with: the two references and their errors.

With z_s, s = 1..S, the attention weights of one forward pass drawn from q, and f the network:

  E[f(z)]      the model's answer, (1/S) sum_s f(z_s).
  f(softmax)   f with every stochastic layer at softmax(psi): BAM's deterministic test-time pass
               (Fan et al. 2020, sec. 3). softmax(psi) is the mean of the *unnormalised* scores S_ij;
               the normalised weights' mean is not softmax(psi) for Weibull or Lognormal scores.
  f(E[w])      Deng et al.'s f(E[z]) (2018, sec. 2), with E[z] estimated by E[w] = (1/S) sum_s w_s,
               each stochastic layer's Monte Carlo mean weights (`ExplainResult.posterior_mean_weights`).
               One pass in which every stochastic layer's weights are replaced by its E[w]; its values
               v = W_v h are computed from that pass's own states h, as is every deterministic layer,
               so the layers above a stochastic one are fed by the f(E[w]) pass itself.

The gap the explorer heads with is Deng's, E[f(z)] - f(E[w]): Jensen's gap of f at the mean of the
alignment, the quantity their paper is about. E[f(z)] - f(softmax) is what a BAM user who predicts
with the deterministic pass gives up; the two differ by f(E[w]) - f(softmax), the shift of the
weights' mean away from softmax(psi), which grows as k or 1/sigma shrinks.

Where the model's randomness is not in its attention weights (MC dropout: the latent z is the
dropout mask, whose mean keeps every unit), f(E[z]) is the deterministic pass and both gaps are one.

Errors (docs/estimates.md, "The posterior mean and the gap"): E[f(z)] - f(softmax) is the mean of S
paired differences, SE = sd / sqrt(S). f(E[w]) is itself a function of the S samples, so the Deng
gap's SE is the leave-one-out jackknife's (Efron & Tibshirani 1993, ch. 11): f at each mean of the
weights without one sample, E[w]_(-s) = (S E[w] - w_s) / (S - 1), gives the gap without that sample,
and the spread of those S gaps is its error (`metrics.jackknife_gap_se`). The S + 1 passes, f(E[w])
and its S leave-one-out values, run as one batch of S + 1 rows (`leave_one_out_probs`), forward only,
so the live page's exported graph (`bam_viz.inference.graph`) computes the same number.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import torch

from bam_viz.nn.attention import Mode, probe


def attention_random_layers(model) -> list[int]:
    """The layers whose attention weights are drawn (not those made random by dropout alone)."""
    if not model.attention_family.stochastic:
        return []
    return sorted(model.config.stochastic_layers)


def _core(model, layer: int):
    return model.bert.layers[layer].attention.self.core


def given_weights_pass(model, x: torch.Tensor, mask: torch.Tensor, weights: Mapping[int, torch.Tensor],
                       hyper) -> torch.Tensor:
    """Logits (1, C) of the layers from the first stochastic one up on states `x` (1, T, C), with layer
    i's attention weights replaced by `weights[i]` (1, H, T, T); every other layer at softmax(psi),
    dropout off. The replacement is cut to the query rows the layer computes ([CLS] alone in the top
    layer). Runs in the caller's grad mode: gradients reach `weights` where they require them."""
    with contextlib.ExitStack() as stack:
        for layer, given in weights.items():
            stack.enter_context(probe(_core(model, layer), lambda w, given=given: given[..., : w.shape[-2], :]))
        logits, _, _ = model.upper(x, mask, mode=Mode.MEAN, hyper=hyper)
    return logits


def mean_attention_probs(model, x, mask, sampled: Mapping[int, torch.Tensor],
                         hyper) -> tuple[torch.Tensor, torch.Tensor | None]:
    """f(E[w]) (C,) and, where S >= 2, f at each leave-one-out mean E[w]_(-s) (S, C), the Deng gap's
    jackknife (`leave_one_out_probs`), from each attention-random layer's sampled weights
    `sampled[i]` (S, H, T, T). Probabilities; one pass, in the caller's grad mode."""
    S = next(iter(sampled.values())).shape[0]
    if S < 2:
        return given_weights_pass(model, x, mask, sampled, hyper).softmax(-1)[0], None   # E[w] is the one sample
    probs = leave_one_out_probs(model, x, mask, sampled, hyper)                         # (1 + S, C)
    return probs[0], probs[1:]


def leave_one_out_probs(model, x, mask, sampled: Mapping[int, torch.Tensor], hyper) -> torch.Tensor:
    """f(E[w]) and f at each leave-one-out mean E[w]_(-s) = (S E[w] - w_s) / (S - 1), (1 + S, C)
    probabilities (row 0 f(E[w])), from each attention-random layer's sampled weights `sampled[i]`
    (S, H, T, T) with S >= 2: one pass of S + 1 rows, which an exported graph runs as it is
    (`bam_viz.inference.graph`). Their jackknife is the Deng gap's SE (`metrics.jackknife_gap_se`)."""
    S = next(iter(sampled.values())).shape[0]
    if S < 2:
        raise ValueError("a leave-one-out mean needs two samples")
    given = {i: torch.cat([w.mean(0, keepdim=True), (w.sum(0, keepdim=True) - w) / (S - 1)])
             for i, w in sampled.items()}
    rows = S + 1
    return given_weights_pass(model, x.expand(rows, -1, -1), mask.expand(rows, -1), given, hyper).softmax(-1)
