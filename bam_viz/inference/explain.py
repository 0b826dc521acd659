"""explain(): everything the explorer draws for one sentence, and the caches that make a slider
move cheap.

One model serves every session of the app, so the caches are shared and locked. They are keyed by
text and settings, not by weights: `BamClassifier.clear_caches()` (called by `train()` and
`merge_adapters()`) empties them.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import torch

from bam_viz.core.cache import CACHE, WORK, explain_bytes
from bam_viz.core.inputs import check_attention_budget, check_n_samples, check_seed, check_text
from bam_viz.core.task import resolve_target
from bam_viz.families import Hyper
from bam_viz.families.sampling import PortableNoise
from bam_viz.inference import gaps
from bam_viz.inference.result import ExplainResult, Note
from bam_viz.nn.attention import Mode, Trace


class ExplainCache:
    """One model's part of the process-wide `bam_viz.core.cache.CACHE`, bounded in bytes with everything
    else kept: per text, tokens and the states below the first stochastic layer ("lower") and the
    deterministic pass ("deterministic", `deterministic_pass`); per (text, S, seed, the posterior's
    hyperparameters), the S-sample pass ("sampled"). Keys carry a
    token of their own model, so models never share entries."""

    def __init__(self):
        self.token = object()               # identity only: the cache must not keep the model alive
        self.lower = _Namespace(self.token, "explain.lower")
        self.deterministic = _Namespace(self.token, "explain.deterministic")
        self.sampled = _Namespace(self.token, "explain.sampled")

    def clear(self) -> None:
        self.lower.clear()
        self.deterministic.clear()
        self.sampled.clear()


class _Namespace:
    """get / put / clear / len of one model's entries in one namespace of `CACHE`."""

    def __init__(self, token, namespace: str):
        self.token, self.namespace = token, namespace

    def get(self, key):
        return CACHE.get(self.namespace, (self.token, key))

    def put(self, key, value):
        return CACHE.put(self.namespace, (self.token, key), value)

    def clear(self) -> None:
        CACHE.discard(self.namespace, lambda key: key[0] is self.token)

    def __len__(self) -> int:
        return CACHE.count(self.namespace, lambda key: key[0] is self.token)


class PriorDraws:
    """explain()'s attention drawn from the prior, made one (layer, head) at a time, on demand.

    A chart shows one head, so a slider move draws S x T x T prior variables instead of
    S x L x H x T x T (drawing every head's Gamma prior would cost a quarter of explain()).
    Every (layer, head) has a generator of its own, seeded from (seed, layer, head): the numbers
    do not depend on which heads were asked for before, or in what order. `eager` holds layers whose
    "prior draws" cost nothing (deterministic layers, softmax, a hard alignment); `lazy` maps a
    stochastic layer to the prior's log pi per sample, (S, H, 1, T).
    """

    def __init__(self, eager: dict, lazy: dict, seed: int, family, hyper: Hyper):
        self.eager, self.lazy, self.seed, self.family, self.hyper = eager, lazy, seed, family, hyper

    @staticmethod
    def stream_seed(seed: int, layer: int, head: int) -> int:
        digest = hashlib.sha256(f"prior-draws:{seed}:{layer}:{head}".encode()).digest()
        return int.from_bytes(digest[:8], "little") >> 1          # 63 bits: any torch seed

    def __call__(self, layer: int, head: int) -> torch.Tensor:
        """(S, T, T) attention weights drawn from the prior in one layer and head."""
        if layer in self.eager:
            return self.eager[layer][:, head]
        log_pi = self.lazy[layer][:, head : head + 1]                    # (S, 1, 1, T)
        S, T = log_pi.shape[0], log_pi.shape[-1]
        g = torch.Generator(device=log_pi.device).manual_seed(self.stream_seed(self.seed, layer, head))
        with torch.inference_mode():
            w = self.family.sample_prior(log_pi.expand(S, 1, T, T), self.hyper, None, g)
        return w[:, 0].float().cpu()


class LowerStates(NamedTuple):
    """What `explain()` and the sweep reuse for one text while the sliders move."""

    tokens: list[str]             # the tokens kept, [CLS] first and [SEP] last
    truncated: bool
    word_pieces: int              # in the whole text, without [CLS] and [SEP]
    text: str                     # the text encoded: the kept tokens decoded when truncated
    original: str                 # the text as given (the caches' key)
    ids: torch.Tensor             # (1, T)
    mask: torch.Tensor            # (1, T)
    x: torch.Tensor               # (1, T, C) the states below the first stochastic layer
    traces: list                  # their attention traces


@torch.inference_mode()
def lower_states(model, text: str) -> LowerStates:
    """Tokens and the deterministic states below the first stochastic layer, cached per text."""
    hit = model.explain_cache.lower.get(text)
    if hit is None:
        ids, tokens, truncated = model.tokenizer.encode(text)
        ids_t = torch.tensor([ids], device=model.device)
        mask = torch.ones_like(ids_t, dtype=torch.bool)
        x, traces = model.lower(ids_t, mask, trace=Trace.FULL)
        pieces = model.tokenizer.length(text) - 2 if truncated else len(ids) - 2
        encoded = model.tokenizer.decode(ids) if truncated else text
        hit = model.explain_cache.lower.put(text, LowerStates(tokens, truncated, pieces, encoded, text, ids_t, mask,
                                                              x, traces))
    return hit


@torch.inference_mode()
def deterministic_pass(model, lower: LowerStates, hyper: Hyper) -> tuple[torch.Tensor, list]:
    """The layers from the first stochastic one up in Mode.MEAN (softmax(psi) in every layer) on the
    sentence of `lower`: logits (1, K) and each layer's trace (Trace.STATS) at `hyper`. No hyperparameter
    moves that pass's weights, so it is made once per sentence and kept; at other hyperparameters each
    stochastic layer's KL and parameters are made again from its scores, as the pass makes them
    (`BayesianAttention.at_hyper`): a live grid's frame, one `explain()` at each slider value, then
    costs no second pass through the layers."""
    hit = model.explain_cache.deterministic.get(lower.original)
    if hit is None:
        logits, traces, _ = model.upper(lower.x, lower.mask, mode=Mode.MEAN, hyper=hyper, trace=Trace.STATS)
        hit = model.explain_cache.deterministic.put(lower.original, (logits, traces, hyper))
    logits, traces, made_at = hit
    if hyper == made_at:
        return logits, traces
    stochastic = model.config.stochastic_layers
    return logits, [model.bert.layers[i].attention.self.core.at_hyper(t, hyper) if i in stochastic else t
                    for i, t in enumerate(traces, start=len(lower.traces))]


def pass_weights(lower_traces: list, traces: list, attr: str, family) -> torch.Tensor:
    """(L, H, T, T) float32 on the CPU: the deterministic pass's "softmax_weights" or "prior_weights" (pi)
    in every layer, from the traces of the layers below the first stochastic one (softmax weights: they
    have no prior) and of `deterministic_pass`; a family without a prior gives its softmax weights as pi."""
    if not family.stochastic:
        attr = "softmax_weights"
    rows = [t.softmax_weights[0] for t in lower_traces] + [getattr(t, attr)[0] for t in traces]
    return torch.stack(rows).float().cpu()


RNGS = ("torch", "portable")
# explain()'s stream: the portable one, which the browser's frame graph draws too (views/live/random.js), so
# that the same seed gives the same picture in the library and in every browser. `predict` keeps torch's.
DEFAULT_RNG = "portable"


def sample_generator(rng: str, seed: int, device):
    """What draws explain()'s samples: a torch.Generator ("torch", what `predict` uses) or the
    portable stream (`bam_viz.families.sampling.PortableNoise`), the numbers the browser makes."""
    if rng == "portable":
        return PortableNoise(seed)
    return torch.Generator(device=device).manual_seed(seed)


def explain(model, text: str, n_samples: int = 32, seed: int = 0, hyper: Hyper | None = None,
            cache: bool = True, target: int | str | None = None, rng: str = DEFAULT_RNG) -> ExplainResult:
    """The `ExplainResult` of `model` on one sentence: S attention samples drawn from the stream `rng`
    seeded with `seed` (`sample_generator`), the deterministic (softmax) pass, the
    pass at the samples' mean weights and at each mean without one sample (`bam_viz.inference.gaps`), the prior,
    KL and the distributions' parameters per layer. `hyper`: the model's hyperparameters with
    any overrides (`model.hyper(...)`); None is the trained values. `cache` False: do not keep the
    S-sample pass for a later call (the live grid's frames are each made once). `target`: the class
    the one-class numbers are for, a name or an index of `model.classes`, or None (or "predicted")
    for the predicted class; it only picks columns, so `result.for_target(other)` is free and the
    cache serves every class. `rng`: "portable" (the default, the browser's draws) or "torch" (`predict`'s).

    The call holds its estimated peak (`bam_viz.core.cache.explain_bytes`) of the process's working
    memory (`bam_viz.core.cache.WORK`) while it runs, so calls made at once wait rather than add up."""
    check_text(text)
    n_samples, seed = check_n_samples(n_samples), check_seed(seed)
    if rng not in RNGS:
        raise ValueError(f"rng must be one of {RNGS}, not {rng!r}")
    if target is not None and target != "predicted":
        resolve_target(model.classes, target)           # a bad class is refused before any work
    hyper = model.hyper() if hyper is None else hyper
    model.eval()
    stochastic_layers = model.config.stochastic_layers
    lower = lower_states(model, text)
    check_attention_budget(n_samples, model.n_layers, model.n_heads, len(lower.tokens))
    n_stochastic = len(stochastic_layers) if model.stochastic else 0
    with WORK.hold(explain_bytes(n_samples, model.n_layers, n_stochastic, model.n_heads, len(lower.tokens))):
        return _explain(model, lower, n_samples, seed, hyper, cache, target, rng)


@torch.inference_mode()
def _explain(model, lower: LowerStates, n_samples: int, seed: int, hyper: Hyper, cache: bool,
             target: int | str | None, rng: str) -> ExplainResult:
    family = model.attention_family
    stochastic_layers = model.config.stochastic_layers
    text = lower.original
    tokens, truncated, mask, x, lower_traces = lower.tokens, lower.truncated, lower.mask, lower.x, lower.traces
    S = n_samples
    # The S-sample pass (most of explain's time) does not read the prior's hyperparameters, so
    # moving beta reuses it and recomputes only the one-row mean pass and the prior's draws.
    key = (text, S, seed, hyper.posterior_part(), rng)
    hit = model.explain_cache.sampled.get(key)
    if hit is None:
        g = sample_generator(rng, seed, model.device)
        logits, traces, _ = model.upper(x, mask, n_samples=S, generator=g, hyper=hyper, trace=Trace.SAMPLES)
        # f(E[w]) and its leave-one-out values read the sampled weights alone: kept with them.
        drawn = {i: traces[i - len(lower_traces)].weights for i in gaps.attention_random_layers(model)}
        mean_pass = gaps.mean_attention_probs(model, x, mask, drawn, hyper) if drawn else None
        hit = (logits, traces, mean_pass)
        if cache:
            hit = model.explain_cache.sampled.put(key, hit)
    logits, traces, mean_pass = hit
    mf_logits, mf_traces = deterministic_pass(model, lower, hyper)
    sample_probs = logits.softmax(-1).float()                                   # (S, C)
    softmax_probs = mf_logits.softmax(-1)[0].float()
    # No attention drawn (MC dropout, softmax): E[z] keeps the deterministic pass (bam_viz.inference.gaps).
    mean_attention_probs, loo_probs = mean_pass if mean_pass is not None else (softmax_probs, None)

    has_prior = family.stochastic    # a deterministic family has no prior: prior panels repeat the posterior
    alias = {} if has_prior else {"prior_sample_weights": "weights"}

    # Prior draws are made when a chart asks for them, one (layer, head) at a time (PriorDraws);
    # the sampled pass above drew only the posterior's numbers, as predict() does.
    lazy_prior = {i: t.prior_log_probs for i, t in enumerate(traces, start=len(lower_traces))
                  if has_prior and i in stochastic_layers and t.prior_log_probs is not None}

    def layer_rows(attr, skip=()):
        attr = alias.get(attr, attr)
        rows = []
        for t in lower_traces:
            w = t.softmax_weights[0]
            rows.append(w.expand(S, *w.shape))
        for i, t in enumerate(traces, start=len(lower_traces)):
            if i in skip:
                rows.append(None)
            else:
                w = getattr(t, attr) if i in stochastic_layers else t.softmax_weights
                rows.append(w if w.shape[0] == S else w.expand(S, *w.shape[1:]))
        return rows

    eager_prior = {i: w.float().cpu() for i, w in
                   enumerate(layer_rows("prior_sample_weights", skip=lazy_prior)) if w is not None}
    prior_draws = PriorDraws(eager_prior, lazy_prior, seed, family, hyper)

    # float64: a Dirichlet KL at a small concentration exceeds float32's range (bam_viz.families.kl)
    kl = torch.stack([torch.zeros_like(t.kl[0]).double() for t in lower_traces]
                     + [mf.kl[0].double() for mf in mf_traces]).cpu()
    post, prior = {}, {}
    if family.has_density:
        for name in mf_traces[0].posterior_params:
            post[name] = _stack_params(lower_traces, mf_traces, "posterior_params", name)
        for name in mf_traces[0].prior_params:
            prior[name] = _stack_params(lower_traces, mf_traces, "prior_params", name)
    notes = result_notes(model, lower)
    return ExplainResult(
        text=lower.text,
        tokens=tokens, classes=list(model.classes), model_name=model.name, family=model.family,
        stochastic_layers=list(stochastic_layers) if model.stochastic else [],
        hyper=dict(hyper), n_samples=S, seed=seed, truncated=truncated,
        sample_weights=torch.stack(layer_rows("weights"), 1).float().cpu(),
        softmax_weights=pass_weights(lower_traces, mf_traces, "softmax_weights", family),
        prior_weights=pass_weights(lower_traces, mf_traces, "prior_weights", family), prior_sampler=prior_draws, kl=kl,
        sample_probs=sample_probs.cpu(), mc_probs=sample_probs.mean(0).cpu(), softmax_probs=softmax_probs.cpu(),
        mean_attention_probs=mean_attention_probs.float().cpu(),
        mean_attention_loo_probs=None if loo_probs is None else loo_probs.float().cpu(),
        posterior_params=post, prior_params=prior, notes=notes, target=target,
        attention_dropout=model.attention_dropout,
    )


def result_notes(model, lower: LowerStates) -> list[Note]:
    """The notices on a result of `model` for the text of `lower`: that it was cut to the model's length,
    and that the model has no prior."""
    notes = []
    if lower.truncated:
        pieces, kept = lower.word_pieces, model.max_tokens - 2                      # without [CLS], [SEP]
        notes.append(Note(f"The text is longer than this model's maximum of {model.max_tokens} tokens: it has "
                          f"{pieces} word pieces, and only the first {kept} (with [CLS] and [SEP], "
                          f"{model.max_tokens} tokens) were kept; the last {pieces - kept} were left out.",
                          warning=True))
    if not model.attention_family.stochastic:
        notes.append(Note("This model has no attention prior: prior panels repeat the posterior."))
    return notes


def _stack_params(lower_traces, mf_traces, attr, name):
    """(L, H, T, T) parameters; zeros in deterministic layers, which have no distribution
    (`ExplainResult.key_densities` answers None there)."""
    rows = [getattr(mf, attr)[name][0] for mf in mf_traces]
    return torch.stack([torch.zeros_like(rows[0])] * len(lower_traces) + rows).float().cpu()
