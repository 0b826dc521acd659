"""A MiniLM sentiment classifier whose upper attention layers are random: the BAM model.

Layers below the first stochastic one are deterministic and cached per text, so moving a slider
recomputes only the stochastic layers. Samples ride in the batch axis (sample-major), so S
attention samples cost one batched pass, not S passes.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from bam_viz.attention import (
    FAMILY_HYPER,
    PRIOR_HYPER,
    ROW_SLICEABLE,
    STOCHASTIC_FAMILIES,
    AttentionConfig,
    AttentionTrace,
    categorical_sample,
    dropout,
    prior_weight_samples,
)
from bam_viz.encoder import Bert, BertConfig, LoRALinear, Tokenizer
from bam_viz.result import ExplainResult, entropy

CLASSES = ["negative", "positive"]
LORA_TARGETS = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")


@dataclass(frozen=True)
class ModelConfig:
    name: str
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    stochastic_layers: tuple[int, ...] = (3, 4, 5)
    lora_rank: int = 8
    dropout: float = 0.1
    mc_dropout: bool = False        # keep dropout on at inference in the stochastic layers (Gal & Ghahramani 2016)
    max_tokens: int = 128
    description: str = ""

    @property
    def family(self) -> str:
        return self.attention.family

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stochastic_layers"] = list(self.stochastic_layers)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        d = dict(d)
        d["attention"] = AttentionConfig(**d["attention"])
        d["stochastic_layers"] = tuple(d["stochastic_layers"])
        return cls(**d)


class BamClassifier(nn.Module):
    """MiniLM with low-rank adapters, the chosen attention family in `stochastic_layers`, and a
    linear head on the [CLS] state. `categorical` is a hard latent alignment of the [CLS] query in
    the top layer (one key shared by all heads), marginalised exactly (Deng et al. 2018)."""

    classes = CLASSES

    def __init__(self, config: ModelConfig, bert: Bert | None = None):
        super().__init__()
        self.config = config
        n_layers = BertConfig().n_layers
        if config.family == "categorical" and config.stochastic_layers != (n_layers - 1,):
            raise ValueError("the categorical family is a latent alignment of the top layer only")
        per_layer = [config.attention if i in config.stochastic_layers else AttentionConfig("softmax")
                     for i in range(n_layers)]
        if config.family == "categorical":
            per_layer[-1] = AttentionConfig("softmax")  # enumerated by this class, not sampled by the core
        self.bert = bert if bert is not None else Bert.from_minilm(per_layer)
        for p in self.bert.parameters():
            p.requires_grad_(False)
        if config.lora_rank:
            self._add_lora(config.lora_rank)
        for name, p in self.bert.named_parameters():
            if "LayerNorm" in name or "prior_net" in name:
                p.requires_grad_(True)
        self.head = nn.Linear(BertConfig().hidden, len(CLASSES))
        self.tokenizer = Tokenizer(config.max_tokens)
        self._lower_cache = _LRU(64)      # per text: tokens and the states below the first stochastic layer
        self._sampled_cache = _LRU(2)     # explain()'s S-sample pass; at 128 tokens one holds ~75 MB
        self.card: dict = {}  # the model card, filled by bam_viz.zoo.load

    # ---- construction -------------------------------------------------------------------------
    def _add_lora(self, rank: int):
        for layer in self.bert.layers:
            for path in LORA_TARGETS:
                *parents, leaf = ("attention.self." + path if path in ("query", "key", "value") else path).split(".")
                owner = layer
                for p in parents:
                    owner = getattr(owner, p)
                setattr(owner, leaf, LoRALinear(getattr(owner, leaf), rank))

    def merge_adapters(self) -> BamClassifier:
        """Fold every LoRA update into its frozen weight, for fast inference (training mode ignores it)."""
        for module in self.modules():
            if isinstance(module, LoRALinear):
                module.merge()
        self.clear_caches()
        return self

    def clear_caches(self) -> None:
        """Forget explain()'s per-text states and sampled passes (they are keyed by text and
        settings, not by weights): call it after changing any weight by hand."""
        self._lower_cache.clear()
        self._sampled_cache.clear()

    def train(self, mode: bool = True) -> BamClassifier:
        if mode:
            self.clear_caches()   # training changes the weights the caches were computed with
        return super().train(mode)

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """Only what training changed (adapters, layer norms, prior networks, head)."""
        names = {n for n, p in self.named_parameters() if p.requires_grad}
        return {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items() if k in names}

    # ---- facts the app reads ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def family(self) -> str:
        return self.config.family

    @property
    def description(self) -> str:
        return self.config.description

    @property
    def n_layers(self) -> int:
        return len(self.bert.layers)

    @property
    def n_heads(self) -> int:
        return self.bert.config.n_heads

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens

    @property
    def stochastic(self) -> bool:
        return self.family != "softmax" or self.config.mc_dropout

    @property
    def hyper_names(self) -> list[str]:
        """Slider hyperparameters that change this model's output."""
        return [h for h in FAMILY_HYPER[self.family] if h in ("shape_k", "sigma", "beta", "concentration")]

    @property
    def trained_hyper(self) -> dict[str, float]:
        return {h: getattr(self.config.attention, h) for h in FAMILY_HYPER[self.family]}

    @property
    def first_stochastic(self) -> int:
        if not self.stochastic:
            return self.n_layers
        return min(self.config.stochastic_layers)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.encode(text)[1]

    # ---- forward pieces -----------------------------------------------------------------------
    def _dropout_p(self, layer: int, mode: str) -> float:
        if self.training:
            return self.config.dropout
        if self.config.mc_dropout and mode == "sample" and layer in self.config.stochastic_layers:
            return self.config.dropout
        return 0.0

    def lower(self, ids, mask, generator=None, trace=False):
        """Embeddings and the deterministic layers below the first stochastic one."""
        x = self.bert.embeddings(ids)
        if self.training:
            x = dropout(x, self.config.dropout, generator)
        traces = []
        for i in range(min(self.first_stochastic, self.n_layers)):
            x, t = self.bert.layers[i](x, mask, p=self._dropout_p(i, "mean"), generator=generator,
                                       mode="mean", trace=trace)
            traces.append(t)
        return x, traces

    def upper(self, x, mask, *, n_samples=1, generator=None, mode="sample", hyper=None, trace=False,
              labels=None, cls_only=True):
        """Layers from the first stochastic one up, on (B, T, C) states; returns logits
        (n_samples * B, 2), per-layer traces and the summed KL (n_samples * B,).

        Only [CLS] feeds the head, so, in inference without a trace, the top layer attends from the
        [CLS] query alone (`cls_only`; False computes every row, as a trace must). Its draws are the
        full pass's: the same numbers, and the generator left in the same state."""
        start = min(self.first_stochastic, self.n_layers)
        # Sample-major tiling, row s * B + b. The first layer here gets its input untiled: its
        # queries, keys, values and scores are the same in every sample, so they are computed once
        # and the attention core tiles them while it draws the S weight samples (the same draws,
        # in the same order, as on tiled input).
        reps = n_samples if n_samples > 1 else 1
        traces, kl = [], x.new_zeros(x.shape[0] * reps)
        for i in range(start, self.n_layers):
            layer = self.bert.layers[i]
            categorical_top = self.family == "categorical" and i == self.n_layers - 1
            sampled = mode if i in self.config.stochastic_layers else "mean"
            core_tiles = sampled == "sample" and self.family in STOCHASTIC_FAMILIES and not categorical_top
            if reps > 1 and not core_tiles:
                # Softmax with MC dropout, or the categorical top layer: tile first, so that every
                # sample gets its own dropout masks or its own alignment z.
                x, mask, reps = x.repeat(reps, 1, 1), mask.repeat(reps, 1), 1
            if categorical_top:
                return self._categorical_top(layer, x, mask, mode, generator, trace, traces, labels)
            p = self._dropout_p(i, mode)
            top = i == self.n_layers - 1
            # With dropout on, the full rows keep the random stream; a trace reads every row.
            query_rows = 1 if (cls_only and top and p == 0 and not trace and not self.training and (
                sampled != "sample" or self.family not in STOCHASTIC_FAMILIES
                or self.family in ROW_SLICEABLE)) else None
            kw = dict(mode=sampled, hyper=hyper, trace=trace)
            context, t, _ = layer.attention.self(x, mask, generator=generator, attn_dropout=p,
                                                 n_samples=reps, query_rows=query_rows, **kw)
            if reps > 1:
                x, mask, reps = x.repeat(reps, 1, 1), mask.repeat(reps, 1), 1
            if top and p == 0:
                # Only [CLS] feeds the head: the top layer's feed-forward runs on that row alone
                # (a third of the sampled pass).
                x = layer.post_attention(x[:, :1], context[:, :1])
            else:
                x = layer.post_attention(x, context, p, generator)
            traces.append(t)
            if t is not None:  # the untiled layer's KL is one per input row: the same in every sample
                layer_kl = t.kl.sum(-1)
                kl = kl + layer_kl.repeat(kl.shape[0] // layer_kl.shape[0])
        cls = x[:, 0].repeat(reps, 1)  # reps > 1 only when no layer ran (a deterministic model)
        if self.training:
            cls = dropout(cls, self.config.dropout, generator)
        return self.head(cls), traces, kl

    def _categorical_top(self, layer, x, mask, mode, generator, trace, traces, labels):
        """Top layer with a latent alignment z of the [CLS] query: p(z|x) = mean_h softmax_j(psi_h0j).

        mode "sample": z ~ p(z|x); "mean": soft attention with p(z|x) (f(E[z]));
        "enumerate": log p(y|x) = logsumexp_z log p(z|x) + log p(y|x,z) exactly (Deng et al. eq. 1),
        returned as log-probabilities (B, 2).
        """
        attn = layer.attention.self
        q, k, v = attn.heads(attn.query(x)), attn.heads(attn.key(x)), attn.heads(attn.value(x))
        B, H, T, d = q.shape
        scores = (q[:, :, :1] @ k.transpose(-1, -2) / math.sqrt(d)).squeeze(-2)          # (B, H, T)
        # A finite floor, not -inf: a padded key is -inf in every head, and the logsumexp over heads
        # of an all -inf column has a NaN gradient that log_softmax spreads over the whole row.
        scores = scores.masked_fill(~mask[:, None], torch.finfo(scores.dtype).min)
        log_pz = torch.logsumexp(scores.log_softmax(-1), 1) - math.log(H)                # (B, T)
        x_cls = x[:, :1]                                                                   # (B, 1, C)
        if mode == "enumerate":
            ctx = v.permute(0, 2, 1, 3).reshape(B, T, H * d)                              # context if z = j
            h = layer.post_attention(x_cls.expand(B, T, -1), ctx, self._dropout_p(self.n_layers - 1, mode), generator)
            log_lik = self.head(h).log_softmax(-1)                                        # (B, T, 2)
            log_lik = log_lik.masked_fill(~mask[..., None], 0.0)
            return torch.logsumexp(log_pz[..., None] + log_lik, 1), log_pz, log_lik
        pz = categorical_sample(log_pz, generator) if mode == "sample" else log_pz.exp()  # (B, T)
        ctx = torch.einsum("bt,bhtd->bhd", pz, v).reshape(B, 1, H * d)
        h = layer.post_attention(x_cls, ctx, self._dropout_p(self.n_layers - 1, mode), generator)
        logits = self.head(h[:, 0])
        if trace:
            full = q @ k.transpose(-1, -2) / math.sqrt(d)
            full = full.masked_fill(~mask[:, None, None], float("-inf")).softmax(-1)
            mean_w = full.clone()
            mean_w[:, :, 0] = log_pz.exp()[:, None]
            w = full.clone()
            w[:, :, 0] = pz[:, None]
            traces.append(AttentionTrace(scores=full, mean_weights=mean_w, weights=w, prior_weights=mean_w,
                                         prior_sample_weights=w, kl=scores.new_zeros(B, H)))
        return logits, traces, x.new_zeros(B)

    # ---- public API ---------------------------------------------------------------------------
    def _check_texts(self, texts):
        if isinstance(texts, str):
            raise TypeError("pass a list of texts")
        for t in texts:
            if not isinstance(t, str) or not t.strip():
                raise ValueError("text is empty: type a sentence")

    def _batches(self, texts, batch_size):
        for i in range(0, len(texts), batch_size):
            chunk = texts[i : i + batch_size]
            ids, mask = self.tokenizer.batch(chunk)
            yield ids.to(self.device), mask.to(self.device)

    @torch.inference_mode()
    def predict_samples(self, texts: list[str], n_samples: int = 32, seed: int = 0, batch_size: int = 32,
                        **hyper) -> torch.Tensor:
        """(N, S, 2) predictive probabilities, one per attention sample; deterministic models repeat."""
        self._check_texts(texts)
        self.eval()
        g = torch.Generator(device=self.device).manual_seed(seed)
        S = n_samples if self.stochastic else 1
        out = []
        for ids, mask in self._batches(texts, batch_size):
            x, _ = self.lower(ids, mask)
            logits, _, _ = self.upper(x, mask, n_samples=S, generator=g, hyper=hyper)
            probs = logits.softmax(-1).view(S, ids.shape[0], -1).transpose(0, 1)   # (B, S, 2)
            out.append(probs.expand(-1, n_samples, -1) if S == 1 else probs)
        return torch.cat(out).cpu()

    @torch.inference_mode()
    def predict_mean_field(self, texts: list[str], batch_size: int = 64, **hyper) -> torch.Tensor:
        """(N, 2) f(E[z]): every stochastic layer at its mean attention, dropout off."""
        self._check_texts(texts)
        self.eval()
        out = []
        for ids, mask in self._batches(texts, batch_size):
            x, _ = self.lower(ids, mask)
            logits, _, _ = self.upper(x, mask, mode="mean", hyper=hyper)
            out.append(logits.softmax(-1))
        return torch.cat(out).cpu()

    def predict(self, texts: list[str], n_samples: int = 32, seed: int = 0, **hyper) -> torch.Tensor:
        """(N, 2) Monte Carlo predictive probabilities E[f(z)], batched."""
        return self.predict_samples(texts, n_samples=n_samples, seed=seed, **hyper).mean(1)

    def _lower_cached(self, text: str):
        """Tokens and the deterministic states below the first stochastic layer, cached per text."""
        hit = self._lower_cache.get(text)
        if hit is None:
            ids, tokens, truncated = self.tokenizer.encode(text)
            ids_t = torch.tensor([ids], device=self.device)
            mask = torch.ones_like(ids_t, dtype=torch.bool)
            x, traces = self.lower(ids_t, mask, trace=True)
            hit = self._lower_cache.put(text, (tokens, truncated, ids_t, mask, x, traces))
        return hit

    @torch.inference_mode()
    def explain(self, text: str, n_samples: int = 32, seed: int = 0, **hyper) -> ExplainResult:
        """Everything the explorer draws for one sentence (see `ExplainResult`)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text is empty: type a sentence")
        if n_samples < 1:
            raise ValueError("n_samples must be at least 1")
        self.eval()
        hyper = {k: v for k, v in hyper.items() if v is not None}
        self.config.attention.with_hyper(**hyper)  # validates names and values early
        tokens, truncated, ids, mask, x, lower_traces = self._lower_cached(text)
        S = n_samples
        # The S-sample pass (most of explain's time) does not read the prior's hyperparameters, so
        # moving beta reuses it and recomputes only the one-row mean pass and the prior's draws.
        key = (text, S, seed, tuple(sorted((k, v) for k, v in hyper.items() if k not in PRIOR_HYPER)))
        hit = self._sampled_cache.get(key)
        if hit is None:
            g = torch.Generator(device=self.device).manual_seed(seed)
            logits, traces, _ = self.upper(x, mask, n_samples=S, generator=g, hyper=hyper, trace="samples")
            hit = self._sampled_cache.put(key, (logits, traces))
        logits, traces = hit
        mf_logits, mf_traces, _ = self.upper(x, mask, mode="mean", hyper=hyper, trace="stats")
        sample_probs = logits.softmax(-1).float()                                   # (S, 2)

        if self.family == "softmax":  # no prior: the prior panels repeat the posterior
            alias = {"prior_weights": "mean_weights", "prior_sample_weights": "weights"}
        else:
            alias = {}

        # Prior draws are made when a chart asks for them, one (layer, head) at a time (_PriorDraws);
        # the sampled pass above drew only the posterior's numbers, as predict() does.
        lazy_prior = {i: t.prior_log_probs for i, t in enumerate(traces, start=len(lower_traces))
                      if self.family != "softmax" and i in self.config.stochastic_layers
                      and t.prior_log_probs is not None}

        def layer_rows(attr, sampled, skip=()):
            attr = alias.get(attr, attr)
            rows = []
            for t in lower_traces:
                w = t.mean_weights[0]
                rows.append(w.expand(S, *w.shape) if sampled else w)
            for i, (t, mf) in enumerate(zip(traces, mf_traces, strict=True), start=len(lower_traces)):
                if i in skip:
                    rows.append(None)
                elif sampled:
                    w = getattr(t, attr) if i in self.config.stochastic_layers else t.mean_weights
                    rows.append(w if w.shape[0] == S else w.expand(S, *w.shape[1:]))
                else:
                    rows.append(getattr(mf, attr)[0])
            return rows

        def per_layer(attr, sampled):
            return torch.stack(layer_rows(attr, sampled), 1 if sampled else 0).float().cpu()

        eager_prior = {i: w.float().cpu() for i, w in
                       enumerate(layer_rows("prior_sample_weights", True, skip=lazy_prior)) if w is not None}
        prior_draws = _PriorDraws(eager_prior, lazy_prior, seed, {
            i: self.bert.layers[i].attention.self.core.config.with_hyper(**hyper) for i in lazy_prior})

        kl = torch.stack([torch.zeros_like(t.kl[0]) for t in lower_traces]
                         + [mf.kl[0] for mf in mf_traces]).float().cpu()
        post, prior = {}, {}
        if self.family in ("weibull", "lognormal", "dirichlet"):
            for key in mf_traces[0].posterior_params:
                post[key] = self._stack_params(lower_traces, mf_traces, "posterior_params", key)
            for key in mf_traces[0].prior_params:
                prior[key] = self._stack_params(lower_traces, mf_traces, "prior_params", key)
        notes = []
        if truncated:
            notes.append(f"The text was longer than this model's maximum of {self.max_tokens} tokens; "
                         f"only the first {self.max_tokens - 2} word pieces were used.")
        if self.family == "softmax":
            notes.append("This model has no attention prior: prior panels repeat the posterior.")
        return ExplainResult(
            text=self.tokenizer._tok.decode(ids[0].tolist()) if truncated else text,
            tokens=tokens, classes=list(CLASSES), model_name=self.name, family=self.family,
            stochastic_layers=list(self.config.stochastic_layers) if self.stochastic else [],
            hyper={**self.trained_hyper, **hyper}, n_samples=S, seed=seed, truncated=truncated,
            sample_weights=per_layer("weights", True), mean_weights=per_layer("mean_weights", False),
            prior_weights=per_layer("prior_weights", False), prior_sampler=prior_draws, kl=kl,
            sample_probs=sample_probs.cpu(), mc_probs=sample_probs.mean(0).cpu(),
            mean_field_probs=mf_logits.softmax(-1)[0].float().cpu(),
            posterior_params=post, prior_params=prior, notes=notes,
        )

    @staticmethod
    def _stack_params(lower_traces, mf_traces, attr, key):
        """(L, H, T, T) parameters; zeros in deterministic layers, which have no distribution
        (`ExplainResult.key_densities` answers None there)."""
        rows = [getattr(mf, attr)[key][0] for mf in mf_traces]
        return torch.stack([torch.zeros_like(rows[0])] * len(lower_traces) + rows).float().cpu()


class _LRU:
    """A small least-recently-used cache. One model serves every session of the app, each in a
    thread of its own, so reads and writes take a lock."""

    def __init__(self, maxsize: int):
        self.maxsize, self._items, self._lock = maxsize, OrderedDict(), threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key, value):
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class _PriorDraws:
    """explain()'s attention drawn from the prior, made one (layer, head) at a time, on demand.

    A chart shows one head, so a slider move draws S x T x T prior variables instead of
    S x L x H x T x T (the Gamma draws behind BAM-WC's prior were a quarter of explain()).
    Every (layer, head) has a generator of its own, seeded from (seed, layer, head): the numbers
    do not depend on which heads were asked for before, or in what order. `eager` holds layers whose
    "prior draws" cost nothing (deterministic layers, softmax, the categorical alignment);
    `lazy` maps a stochastic layer to the prior's log pi per sample, (S, H, 1, T).
    """

    def __init__(self, eager: dict, lazy: dict, seed: int, configs: dict):
        self.eager, self.lazy, self.seed, self.configs = eager, lazy, seed, configs

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
            w = prior_weight_samples(self.configs[layer], log_pi.expand(S, 1, T, T), None, g)
        return w[:, 0].float().cpu()


__all__ = ["BamClassifier", "ModelConfig", "CLASSES", "entropy"]
