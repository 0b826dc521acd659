"""Which tokens moved the prediction, and how surely: Integrated Gradients (Sundararajan et al. 2017,
"Axiomatic attribution for deep networks") per attention sample, and attention attribution (Hao et
al. 2021, "Self-attention attribution").

What is attributed. f = P(target | text), a softmax probability of the head over the model's K
classes (`model.classes`): target a class name, its index, or None / "predicted" for the class of
E[f(z)] (the argmax of the samples' mean P, by `bam_viz.core.task.resolve_target`). IG is taken
with respect to the output of the embedding module (`model.bert.embeddings`, word + position +
type embeddings after their LayerNorm), so that the path runs through points the layers above can
read. This is what Captum's
`LayerIntegratedGradients(forward, model.bert.embeddings)` computes; it is computed with Captum's
`IntegratedGradients` on that module's output, handed to `BamClassifier.lower(embedded=...)`,
because `LayerIntegratedGradients` puts the path in place with a forward hook on the embedding
module, and the app's sessions share one model: another session's pass during an attribution
would meet the hook and read the path's embeddings instead of its own sentence. A token's
attribution is the sum over the embedding dimension: completeness then holds per
network, sum_t a_t = f(x) - f(baseline), and Captum's convergence delta is what is left of it.

Baseline. [CLS] [PAD] ... [PAD] [SEP]: the [PAD] token at every position of the text but the first
and the last, whose [CLS] and [SEP] are kept (the head reads [CLS]; a path that moved it would
attribute the classifier's own read-out). Position and type embeddings are what the embedding
module computes for those ids, and every position stays attended (the mask is the text's).

Steps. Gauss-Legendre quadrature (Captum's default) with `steps` nodes, 32 by default. Each network
below is smooth along the path, but not always gently so: P is a sigmoid of a logit that can cross
from -3 to +3 within an eighth of the path (whose middle points are no sentence the model was trained
on), and the bump this makes in dP/dalpha can fall between nodes 0.05 apart, for a sampled network
or the deterministic softmax model alike (no sampling is involved; docs/performance.md,
"Attributions", has how often). So a network whose |delta| is not below `tolerance` (0.01) is
integrated again, alone, with twice the nodes, up to MAX_STEPS: `nodes` says what each took;
`tolerance=None` keeps exactly `steps`.

One network per sample. Integrated Gradients needs a function; an attention sample is one only if
its randomness is held fixed along the path. Sample s's reparameterisation noise is recorded once at
the real input (a `NoiseTape`, passed where the generator goes) and replayed at every path point,
so that row s is one deterministic network, and at the real input exactly the draw of
`predict_samples([text], n_samples, seed)[0, s]` (the recording pass IS that pass). Family by family:
  Weibull, Lognormal: the uniforms, the normals;   mc-dropout: the dropout masks;
  Dirichlet: each Gamma draw's CDF value u = P(alpha, G), solved again as alpha moves, with the
    implicit reparameterisation gradient (Figurnov et al. 2018); the boost's uniform is replayed;
  categorical: the sampled key index of the top layer's [CLS] alignment (its one-hot). The alignment
    is marginalised exactly in training; a sample is one key, and a key re-drawn at every input would
    make a step function. With its key fixed the network is smooth.
  softmax (deterministic): every sample is the same network: it is computed once and `samples` is
    that row repeated n_samples times (a view), as `predict_samples` repeats its one answer.
The deterministic pass f(softmax) (every stochastic layer at softmax(psi), dropout off: BAM's
test-time network, `bam_viz.inference.gaps`) is one more row, `softmax`. It is not f(E[w]), the pass at the
samples' mean weights: for Weibull and Lognormal scores softmax(psi) is not the weights' mean.

Batching. Captum's batch is one copy of the text per network (samples, then the softmax pass); it
expands them step-major over the path, and one forward/backward runs every (point, network) row,
cut into chunks of path points when the rows would pass the working memory ($BAM_VIZ_WORK_MB).

Attention attribution (`layer=L`): IG with respect to layer L's attention weights A, along
alpha * A for alpha in [0, 1] (a zero baseline): Attr(A) = A * int_0^1 dF(alpha A)/dA d alpha, an
(H, T, T) map per network, each with its own A (the weights a network's pass used, after any dropout
on them). A reaches the computation through `bam_viz.nn.attention.probe`, an override of the attention
core's weights held in a context variable (not a module hook, so other threads' passes through the
shared model never see it). In the top layer only [CLS]'s row is read: its other rows, often not
even computed, have attribution (and, where not computed, weights) zero.
"""

from __future__ import annotations

import math
import numbers
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from bam_viz.core.budgets import FLOAT32_BYTES, attention_bytes
from bam_viz.core.cache import WORK, WORK_ENV
from bam_viz.core.inputs import _integer, check_n_samples, check_seed, check_text, shown
from bam_viz.core.task import resolve_target
from bam_viz.families.sampling import NoiseTape
from bam_viz.nn.attention import Mode, probe

BASELINE = "[CLS] [PAD] ... [PAD] [SEP]: [PAD] at every position of the text, [CLS] and [SEP] kept"
MIN_STEPS, MAX_STEPS = 2, 512
TOLERANCE = 0.01                  # completeness |delta| each network is integrated to, by default
# Float32 numbers a (path point, network) row keeps for its backward pass, per layer: copies of the
# (H, T, T) attention (scores, log-softmax, draws and their transforms, weights) and of the (T, C)
# states (q, k, v, context, projections, norms, the 4C-wide feed-forward): an estimate above the
# measured peaks (docs/performance.md, "Attributions").
ATTENTION_COPIES, STATE_COPIES = 8, 18


def _band(samples: torch.Tensor) -> torch.Tensor:
    """(2, ...) the 5% and 95% quantiles over the first (sample) dimension."""
    q = torch.tensor([0.05, 0.95], dtype=samples.dtype, device=samples.device)
    return torch.quantile(samples, q, dim=0)


@dataclass(frozen=True)
class AttentionAttribution:
    """Hao et al.'s attribution of one layer's attention weights, per network (heads H, tokens T)."""

    layer: int
    softmax: torch.Tensor         # (H, T, T) the deterministic pass's, every stochastic layer at softmax(psi)
    samples: torch.Tensor         # (S', H, T, T) sample s's network, with its own weights A_s
    delta: torch.Tensor           # (S'+1,) sum of the map - (f(A) - f(0)): samples, then the softmax pass
    weights: torch.Tensor         # (S'+1, H, T, T) the A attributed: samples, then the softmax pass
    nodes: torch.Tensor           # (S'+1,) quadrature nodes each network's integral took

    @property
    def mean(self) -> torch.Tensor:
        """(H, T, T) the mean over samples."""
        return self.samples.mean(0)

    @property
    def band(self) -> torch.Tensor:
        """(2, H, T, T) the 5% and 95% quantiles over samples, per cell."""
        return _band(self.samples)


@dataclass(frozen=True)
class Attribution:
    """Integrated Gradients of P(target) per token, for each attention sample and for the
    deterministic pass (tensors on the CPU, as `predict_samples` answers)."""

    tokens: list[str]
    softmax: torch.Tensor         # (T,) the deterministic pass's, every stochastic layer at softmax(psi)
    samples: torch.Tensor         # (S', T) sample s's, its noise held fixed along the path
    delta: torch.Tensor           # (S'+1,) Captum's convergence delta: samples, then the softmax pass
    probs: torch.Tensor           # (S'+1,) f(x) = P(target): samples, then the softmax pass
    baseline_probs: torch.Tensor  # (S'+1,) f(baseline), the same order
    target: str                   # the class attributed: its name in model.classes
    target_index: int             # its index, the column of every (.., K) probability
    steps: int                    # the Gauss-Legendre nodes asked for
    nodes: torch.Tensor           # (S'+1,) the nodes each network's integral took (steps, or more: see TOLERANCE)
    baseline: str
    attention: AttentionAttribution | None = None

    @property
    def mean(self) -> torch.Tensor:
        """(T,) the mean over samples: IG being linear in f, the attribution of the Monte Carlo
        predictive probability (1/S') sum_s f_s, what `predict` returns."""
        return self.samples.mean(0)

    @property
    def band(self) -> torch.Tensor:
        """(2, T) the 5% and 95% quantiles over samples, per token."""
        return _band(self.samples)


def check_steps(steps) -> int:
    """An int in [MIN_STEPS, MAX_STEPS]: the quadrature's nodes."""
    n = _integer(steps, "steps")
    if not MIN_STEPS <= n <= MAX_STEPS:
        raise ValueError(f"steps must be between {MIN_STEPS} and {MAX_STEPS}, got {shown(n)}")
    return n


def check_target(classes, target) -> int | None:
    """The index of `target` among `classes` (a class name or an index), or None for the predicted
    class (None or "predicted": resolved once the probabilities are known). Anything else is a
    ValueError that lists the classes."""
    if target is None or (isinstance(target, str) and target == "predicted"):
        return None
    try:
        return resolve_target(classes, target)
    except ValueError:
        raise ValueError(f"target must be a class of the model ({', '.join(map(repr, classes))}), its index "
                         f"(0 to {len(classes) - 1}), or None / 'predicted' for the predicted class; "
                         f"got {shown(target)}") from None


def _check_layer(model, layer) -> int | None:
    if layer is None:
        return None
    n = _integer(layer, "layer")
    if not 0 <= n < model.n_layers:
        raise ValueError(f"layer must be between 0 and {model.n_layers - 1}, got {shown(n)}")
    if n == model.n_layers - 1 and model.attention_family.hard_alignment:
        raise ValueError(f"layer {n} of {model.name} is a hard alignment of [CLS], not attention weights: "
                         f"attribute a layer below {n}")
    return n


def row_bytes(model, tokens: int) -> int:
    """What one (path point, network) row holds for its backward pass (see ATTENTION_COPIES)."""
    H, C = model.n_heads, model.bert.config.hidden
    return (attention_bytes(model.n_layers * ATTENTION_COPIES, H, tokens)
            + FLOAT32_BYTES * model.n_layers * STATE_COPIES * tokens * C)


class _Networks:
    """A text's S' sampled networks and its deterministic one (network S, every stochastic layer at
    softmax(psi)), recorded once at the real input; `batch` evaluates any of them together along a path."""

    def __init__(self, model, ids, n_samples: int, seed: int, hyper, layer: int | None):
        self.model, self.ids, self.hyper, self.layer = model, ids, hyper, layer
        self.S = n_samples if model.stochastic else 1
        self.tape = NoiseTape(torch.Generator(device=model.device).manual_seed(seed))
        self.core = model.bert.layers[layer].attention.self.core if layer is not None else None
        self.in_lower = layer is not None and layer < model.first_stochastic

    def mask(self, rows: int) -> torch.Tensor:
        return torch.ones(rows, self.ids.shape[1], dtype=torch.bool, device=self.ids.device)

    def probing(self, replace=None):
        """The probe on layer `layer`'s weights: `replace` (B, H, T, T) cut to the rows the pass has."""
        if self.core is None or replace is None:
            return nullcontext()

        def fn(weights):
            out = replace[..., : weights.shape[-2], :]
            if out.shape != weights.shape:
                raise RuntimeError(f"layer {self.layer}'s weights are {tuple(weights.shape)}, "
                                   f"the probe holds {tuple(out.shape)}")
            return out

        return probe(self.core, fn)

    def record(self):
        """The recording pass at the real input, B = 1: predict_samples' own pass, then the
        deterministic pass. Returns P (S+1, K), the states below the first stochastic layer (1, T, C), and with
        a layer, its weights per network (S+1, H, T, T), rows the pass does not compute left zero."""
        m, T = self.model, self.ids.shape[1]
        seen = []

        def keep(weights):
            seen.append(weights)
            return weights

        read = probe(self.core, keep) if self.core is not None else nullcontext()
        with torch.no_grad(), read:
            x, _ = m.lower(self.ids, self.mask(1))
            sampled, _, _ = m.upper(x, self.mask(1), n_samples=self.S, generator=self.tape, hyper=self.hyper)
            deterministic, _, _ = m.upper(x, self.mask(1), mode=Mode.MEAN, hyper=self.hyper)
        weights = None
        if self.core is not None:
            # One pass in the lower layers serves every network; above, the sampled pass and the softmax one.
            parts = [seen[0].expand(self.S + 1, -1, -1, -1)] if self.in_lower else seen
            weights = torch.cat([torch.nn.functional.pad(w, (0, 0, 0, T - w.shape[-2])) for w in parts])
        return torch.cat([sampled, deterministic]).softmax(-1), x, weights

    def batch(self, networks: list[int], states=None) -> _Batch:
        return _Batch(self, networks, states)


class _Batch:
    """Networks `networks` (ascending; S is the softmax pass) as one function of R = len(networks)
    rows per path point, step-major: row k R + j is network networks[j] at point k."""

    def __init__(self, nets: _Networks, networks: list[int], states=None):
        self.nets, self.states, self.R = nets, states, len(networks)
        self.samples = [i for i in networks if i < nets.S]
        self.softmax = nets.S in networks

    def upper(self, x, n: int, weights=None):
        """P (n R, K) from the lower layers' states of n R rows; `weights` (n R, H, T, T) replace
        layer `layer`'s in the upper layers."""
        nets, m, k = self.nets, self.nets.model, len(self.samples)
        x = x.view(n, self.R, *x.shape[1:])
        if weights is not None and not nets.in_lower:
            weights = weights.view(n, self.R, *weights.shape[1:])
        parts = []
        if k:
            ws = None if weights is None or nets.in_lower else weights[:, :k].reshape(n * k, *weights.shape[2:])
            tape = nets.tape.replay(torch.tensor(self.samples, device=x.device).repeat(n))   # row j: samples[j % k]
            with nets.probing(ws):
                sampled, _, _ = m.upper(x[:, :k].reshape(n * k, *x.shape[2:]), nets.mask(n * k), n_samples=1,
                                        generator=tape, hyper=nets.hyper)
            if not tape.complete:
                raise RuntimeError("the replayed pass made fewer draws than the recorded one: not the same pass")
            parts.append(sampled.softmax(-1).view(n, k, -1))
        if self.softmax:
            wm = None if weights is None or nets.in_lower else weights[:, k]
            with nets.probing(wm):
                logits, _, _ = m.upper(x[:, k], nets.mask(n), mode=Mode.MEAN, hyper=nets.hyper)
            parts.append(logits.softmax(-1).view(n, 1, -1))
        return torch.cat(parts, 1).reshape(n * self.R, -1)                              # (n R, K)

    def of_ids(self, ids):
        """P (n R, K) of token ids (n R, T)."""
        return self.of_embedded(self.nets.model.bert.embeddings(ids))

    def of_embedded(self, embedded):
        """P (n R, K) of the embedding module's output (n R, T, C): a point of the path."""
        x, _ = self.nets.model.lower(None, self.nets.mask(embedded.shape[0]), embedded=embedded)
        return self.upper(x, embedded.shape[0] // self.R)

    def of_weights(self, weights):
        """P (n R, K) with layer `layer`'s weights replaced by `weights` (n R, H, T, T), from the
        lower layers' states at the real input, unless the layer is among them."""
        nets, rows = self.nets, weights.shape[0]
        if nets.in_lower:
            with nets.probing(weights):
                x, _ = nets.model.lower(nets.ids.expand(rows, -1), nets.mask(rows))
        else:
            x = self.states.expand(rows, -1, -1)
        return self.upper(x, rows // self.R, weights)


def _integrate(run, n_networks: int, steps: int, tolerance: float | None):
    """Per network, IG by `run(networks, steps)` -> (attributions (R, ...), deltas (R,)), integrated
    again with twice the nodes (up to MAX_STEPS) while its |delta| is not below `tolerance`.
    Returns the attributions (N, ...), deltas (N,) and nodes used (N,) of the N networks."""
    found, delta = [None] * n_networks, torch.zeros(n_networks)
    nodes = torch.zeros(n_networks, dtype=torch.long)
    todo, n = list(range(n_networks)), steps
    while todo:
        attributions, d = run(todo, n)
        for j, i in enumerate(todo):
            found[i], delta[i], nodes[i] = attributions[j], d[j], n
        if tolerance is None or n >= MAX_STEPS:
            break
        todo = [i for j, i in enumerate(todo) if abs(float(d[j])) >= tolerance]
        n = min(2 * n, MAX_STEPS)
    return torch.stack(found), delta, nodes


def check_tolerance(tolerance) -> float | None:
    """None, or a positive finite number: the completeness |delta| each network is integrated to."""
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real):
        raise TypeError(f"tolerance must be a number or None, not {type(tolerance).__name__} {shown(tolerance)}")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance must be a positive finite number or None, got {shown(tolerance)}")
    return float(tolerance)


def attribute(model, text: str, n_samples: int = 8, seed: int = 0, steps: int = 32,
              target: int | str | None = None, layer: int | None = None, tolerance: float | None = TOLERANCE,
              **hyper: float) -> Attribution:
    """Integrated Gradients of P(target) per token for each of `n_samples` attention samples (each
    held fixed along the path) and the deterministic pass; `target` a class of `model.classes` by
    name or index, or None / "predicted" for the class of E[f(z)] over these samples; with `layer`,
    also Hao et al.'s attribution of that layer's attention weights. `steps` Gauss-Legendre nodes,
    doubled for a network whose completeness delta is not below `tolerance` (None: `steps` exactly).
    See the module's docstring."""
    from captum.attr import IntegratedGradients

    text = check_text(text)
    n_samples, seed, steps = check_n_samples(n_samples), check_seed(seed), check_steps(steps)
    classes = tuple(model.classes)
    index = check_target(classes, target)
    layer, tolerance = _check_layer(model, layer), check_tolerance(tolerance)
    resolved = model.hyper(**hyper)
    ids, tokens, _ = model.tokenizer.encode(text)
    T = len(ids)
    S = n_samples if model.stochastic else 1
    per_row = row_bytes(model, T)
    if (S + 1) * per_row > WORK.budget:
        fit = max(WORK.budget // per_row - 1, 0)
        raise ValueError(f"n_samples={n_samples} at {T} tokens needs {(S + 1) * per_row / 2**20:,.1f} MB per path "
                         f"point, over the working memory of {WORK.budget / 2**20:.0f} MB (${WORK_ENV}): at most "
                         f"{fit} samples fit at this length; use fewer samples or a shorter text")
    model.eval()

    with torch.inference_mode(False):
        ids = torch.tensor([ids], device=model.device)
        nets = _Networks(model, ids, n_samples, seed, resolved, layer)
        probs, states, weights = nets.record()                                      # (S+1, K)
        probs = probs.cpu()
        if index is None:
            index = resolve_target(classes, None, probs[:S].mean(0).tolist())
        baseline = torch.full_like(ids, model.tokenizer.pad_id)
        baseline[:, 0], baseline[:, -1] = ids[:, 0], ids[:, -1]

        def integrated(method, inputs, baselines, networks, n):
            """Captum's attribution and delta for `networks`, cut into chunks of path points that fit
            the working memory."""
            R = len(networks)
            points = max(1, min(n, WORK.budget // (R * per_row)))
            with WORK.hold(points * R * per_row):
                out, delta = method.attribute(inputs, baselines=baselines, target=index, n_steps=n,
                                              method="gausslegendre", internal_batch_size=points * R,
                                              return_convergence_delta=True)
            return out.detach().cpu(), delta.detach().cpu()

        with torch.no_grad():
            embedded, embedded_baseline = model.bert.embeddings(ids), model.bert.embeddings(baseline)   # (1, T, C)

        def tokens_run(networks, n):
            batch, R = nets.batch(networks), len(networks)
            ig = IntegratedGradients(batch.of_embedded)
            out, delta = integrated(ig, embedded.expand(R, -1, -1), embedded_baseline.expand(R, -1, -1), networks, n)
            return out.sum(-1), delta                                               # (R, T): summed over C

        per_token, delta, nodes = _integrate(tokens_run, S + 1, steps, tolerance)
        with torch.no_grad():
            f_baseline = nets.batch(list(range(S + 1))).of_ids(baseline.expand(S + 1, -1))[:, index].cpu()
        attention = maps = None
        if layer is not None:
            def attention_run(networks, n):
                ig = IntegratedGradients(nets.batch(networks, states).of_weights)
                A = weights[networks]
                return integrated(ig, A, torch.zeros_like(A), networks, n)

            maps, a_delta, a_nodes = _integrate(attention_run, S + 1, steps, tolerance)   # (S+1, H, T, T)
            attention = AttentionAttribution(layer, maps[S], _samples(maps[:S], n_samples),
                                             _rows(a_delta, S, n_samples), _rows(weights.cpu(), S, n_samples),
                                             _rows(a_nodes, S, n_samples))
    for what, values in (("prediction", probs), ("attribution", per_token), ("attention attribution", maps)):
        if values is not None and not torch.isfinite(values).all():
            raise ValueError(f"the {what} of {model.name} is not finite for this text at {dict(resolved)}: "
                             "its probabilities under- or overflow; try hyperparameters nearer the trained ones")
    return Attribution(
        tokens=list(tokens), softmax=per_token[S], samples=_samples(per_token[:S], n_samples),
        delta=_rows(delta, S, n_samples), probs=_rows(probs[:, index], S, n_samples),
        baseline_probs=_rows(f_baseline, S, n_samples), target=classes[index], target_index=index, steps=steps,
        nodes=_rows(nodes, S, n_samples), baseline=BASELINE, attention=attention)


def _samples(rows: torch.Tensor, n_samples: int) -> torch.Tensor:
    """(S', ...) per sample: a deterministic model's one network repeated (a view)."""
    return rows.expand(n_samples, *rows.shape[1:]) if rows.shape[0] == 1 else rows


def _rows(per_network: torch.Tensor, S: int, n_samples: int) -> torch.Tensor:
    """(S'+1, ...) samples then the softmax pass, from the S+1 networks computed."""
    return torch.cat([_samples(per_network[:S], n_samples), per_network[S:]])


__all__ = ["Attribution", "AttentionAttribution", "BASELINE", "TOLERANCE", "attribute", "check_steps",
           "check_target", "check_tolerance"]
