"""The compact BERT reproduces all-MiniLM-L6-v2 and refuses weights that are not the genuine file."""

import shutil

import pytest
import torch
import torch.nn.functional as F

from bam_viz.nn.encoder import MINILM_SHA256, Bert, Tokenizer, load_minilm_state, mean_pool, minilm_dir


@pytest.fixture(scope="module")
def bert():
    return Bert.from_minilm().eval()


def embed(bert, texts):
    ids, mask = Tokenizer().batch(texts)
    with torch.inference_mode():
        return F.normalize(mean_pool(bert(ids, mask), mask), dim=-1)


def test_reproduces_the_reference_sentence_similarity(bert):
    e = embed(bert, ["A man is eating food.", "A man is eating a piece of bread.", "The stock market crashed today."])
    close, far = float(e[0] @ e[1]), float(e[0] @ e[2])
    assert abs(close - 0.755) <= 0.005
    assert far < 0.2


def test_padding_does_not_change_the_embedding(bert):
    short, long = "Good film.", "A much longer sentence that forces the short one to be padded a lot."
    alone = embed(bert, [short])
    batched = embed(bert, [short, long])
    torch.testing.assert_close(alone[0], batched[0], atol=1e-5, rtol=0)


def test_refuses_a_file_whose_hash_differs(tmp_path):
    fake = tmp_path / "model.safetensors"
    shutil.copy(minilm_dir() / "model.safetensors", fake)
    with open(fake, "r+b") as f:  # flip one byte deep inside the tensors
        f.seek(10_000_000)
        b = f.read(1)
        f.seek(10_000_000)
        f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(ValueError, match="refusing to load"):
        load_minilm_state(str(fake), MINILM_SHA256)


def test_state_loads_strictly():
    state = load_minilm_state()
    assert not any(k.startswith("pooler.") for k in state) and "embeddings.position_ids" not in state
    model = Bert()
    own = {k for k in model.state_dict() if ".prior_net." not in k}
    assert own == set(state)


def test_tokenizer_truncates_and_reports_it():
    tok = Tokenizer(max_tokens=16)
    ids, tokens, truncated = tok.encode("word " * 100)
    assert truncated and len(ids) == 16 and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    ids, tokens, truncated = tok.encode("short one")
    assert not truncated and tokens == ["[CLS]", "short", "one", "[SEP]"]


def test_a_vocab_txt_tokenises_as_the_tokenizer_json():
    """BERT's vocab.txt alone gives the bundled tokenizer.json's tokens: normalisation (accents,
    control characters, CJK), punctuation, WordPiece, special tokens in the text, truncation."""
    from_json, from_vocab = Tokenizer(max_tokens=24), Tokenizer(max_tokens=24, path=minilm_dir() / "vocab.txt")
    for text in ["A man is eating food.", "Héllo WORLD!! naïve café [SEP] [cls] don't 123,456.7 ☃ 中文",
                 "supercalifragilistic unbelievably", "  \t weird\u200b spaces ", "[MASK] tokens [PAD]",
                 "word " * 40]:
        encoded = from_vocab.encode(text)
        assert encoded == from_json.encode(text)
        assert from_vocab.decode(encoded[0]) == from_json.decode(encoded[0])
    assert from_vocab.pad_id == from_json.pad_id == 0
    cased = Tokenizer(path=minilm_dir() / "vocab.txt", lowercase=False)
    assert cased.encode("Man")[1] == ["[CLS]", "[UNK]", "[SEP]"]     # the uncased vocabulary has no "Man"


def test_a_vocab_without_cls_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[SEP]\nfilm\n")
    with pytest.raises(ValueError, match="has no \\[CLS\\] or no \\[SEP\\]: it is no BERT vocabulary"):
        Tokenizer(path=vocab)


@pytest.mark.parametrize("family", ["softmax", "weibull", "lognormal"])
@pytest.mark.parametrize("merged", [False, True])
def test_first_rows_folds_the_key_and_value_projections(family, merged):
    """`SelfAttention.first_rows` gives the first query rows' context without projecting keys or
    values for every token: the same numbers as the full layer's first rows (padded keys, LoRA
    adapters merged or not, several samples), the same random numbers, and neither projection run."""
    from bam_viz import families
    from bam_viz.nn.attention import AttentionConfig, Mode, Trace
    from bam_viz.nn.encoder import BertConfig, LoRALinear, SelfAttention

    torch.manual_seed(0)
    c = BertConfig()
    hyper = {k: v for k, v in {"shape_k": 2.0, "sigma": 0.5}.items() if k in families.get(family).hyper_names}
    layer = SelfAttention(c, AttentionConfig(family, hyper=hyper))
    for name in ("query", "key", "value"):
        lora = LoRALinear(getattr(layer, name), rank=4)
        torch.nn.init.normal_(lora.lora_b, std=0.05)              # non-zero adapters: W + s B A matters
        setattr(layer, name, lora)
        if merged:
            lora.merge()
    layer.eval()
    x = torch.randn(3, 7, c.hidden)
    mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2, [True] * 3 + [False] * 4])
    calls = []
    hooks = [getattr(layer, n).register_forward_hook(lambda *a, n=n: calls.append(n)) for n in ("key", "value")]
    with torch.no_grad():
        for mode in (Mode.SAMPLE, Mode.MEAN):
            g_full, g_fold = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
            calls.clear()
            full, _ = layer(x, mask, n_samples=4, generator=g_full, mode=mode, trace=Trace.STATS)
            assert calls == ["key", "value"]
            calls.clear()
            fold, trace = layer(x, mask, query_rows=1, n_samples=4, generator=g_fold, mode=mode)
            assert calls == [] and trace is None
            assert fold.shape == (full.shape[0], 1, c.hidden)
            torch.testing.assert_close(fold, full[:, :1], atol=2e-5, rtol=1e-5)
            assert torch.equal(g_full.get_state(), g_fold.get_state())
        calls.clear()   # dropout on the weights breaks sum_j w_j = 1: no fold then
        layer(x, mask, query_rows=1, generator=torch.Generator().manual_seed(0), attn_dropout=0.1)
        assert calls == ["key", "value"]
    for h in hooks:
        h.remove()
