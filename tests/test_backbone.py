"""Any BERT from a local folder loads into the encoder, the packaged MiniLM is unchanged, and every
folder that does not fit is refused with a message naming the file and field at fault."""

import dataclasses
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from tinybert import make_tiny_bert, vocabulary

from bam_viz.nn.attention import AttentionConfig
from bam_viz.nn.backbone import (
    BackboneError,
    build_bert,
    expected_shapes,
    load_backbone_state,
    packaged,
    read_backbone,
    read_config,
    tokenizer_for,
)
from bam_viz.nn.encoder import MINILM_SHA256, Bert, BertConfig, Tokenizer, load_minilm_state, minilm_dir, sha256_file

SENTENCE = "The film was not bad, and the acting was really good!"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "tiny-bert")


def copy_of(tiny, tmp_path):
    return shutil.copytree(tiny, tmp_path / "broken")


def edit_config(folder, **fields):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(fields)
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))


@pytest.mark.parametrize("tokenizer", ["vocab", "json"])
def test_a_tiny_bert_loads_runs_and_tokenises(tmp_path, tokenizer):
    folder = make_tiny_bert(tmp_path / "tiny", tokenizer=tokenizer, layers=3, hidden=48, heads=3, intermediate=80)
    backbone = read_backbone(folder)
    assert backbone.name == "tiny" and backbone.folder == folder.resolve()
    assert backbone.config == BertConfig(vocab_size=len(vocabulary()), hidden=48, n_layers=3, n_heads=3,
                                         intermediate=80, max_positions=128)
    assert backbone.tokenizer_file.name == {"vocab": "vocab.txt", "json": "tokenizer.json"}[tokenizer]
    assert backbone.sha256 == sha256_file(folder / "model.safetensors")
    bert = build_bert(backbone).eval()
    assert len(bert.layers) == 3
    stored = load_file(str(folder / "model.safetensors"))
    own = bert.state_dict()
    for key in ("embeddings.word_embeddings.weight", "encoder.layer.2.output.LayerNorm.weight",
                "encoder.layer.1.attention.self.key.bias"):
        assert torch.equal(own[key], stored[key])
    tok = tokenizer_for(backbone, max_tokens=32)
    ids, tokens, truncated = tok.encode(SENTENCE)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and not truncated
    assert "[UNK]" not in tokens and tokens[1:4] == ["the", "film", "was"]
    ids, mask = tok.batch([SENTENCE, "Good."])
    with torch.inference_mode():
        hidden = bert(ids, mask)
    assert hidden.shape == (2, ids.shape[1], 48) and torch.isfinite(hidden).all()


def test_both_tokenizer_files_tokenise_alike(tmp_path):
    by_vocab = tokenizer_for(read_backbone(make_tiny_bert(tmp_path / "v", tokenizer="vocab")))
    by_json = tokenizer_for(read_backbone(make_tiny_bert(tmp_path / "j", tokenizer="json")))
    for text in (SENTENCE, "ÉCOLE naïve [SEP] 3.5/10 ☃", "x" * 300):
        assert by_vocab.encode(text) == by_json.encode(text)


def test_a_task_checkpoint_loads_as_its_encoder(tmp_path):
    """A BertFor* checkpoint names its tensors under `bert.` and carries a head: the same encoder."""
    plain = build_bert(read_backbone(make_tiny_bert(tmp_path / "plain", seed=3))).eval()
    task = build_bert(read_backbone(make_tiny_bert(tmp_path / "task", seed=3, task_checkpoint=True))).eval()
    ids, mask = Tokenizer(path=tmp_path / "plain" / "vocab.txt").batch([SENTENCE])
    with torch.inference_mode():
        torch.testing.assert_close(task(ids, mask), plain(ids, mask), atol=0, rtol=0)


@pytest.mark.parametrize("do_lower_case", [True, False, None])
def test_lowercasing_follows_the_tokenizer_config(tiny, tmp_path, do_lower_case):
    folder = copy_of(tiny, tmp_path)
    if do_lower_case is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": do_lower_case}))
    backbone = read_backbone(folder)
    lowercase = do_lower_case is not False
    assert backbone.lowercase is lowercase and backbone.to_card()["lowercase"] is lowercase
    tokens = tokenizer_for(backbone).encode("Good")[1]
    assert tokens == (["[CLS]", "good", "[SEP]"] if lowercase else ["[CLS]", "[UNK]", "[SEP]"])


def test_the_card_is_json_and_names_the_files(tiny):
    backbone = read_backbone(str(tiny))
    card = json.loads(json.dumps(backbone.to_card()))
    assert card["name"] == "tiny-bert" and card["folder"] == str(tiny.resolve())
    assert card["sha256"] == sha256_file(tiny / "model.safetensors")
    assert BertConfig(**card["config"]) == backbone.config
    assert card["tokenizer"] == "vocab.txt" and card["tokenizer_sha256"] == sha256_file(tiny / "vocab.txt")
    assert packaged().to_card()["folder"] is None and packaged().to_card()["sha256"] == MINILM_SHA256


def test_the_packaged_backbone_is_the_minilm():
    backbone = read_backbone(None)
    assert backbone is packaged() and backbone.name == "all-MiniLM-L6-v2" and backbone.folder is None
    assert backbone.config == BertConfig() == read_config(minilm_dir())    # the HF file reads as our defaults
    assert backbone.sha256 == MINILM_SHA256 == sha256_file(backbone.weights)
    assert load_backbone_state(backbone) is load_minilm_state()            # the pinned, shared tensors
    attention = [AttentionConfig()] * 5 + [AttentionConfig("weibull", hyper={"shape_k": 3.0, "beta": 1.0})]
    built, minilm = build_bert(backbone, attention).eval(), Bert.from_minilm(attention).eval()
    assert built.state_dict().keys() == minilm.state_dict().keys()
    assert all(torch.equal(v, minilm.state_dict()[k]) for k, v in built.state_dict().items()
               if ".prior_net." not in k)           # the prior networks are freshly initialised
    tok = tokenizer_for(backbone)
    assert tok.encode(SENTENCE) == Tokenizer().encode(SENTENCE)
    ids, mask = tok.batch([SENTENCE, "Good."])
    with torch.inference_mode():
        torch.testing.assert_close(built(ids, mask), minilm(ids, mask), atol=0, rtol=0)


def test_the_expected_tensors_are_the_minilm_files():
    """The names and shapes a folder is checked against are the packaged file's, pooler aside."""
    assert expected_shapes(BertConfig()) == {k: tuple(v.shape) for k, v in load_minilm_state().items()}


def test_an_encoder_gets_one_attention_config_per_layer(tiny):
    with pytest.raises(ValueError, match="6 attention configs for an encoder of 2 layers"):
        build_bert(read_backbone(tiny), [AttentionConfig()] * 6)


def test_tokens_beyond_the_position_embeddings_are_refused(tiny):
    backbone = read_backbone(tiny)
    assert tokenizer_for(backbone, 128).max_tokens == 128
    with pytest.raises(BackboneError, match="129 tokens need more than its 128 position embeddings"):
        tokenizer_for(backbone, 129)


def replace_weights(folder, other):
    shutil.copy(other / "model.safetensors", folder / "model.safetensors")


def edit_tensors(folder, edit):
    state = load_file(str(folder / "model.safetensors"))
    edit(state)
    save_file(state, str(folder / "model.safetensors"))


def edit_tokenizer_json(folder, edit):
    make_tiny_bert(folder / "json", tokenizer="json")
    raw = json.loads((folder / "json" / "tokenizer.json").read_text())
    edit(raw)
    (folder / "vocab.txt").unlink()
    (folder / "tokenizer.json").write_text(json.dumps(raw))


BROKEN = {
    "no config": (lambda f: (f / "config.json").unlink(), r"broken: no config\.json$"),
    "config not JSON": (lambda f: (f / "config.json").write_text("{'hidden_size': 32"),
                        r"broken: config\.json is not JSON"),
    "config a list": (lambda f: (f / "config.json").write_text("[32, 2]"),
                      r"config\.json is not a JSON object but a list"),
    "roberta": (lambda f: edit_config(f, model_type="roberta"),
                r"config\.json describes a roberta model: only the BERT architecture"),
    "no model_type": (lambda f: edit_config(f, model_type=None), r"config\.json describes no model_type"),
    "no hidden_size": (lambda f: edit_config(f, hidden_size=None), r"config\.json has no hidden_size$"),
    "float layers": (lambda f: edit_config(f, num_hidden_layers=2.0),
                     r"config\.json's num_hidden_layers is 2\.0, not a positive integer"),
    "text heads": (lambda f: edit_config(f, num_attention_heads="2"),
                   r"config\.json's num_attention_heads is '2', not a positive integer"),
    "bad eps": (lambda f: edit_config(f, layer_norm_eps=-1), r"layer_norm_eps is -1"),
    "30 over 4 heads": (lambda f: make_tiny_bert(f, hidden=30, heads=4),
                        r"hidden_size 30 is not divisible by its num_attention_heads 4"),
    "gelu_new": (lambda f: edit_config(f, hidden_act="gelu_new"), r"hidden_act is 'gelu_new': the encoder"),
    "relative positions": (lambda f: edit_config(f, position_embedding_type="relative_key"),
                           r"position_embedding_type is 'relative_key'"),
    "a pickle only": (lambda f: ((f / "model.safetensors").rename(f / "pytorch_model.bin")),
                      r"no model\.safetensors; pytorch_model\.bin is a pickle and is not loaded .*"
                      r"convert it to safetensors"),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), r"broken: no model\.safetensors$"),
    "no tokenizer": (lambda f: (f / "vocab.txt").unlink(), r"no tokenizer: neither tokenizer\.json nor vocab\.txt"),
    "vocab too large": (lambda f: open(f / "vocab.txt", "a").write("zebra\nzeppelin\n"),
                        r"the tokenizer does not fit the weights: vocab\.txt has 410 ids, config\.json's "
                        r"vocab_size is 408"),
    "no [CLS]": (lambda f: (f / "vocab.txt").write_text((f / "vocab.txt").read_text().replace("[CLS]", "[KLS]")),
                 r"the tokenizer does not fit the weights: vocab\.txt lacks \[CLS\]$"),
    "tokenizer.json not one": (lambda f: ((f / "vocab.txt").unlink(), (f / "tokenizer.json").write_text("{}")),
                               r"tokenizer\.json cannot be read as a tokenizer"),
    "no [CLS] ... [SEP]": (lambda f: edit_tokenizer_json(f, lambda raw: raw.update(post_processor=None)),
                           r"tokenizer\.json does not wrap a text as \[CLS\] \.\.\. \[SEP\]"),
    "do_lower_case text": (lambda f: (f / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}'),
                           r"tokenizer_config\.json's do_lower_case is 'yes', not true or false"),
    "other shapes": (lambda f: replace_weights(f, make_tiny_bert(f / "wide", intermediate=48)),
                     r"model\.safetensors does not fit config\.json: encoder\.layer\.0\.intermediate\.dense\.weight "
                     r"is \(48, 32\), expected \(64, 32\) \(and 5 more\)$"),
    "fewer layers": (lambda f: edit_config(f, num_hidden_layers=3),
                     r"does not fit config\.json: encoder\.layer\.2\.attention\.self\.query\.weight is missing"),
    "a missing tensor": (lambda f: edit_tensors(f, lambda s: s.pop("encoder.layer.1.output.dense.bias")),
                         r"does not fit config\.json: encoder\.layer\.1\.output\.dense\.bias is missing$"),
    "a foreign tensor": (lambda f: edit_tensors(f, lambda s: s.update({"encoder.layer.0.adapter": torch.zeros(3)})),
                         r"does not fit config\.json: encoder\.layer\.0\.adapter is no tensor of a BERT encoder$"),
    "truncated weights": (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:-64]),
                          r"model\.safetensors is not a safetensors file"),
    "weights not safetensors": (lambda f: (f / "model.safetensors").write_bytes(b"PK\x03\x04" * 8),
                                r"model\.safetensors is not a safetensors file"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_folder_that_does_not_fit_is_refused(tiny, tmp_path, name):
    folder = copy_of(tiny, tmp_path)
    breaks, message = BROKEN[name]
    breaks(folder)
    with pytest.raises(BackboneError, match=message) as refused:
        read_backbone(folder)
    text = str(refused.value)
    assert text.startswith(str(folder.resolve())) and "\n" not in text


@pytest.mark.parametrize("not_a_folder", ["missing", "a-file"])
def test_what_is_not_a_folder_is_refused(tmp_path, not_a_folder):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(BackboneError, match=f"{not_a_folder}: not a folder"):
        read_backbone(tmp_path / not_a_folder)


def test_weights_changed_after_reading_are_refused(tiny, tmp_path):
    folder = copy_of(tiny, tmp_path)
    backbone = read_backbone(folder)
    edit_tensors(folder, lambda s: s["embeddings.word_embeddings.weight"].mul_(2))
    with pytest.raises(BackboneError, match="has sha256 .* when the backbone was read: refusing to load a changed"):
        load_backbone_state(backbone)


def test_loading_checks_the_tensors_again(tiny, tmp_path):
    """A Backbone made or edited by hand meets the same checks at load as a folder at read."""
    backbone = read_backbone(tiny)
    other = dataclasses.replace(backbone, config=dataclasses.replace(backbone.config, hidden=64))
    with pytest.raises(BackboneError, match=r"does not fit config\.json: embeddings\.word_embeddings\.weight is "
                                            r"\(408, 32\), expected \(408, 64\)"):
        load_backbone_state(other)
    folder = copy_of(tiny, tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    cut = dataclasses.replace(backbone, folder=folder, weights=weights, sha256=sha256_file(weights))
    with pytest.raises(BackboneError, match=r"model\.safetensors is not a safetensors file"):
        load_backbone_state(cut)
    weights.unlink()
    with pytest.raises(BackboneError, match=r"model\.safetensors cannot be read"):
        load_backbone_state(cut)


def test_half_precision_weights_load_as_float32(tiny, tmp_path):
    folder = copy_of(tiny, tmp_path)
    edit_tensors(folder, lambda s: s.update({k: v.half() for k, v in s.items() if v.is_floating_point()}))
    state = load_backbone_state(read_backbone(folder))
    assert all(v.dtype == torch.float32 for k, v in state.items())
    half = load_file(str(folder / "model.safetensors"))["encoder.layer.0.attention.self.query.weight"]
    assert torch.equal(state["encoder.layer.0.attention.self.query.weight"], half.float())
    assert "pooler.dense.weight" not in state and "embeddings.position_ids" not in state
