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
gap's SE is the delta method's (the infinitesimal jackknife, Efron 1982, ch. 6): to first order
f(E[w]) moves with each sample by its slope l_s = grad f(E[w]) . (w_s - E[w]), so the gap is the mean
of d_s = f(z_s) - l_s less a constant, and SE = sd(d_s) / sqrt(S) (`metrics.delta_gap_se`). The
gradient is one backward pass through the f(E[w]) pass, batched over the classes, far cheaper than S more passes.
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
    """f(E[w]) (C,) and, where S >= 2, each sample's slope l_s = grad f_c(E[w]) . (w_s - E[w]) (S, C),
    from each attention-random layer's sampled weights `sampled[i]` (S, H, T, T). Probabilities."""
    S = next(iter(sampled.values())).shape[0]
    # Out of inference mode for the gradient: the cached states and samples are inference tensors,
    # read here through copies.
    with torch.inference_mode(False), torch.enable_grad():
        means = {i: w.mean(0, keepdim=True).clone().requires_grad_(S >= 2) for i, w in sampled.items()}
        probs = given_weights_pass(model, x.clone(), mask.clone(), means, hyper).softmax(-1)[0]   # (C,)
        if S < 2:
            return probs.detach(), None
        C = probs.shape[0]
        # The probabilities sum to 1, so their slopes sum to 0: the gradients of C - 1 of them give
        # all, in one backward pass batched over the classes (vmap over the vector-Jacobian products).
        per_layer = torch.autograd.grad(probs, list(means.values()), grad_outputs=torch.eye(C, dtype=probs.dtype,
                                        device=probs.device)[: C - 1], is_grads_batched=True)
    slopes = torch.zeros(S, C, dtype=torch.float64, device=probs.device)
    for k, (i, m) in enumerate(means.items()):
        g = per_layer[k].reshape(C - 1, -1)                                                # (C - 1, H T T)
        slopes[:, : C - 1] += (sampled[i].reshape(S, -1) @ g.T - m.detach().reshape(1, -1) @ g.T).double()
    slopes[:, C - 1] = -slopes[:, : C - 1].sum(1)
    return probs.detach(), slopes
