"""A BERT classifier (MiniLM by default, K classes) whose upper attention layers are random: the BAM model.

Layers below the first stochastic one are deterministic and cached per text by `explain()`, so
moving a slider recomputes only the stochastic layers. Samples ride in the batch axis
(sample-major), so S attention samples cost one batched pass, not S passes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from bam_viz.core.cache import WORK, WORK_ENV, explain_bytes
from bam_viz.core.inputs import check_batch_size, check_n_samples, check_seed, check_texts
from bam_viz.core.task import CLASSES
from bam_viz.families import AttentionFamily, Hyper, HyperSpec
from bam_viz.inference.attribution import Attribution, attribute
from bam_viz.inference.explain import DEFAULT_RNG, ExplainCache, explain
from bam_viz.inference.posterior import LabelPosterior, label_posterior
from bam_viz.inference.result import ExplainResult
from bam_viz.nn.attention import AttentionConfig, Mode, Trace, dropout
from bam_viz.nn.backbone import build_bert, read_backbone, tokenizer_for
from bam_viz.nn.encoder import Bert, LoRALinear

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
    classes: tuple[str, ...] = CLASSES  # the head's outputs, in order
    backbone: str | None = None         # a BERT folder (config.json, model.safetensors, tokenizer); None: MiniLM

    @property
    def family(self) -> str:
        return self.attention.family

    def to_dict(self) -> dict:
        d = asdict(self)
        d["attention"] = self.attention.to_dict()
        d["stochastic_layers"] = list(self.stochastic_layers)
        d["classes"] = list(self.classes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        d = dict(d)
        d["attention"] = AttentionConfig.from_dict(d["attention"])
        d["stochastic_layers"] = tuple(d["stochastic_layers"])
        d["classes"] = tuple(d.get("classes", CLASSES))
        return cls(**d)

    def __post_init__(self):
        if len(self.classes) < 2 or len(set(self.classes)) != len(self.classes) \
                or not all(isinstance(c, str) and c for c in self.classes):
            raise ValueError(f"a model needs at least two distinct, non-empty class names, not {list(self.classes)!r}")


class BamClassifier(nn.Module):
    """A BERT backbone (the packaged MiniLM, or `config.backbone`) with low-rank adapters, the chosen
    attention family in `stochastic_layers`, and a linear head on the [CLS] state, one output per
    class. A family with a hard alignment (`categorical`) aligns the [CLS] query of the top layer to
    one key shared by all heads, marginalised exactly (Deng et al. 2018)."""

    def __init__(self, config: ModelConfig, bert: Bert | None = None):
        super().__init__()
        self.config = config
        backbone = read_backbone(config.backbone)
        n_layers = backbone.config.n_layers
        if self.attention_family.hard_alignment and config.stochastic_layers != (n_layers - 1,):
            raise ValueError(f"{config.family} attention is a latent alignment of the top layer only")
        if not all(0 <= i < n_layers for i in config.stochastic_layers):
            raise ValueError(f"stochastic layers {list(config.stochastic_layers)} do not exist in a "
                             f"{n_layers}-layer backbone")
        per_layer = [config.attention if i in config.stochastic_layers else AttentionConfig()
                     for i in range(n_layers)]
        self.bert = bert if bert is not None else build_bert(backbone, per_layer)
        for p in self.bert.parameters():
            p.requires_grad_(False)
        if config.lora_rank:
            self._add_lora(config.lora_rank)
        for name, p in self.bert.named_parameters():
            if "LayerNorm" in name or "prior_net" in name:
                p.requires_grad_(True)
        self.head = nn.Linear(backbone.config.hidden, len(config.classes))
        self.tokenizer = tokenizer_for(backbone, config.max_tokens)
        self.backbone = backbone
        self.explain_cache = ExplainCache()
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
        self.explain_cache.clear()

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
    def classes(self) -> tuple[str, ...]:
        """The class names, in the order of every (.., K) probability this model returns."""
        return self.config.classes

    @property
    def n_classes(self) -> int:
        return len(self.config.classes)

    @property
    def attention_family(self) -> AttentionFamily:
        return self.config.attention.attention_family

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
        return self.attention_family.stochastic or self.config.mc_dropout

    @property
    def attention_dropout(self) -> float:
        """p of the dropout kept on at inference in the stochastic layers (mc-dropout: on their attention
        weights and both residual branches), else 0. A dropped weight is 0 and a kept one is scaled by
        1/(1 - p) (`bam_viz.nn.attention.dropout`), so a sampled row sums to 1 only on average, and a
        weight can reach 1/(1 - p)."""
        return self.config.dropout if self.config.mc_dropout else 0.0

    @property
    def slider_specs(self) -> tuple[HyperSpec, ...]:
        """The hyperparameters a slider moves, with their ranges and labels."""
        return self.attention_family.slider_specs

    @property
    def hyper_names(self) -> list[str]:
        """Slider hyperparameters that change this model's output."""
        return [s.name for s in self.slider_specs]

    @property
    def trained_hyper(self) -> dict[str, float]:
        return dict(self.config.attention.hyper)

    def hyper(self, **overrides: float | None) -> Hyper:
        """The trained hyperparameters with inference-time overrides (None keeps), validated."""
        return self.config.attention.with_hyper(**overrides)

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
    def _dropout_p(self, layer: int, mode: Mode) -> float:
        if self.training:
            return self.config.dropout
        if mode is Mode.SAMPLE and layer in self.config.stochastic_layers:
            return self.attention_dropout
        return 0.0

    def lower(self, ids, mask, generator=None, trace: Trace = Trace.NONE, embedded: torch.Tensor | None = None):
        """Embeddings and the deterministic layers below the first stochastic one; `embedded` (B, T, C)
        stands for the embedding module's output (Integrated Gradients walks a path through it)."""
        x = self.bert.embeddings(ids) if embedded is None else embedded
        if self.training:
            x = dropout(x, self.config.dropout, generator)
        traces = []
        for i in range(min(self.first_stochastic, self.n_layers)):
            x, mask, t = self.bert.layers[i](x, mask, p=self._dropout_p(i, Mode.MEAN), generator=generator,
                                             mode=Mode.MEAN, trace=trace)
            traces.append(t)
        return x, traces

    def upper(self, x, mask, *, n_samples: int = 1, generator=None, mode: Mode = Mode.SAMPLE,
              hyper: Hyper | None = None, trace: Trace = Trace.NONE, cls_only: bool = True):
        """Layers from the first stochastic one up, on (B, T, C) states; returns logits
        (n_samples * B, K), per-layer traces and the summed KL (n_samples * B,).

        Only [CLS] feeds the head, so the top layer is told (`cls_only`) that only its row 0 is
        read; its draws are still the full pass's: the same numbers, the generator left in the
        same state. The first layer here gets its input untiled and tiles it itself (see
        `Layer.forward`), so S samples cost one batched pass."""
        hyper = self.hyper() if hyper is None else hyper
        reps = max(n_samples, 1)
        traces, kl = [], x.new_zeros(x.shape[0] * reps)
        top = self.n_layers - 1
        for i in range(min(self.first_stochastic, self.n_layers), self.n_layers):
            stochastic = i in self.config.stochastic_layers
            x, mask, t = self.bert.layers[i](
                x, mask, n_samples=reps, generator=generator, mode=mode if stochastic else Mode.MEAN,
                hyper=hyper if stochastic else None, trace=trace, p=self._dropout_p(i, mode),
                cls_only=cls_only and i == top)
            reps = 1
            traces.append(t)
            if t is not None:  # the untiled layer's KL is one per input row: the same in every sample
                layer_kl = t.kl.sum(-1)
                kl = kl + layer_kl.repeat(kl.shape[0] // layer_kl.shape[0])
        cls = x[:, 0].repeat(reps, 1)  # reps > 1 only when no layer ran (a deterministic model)
        if self.training:
            cls = dropout(cls, self.config.dropout, generator)
        return self.head(cls), traces, kl

    def exact_log_marginal(self, x, mask, generator=None):
        """log p(y|x) (B, K) by exact enumeration of the top layer's alignment z (Deng et al. 2018,
        eq. 1), from the states below it; also log p(z|x) (B, T) and log p(y|x, z) (B, T, K)."""
        family = self.attention_family
        if not family.hard_alignment:
            raise ValueError(f"{family.name} attention has no alignment to enumerate")
        for i in range(min(self.first_stochastic, self.n_layers), self.n_layers - 1):
            x, mask, _ = self.bert.layers[i](x, mask, generator=generator, mode=Mode.MEAN,
                                             p=self._dropout_p(i, Mode.MEAN))
        states, log_pz = self.bert.layers[-1].states_per_key(
            x, mask, self._dropout_p(self.n_layers - 1, Mode.SAMPLE), generator)      # (B, T, C)
        log_lik = self.head(states).log_softmax(-1).masked_fill(~mask[..., None], 0.0)  # (B, T, K)
        log_marginal = family.exact_log_marginal(log_pz[:, None, :], log_lik.transpose(1, 2))
        return log_marginal, log_pz, log_lik

    # ---- public API ---------------------------------------------------------------------------
    def _batches(self, texts, batch_size):
        for i in range(0, len(texts), batch_size):
            chunk = texts[i : i + batch_size]
            ids, mask = self.tokenizer.batch(chunk)
            yield ids.to(self.device), mask.to(self.device)

    @torch.inference_mode()
    def predict_samples(self, texts: list[str], n_samples: int = 32, seed: int = 0, batch_size: int = 32,
                        **hyper: float) -> torch.Tensor:
        """(N, S, K) predictive probabilities, one per attention sample; deterministic models repeat."""
        texts, batch_size = check_texts(texts), check_batch_size(batch_size)
        n_samples, seed = check_n_samples(n_samples), check_seed(seed)
        resolved = self.hyper(**hyper)
        self.eval()
        if len(texts) * n_samples * self.n_classes * 4 > WORK.budget:   # the (N, S, K) float32 answer itself
            raise ValueError(f"n_samples={n_samples} for {len(texts)} texts is {len(texts) * n_samples:,} predictions, "
                             f"over the working memory of {WORK.budget / 2**20:.0f} MB (${WORK_ENV}): "
                             "use fewer samples or fewer texts at once")
        g = torch.Generator(device=self.device).manual_seed(seed)
        S = n_samples if self.stochastic else 1
        n_stochastic = len(self.config.stochastic_layers) if self.stochastic else 0
        out = []
        for ids, mask in self._batches(texts, batch_size):
            # A pass holds ~3 (S*B, H, T, T) tensors a stochastic layer: a batch that would pass the
            # working memory is cut into smaller ones (the same numbers only for the same cut), and a
            # single text that would is refused.
            T = ids.shape[1]
            per_text = explain_bytes(S, 0, n_stochastic, self.n_heads, T)
            if per_text > WORK.budget:
                raise ValueError(f"n_samples={n_samples} at {T} tokens needs {per_text / 2**20:,.1f} MB of attention "
                                 f"for one text, over the working memory of {WORK.budget / 2**20:.0f} MB "
                                 f"(${WORK_ENV}): use fewer samples or a shorter text")
            step = max(1, min(ids.shape[0], WORK.budget // max(per_text, 1)))
            for i in range(0, ids.shape[0], step):
                with WORK.hold(per_text * min(step, ids.shape[0] - i)):
                    x, _ = self.lower(ids[i : i + step], mask[i : i + step])
                    logits, _, _ = self.upper(x, mask[i : i + step], n_samples=S, generator=g, hyper=resolved)
                out.append(logits.softmax(-1).view(S, x.shape[0], -1).transpose(0, 1))   # (B, S, K)
        probs = torch.cat(out).cpu()
        # A deterministic model's S identical samples are a view of its one pass, never S copies.
        return probs.expand(-1, n_samples, -1) if S == 1 else probs

    @torch.inference_mode()
    def predict_softmax(self, texts: list[str], batch_size: int = 64, **hyper: float) -> torch.Tensor:
        """(N, K) f(softmax): the deterministic pass, every stochastic layer at softmax(psi) (the mean
        of its unnormalised scores, not of its normalised weights: `bam_viz.inference.gaps`), dropout off."""
        texts, batch_size = check_texts(texts), check_batch_size(batch_size)
        resolved = self.hyper(**hyper)
        self.eval()
        out = []
        for ids, mask in self._batches(texts, batch_size):
            x, _ = self.lower(ids, mask)
            logits, _, _ = self.upper(x, mask, mode=Mode.MEAN, hyper=resolved)
            out.append(logits.softmax(-1))
        return torch.cat(out).cpu()

    def predict(self, texts: list[str], n_samples: int = 32, seed: int = 0, **hyper: float) -> torch.Tensor:
        """(N, K) Monte Carlo predictive probabilities E[f(z)], batched."""
        return self.predict_samples(texts, n_samples=n_samples, seed=seed, **hyper).mean(1)

    def explain(self, text: str, n_samples: int = 32, seed: int = 0, *, cache: bool = True,
                target: int | str | None = None, rng: str = DEFAULT_RNG, **hyper: float) -> ExplainResult:
        """Everything the explorer draws for one sentence, its one-class figures (gaps, errors) for
        `target` (a class name, an index, or None for the predicted class): see
        `bam_viz.inference.explain.explain`."""
        return explain(self, text, n_samples=n_samples, seed=seed, hyper=self.hyper(**hyper), cache=cache,
                       target=target, rng=rng)

    def attribute(self, text: str, n_samples: int = 8, seed: int = 0, steps: int = 32,
                  target: int | str | None = None, layer: int | None = None, **hyper: float) -> Attribution:
        """Integrated Gradients per token for each attention sample and the deterministic pass, with
        the attention attribution of `layer` on request; `target` a class name, an index, or None for
        the predicted class: see `bam_viz.inference.attribution.attribute`."""
        return attribute(self, text, n_samples=n_samples, seed=seed, steps=steps, target=target, layer=layer,
                         **hyper)

    def label_posterior(self, text: str, n_samples: int = 64, seed: int = 0, layer: int | None = None, *,
                        method: str | None = None, target: int | str | None = None,
                        **hyper: float) -> LabelPosterior:
        """Where the [CLS] query would attend if told each of the K labels (`target` the one shown,
        None the predicted): see `bam_viz.inference.posterior.label_posterior`."""
        return label_posterior(self, text, n_samples, seed, layer, method=method, target=target, **hyper)


__all__ = ["BamClassifier", "ModelConfig", "CLASSES"]
