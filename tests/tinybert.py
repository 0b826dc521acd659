"""A tiny random BERT folder in the Hugging Face layout, for tests of any-backbone code.

`make_tiny_bert` writes what `transformers`' BertModel.save_pretrained and a BERT tokenizer write
(config.json, model.safetensors under HF's names, vocab.txt or tokenizer.json), with weights drawn
from a seeded torch.Generator, in well under a second. The vocabulary holds BERT's special tokens,
every ASCII letter, digit and punctuation mark alone and as a ## continuation, and a few hundred
common English words, so any English sentence tokenises without [UNK].
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch
from safetensors.torch import save_file

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = """
the of and to a in is it you that he was for on are as with his they i at be this have from or one
had by word but not what all were we when your can said there use an each which she do how their if
will up other about out many then them these so some her would make like him into time has look two
more write go see number no way could people my than first water been call who oil its now find long
down day did get come made may part over new sound take only little work know place year live me back
give most very after thing our just name good sentence man think say great where help through much
before line right too mean old any same tell boy follow came want show also around form three small set
put end does another well large must big even such because turn here why ask went men read need land
different home us move try kind hand picture again change off play spell air away animal house point
page letter mother answer found study still learn should world film movie story plot actor acting bad
best better love loved hate boring awful terrible wonderful great fun funny sad happy nice fine poor
excellent worst ever never really quite enough dull brilliant beautiful ugly stupid smart character
characters scene scenes music director script ending performance watch watched seen again food eating
piece bread stock market crashed today book books review product service price quality recommend
""".split()


def vocabulary() -> list[str]:
    singles = list(string.ascii_lowercase + string.digits + string.punctuation)
    words = list(dict.fromkeys(w for w in WORDS if w not in singles))
    suffixes = ["##s", "##ed", "##ing", "##ly", "##er", "##est"]
    return SPECIALS + singles + ["##" + c for c in singles] + suffixes + words


def hf_tensors(c: dict, g: torch.Generator) -> dict[str, torch.Tensor]:
    """A BertModel's state dict as transformers names it, random (N(0, 0.02) weights, LayerNorm
    gains near 1), with the pooler and the position_ids buffer older versions save."""
    def normal(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    def layer_norm(prefix):
        return {f"{prefix}.LayerNorm.weight": 1 + normal(H, std=0.05), f"{prefix}.LayerNorm.bias": normal(H)}

    H, F = c["hidden_size"], c["intermediate_size"]
    t = {"embeddings.word_embeddings.weight": normal(c["vocab_size"], H),
         "embeddings.position_embeddings.weight": normal(c["max_position_embeddings"], H),
         "embeddings.token_type_embeddings.weight": normal(c["type_vocab_size"], H),
         "embeddings.position_ids": torch.arange(c["max_position_embeddings"])[None],
         **layer_norm("embeddings")}
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            # Wider than BERT's init, so that the attention of a random model is not flat.
            t[f"{p}.attention.self.{name}.weight"] = normal(H, H, std=0.2)
            t[f"{p}.attention.self.{name}.bias"] = normal(H)
        t |= {f"{p}.attention.output.dense.weight": normal(H, H), f"{p}.attention.output.dense.bias": normal(H),
              **layer_norm(f"{p}.attention.output"),
              f"{p}.intermediate.dense.weight": normal(F, H), f"{p}.intermediate.dense.bias": normal(F),
              f"{p}.output.dense.weight": normal(H, F), f"{p}.output.dense.bias": normal(H),
              **layer_norm(f"{p}.output")}
    t |= {"pooler.dense.weight": normal(H, H), "pooler.dense.bias": normal(H)}
    return t


def write_tokenizer_json(path: Path, vocab: list[str]) -> None:
    """The tokenizer.json a BERT fast tokenizer saves: normaliser, pre-tokeniser, WordPiece, [CLS] text [SEP]."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    ids = {t: i for i, t in enumerate(vocab)}
    tok = Tokenizer(WordPiece(ids, unk_token="[UNK]"))
    tok.add_special_tokens(SPECIALS)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.save(str(path))


def make_tiny_bert(folder: str | Path, *, seed: int = 0, layers: int = 2, hidden: int = 32, heads: int = 2,
                   intermediate: int = 64, positions: int = 128, tokenizer: str = "vocab",
                   model_type: str = "bert", task_checkpoint: bool = False) -> Path:
    """Write a random BERT into `folder` (created) and return it. `tokenizer`: "vocab" (vocab.txt)
    or "json" (tokenizer.json). `task_checkpoint`: save it as a BertForSequenceClassification does
    (names under `bert.`, a classifier head)."""
    if tokenizer not in ("vocab", "json"):
        raise ValueError(f"tokenizer is 'vocab' or 'json', not {tokenizer!r}")
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    config = {"architectures": ["BertForSequenceClassification" if task_checkpoint else "BertModel"],
              "model_type": model_type, "vocab_size": len(vocab), "hidden_size": hidden,
              "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": intermediate,
              "max_position_embeddings": positions, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
              "hidden_act": "gelu", "position_embedding_type": "absolute", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "pad_token_id": 0, "initializer_range": 0.02}
    (root / "config.json").write_text(json.dumps(config, indent=2))
    tensors = hf_tensors(config, torch.Generator().manual_seed(seed))
    if task_checkpoint:
        tensors = {f"bert.{k}": v for k, v in tensors.items()}
        g = torch.Generator().manual_seed(seed + 1)
        tensors |= {"classifier.weight": torch.randn(2, hidden, generator=g), "classifier.bias": torch.zeros(2)}
    save_file(tensors, str(root / "model.safetensors"))
    if tokenizer == "vocab":
        (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    else:
        write_tokenizer_json(root / "tokenizer.json", vocab)
    return root


def make_tiny_bam(folder: str | Path, family: str = "weibull", *, seed: int = 0, classes=("a", "b", "c"),
                  stochastic_layers=(1, 2)):
    """A BamClassifier of `family` on a tiny random BERT written into `folder` (3 layers, hidden 32, 2 heads),
    stochastic in `stochastic_layers`, its head drawn from `seed`: its frame graph exports in seconds."""
    from bam_viz.model import BamClassifier, ModelConfig
    from bam_viz.nn.attention import AttentionConfig

    backbone = make_tiny_bert(Path(folder) / "bert", layers=3, hidden=32, heads=2, seed=seed)
    torch.manual_seed(seed)
    config = ModelConfig("tiny", AttentionConfig(family), classes=tuple(classes),
                         stochastic_layers=tuple(stochastic_layers), dropout=0.0, backbone=str(backbone))
    return BamClassifier(config).eval()
