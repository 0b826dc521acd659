"""The encoder a model is built on: the packaged all-MiniLM-L6-v2, or any BERT in a local folder.

A folder is in the Hugging Face layout and is read strictly, so that what loads is what the
encoder implements: config.json describes a BERT (post-LN blocks, exact GELU, absolute positions),
model.safetensors holds exactly that network's tensors (a pickled pytorch_model.bin is never
opened: unpickling runs code), and tokenizer.json or vocab.txt knows BERT's special tokens within
the weights' vocabulary. The weights' sha256 is taken when the folder is read and checked again
when they are loaded, so a model card that names a backbone names one file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from bam_viz.nn.attention import AttentionConfig
from bam_viz.nn.encoder import MINILM_SHA256, Bert, BertConfig, Tokenizer, load_minilm_state, minilm_dir, sha256_file

PACKAGED_NAME = "all-MiniLM-L6-v2"
CONFIG, WEIGHTS, PICKLE = "config.json", "model.safetensors", "pytorch_model.bin"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")          # in order of preference
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")
# config.json's name for each size -> BertConfig's.
SIZES = {"vocab_size": "vocab_size", "hidden_size": "hidden", "num_hidden_layers": "n_layers",
         "num_attention_heads": "n_heads", "intermediate_size": "intermediate",
         "max_position_embeddings": "max_positions", "type_vocab_size": "type_vocab_size"}
# What a checkpoint may hold beside the encoder: the pooler, task heads (BertFor*), and the index
# buffers older transformers versions saved.
UNUSED_PREFIXES = ("pooler.", "cls.", "classifier.")
UNUSED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


class BackboneError(ValueError):
    """A folder that is not a BERT this encoder can load, with the file or field at fault."""


@dataclass(frozen=True)
class Backbone:
    """A BERT backbone as read: its shape, and the files (with their hashes) it loads from."""

    name: str
    folder: Path | None               # None: the packaged MiniLM
    config: BertConfig
    weights: Path
    sha256: str                       # of `weights`
    tokenizer_file: Path              # tokenizer.json, else vocab.txt
    tokenizer_sha256: str
    lowercase: bool                   # for a vocab.txt (a tokenizer.json carries its own normaliser)

    def to_card(self) -> dict:
        """What a model card records of its backbone (JSON-safe)."""
        return {"name": self.name, "folder": None if self.folder is None else str(self.folder),
                "sha256": self.sha256, "config": dataclasses.asdict(self.config),
                "tokenizer": self.tokenizer_file.name, "tokenizer_sha256": self.tokenizer_sha256,
                "lowercase": self.lowercase}


@lru_cache(maxsize=1)
def packaged() -> Backbone:
    """The packaged all-MiniLM-L6-v2: `BertConfig()`'s shape, its weights pinned to MINILM_SHA256."""
    root = minilm_dir()
    tokenizer = root / "tokenizer.json"
    return Backbone(PACKAGED_NAME, None, BertConfig(), root / WEIGHTS, MINILM_SHA256, tokenizer,
                    sha256_file(tokenizer), lowercase=True)


def read_backbone(folder: str | Path | None) -> Backbone:
    """The backbone in `folder` (None: the packaged MiniLM), refused with a BackboneError unless
    every file fits the encoder and each other."""
    if folder is None:
        return packaged()
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise BackboneError(f"{root}: not a folder (a backbone is a folder with {CONFIG}, {WEIGHTS} "
                            f"and {' or '.join(TOKENIZER_FILES)})")
    config = read_config(root)
    weights = root / WEIGHTS
    if not weights.is_file():
        if (root / PICKLE).is_file():
            raise BackboneError(f"{root}: no {WEIGHTS}; {PICKLE} is a pickle and is not loaded (unpickling "
                                f"runs code): convert it to safetensors")
        raise BackboneError(f"{root}: no {WEIGHTS}")
    tokenizer_file = next((root / f for f in TOKENIZER_FILES if (root / f).is_file()), None)
    if tokenizer_file is None:
        raise BackboneError(f"{root}: no tokenizer: neither {' nor '.join(TOKENIZER_FILES)}")
    lowercase = read_lowercase(root)
    check_tokenizer(root, tokenizer_file, lowercase, config)
    check_tensors(root, config, header_shapes(root, weights))
    return Backbone(root.name, root, config, weights, sha256_file(weights), tokenizer_file,
                    sha256_file(tokenizer_file), lowercase)


def read_json(root: Path, name: str) -> dict:
    try:
        found = json.loads((root / name).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BackboneError(f"{root}: {name} is not JSON ({e})") from None
    if not isinstance(found, dict):
        raise BackboneError(f"{root}: {name} is not a JSON object but a {type(found).__name__}")
    return found


def read_config(root: Path) -> BertConfig:
    """config.json (Hugging Face's BertConfig fields) as the encoder's shape."""
    if not (root / CONFIG).is_file():
        raise BackboneError(f"{root}: no {CONFIG}")
    raw = read_json(root, CONFIG)
    model_type = raw.get("model_type")
    if model_type != "bert":
        what = f"a {model_type} model" if isinstance(model_type, str) else "no model_type"
        raise BackboneError(f'{root}: {CONFIG} describes {what}: only the BERT architecture ("model_type": '
                            f'"bert") is supported')
    sizes = {}
    for field, ours in SIZES.items():
        value = raw.get(field)
        if value is None:
            raise BackboneError(f"{root}: {CONFIG} has no {field}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BackboneError(f"{root}: {CONFIG}'s {field} is {value!r}, not a positive integer")
        sizes[ours] = value
    eps = raw.get("layer_norm_eps", 1e-12)          # transformers' default
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 1:
        raise BackboneError(f"{root}: {CONFIG}'s layer_norm_eps is {eps!r}, not a small positive number")
    if sizes["hidden"] % sizes["n_heads"]:
        raise BackboneError(f"{root}: {CONFIG}'s hidden_size {sizes['hidden']} is not divisible by its "
                            f"num_attention_heads {sizes['n_heads']}")
    # The encoder's feed-forward is F.gelu (erf), which is transformers' "gelu"; "gelu_new" and the
    # tanh forms are other functions.
    act = raw.get("hidden_act", "gelu")
    if act != "gelu":
        raise BackboneError(f'{root}: {CONFIG}\'s hidden_act is {act!r}: the encoder implements "gelu" only')
    positions = raw.get("position_embedding_type", "absolute")
    if positions != "absolute":
        raise BackboneError(f"{root}: {CONFIG}'s position_embedding_type is {positions!r}: the encoder "
                            f'implements "absolute" position embeddings only')
    return BertConfig(**sizes, layer_norm_eps=float(eps))


def read_lowercase(root: Path) -> bool:
    """tokenizer_config.json's do_lower_case; an uncased BERT (lowercase) when it says nothing."""
    if not (root / "tokenizer_config.json").is_file():
        return True
    value = read_json(root, "tokenizer_config.json").get("do_lower_case", True)
    if not isinstance(value, bool):
        raise BackboneError(f"{root}: tokenizer_config.json's do_lower_case is {value!r}, not true or false")
    return value


def vocabulary(root: Path, file: Path) -> dict[str, int]:
    """Token -> id of a tokenizer.json (added tokens included) or a vocab.txt (one token a line)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import WordPiece

    try:
        if file.suffix == ".txt":
            return WordPiece.read_file(str(file))
        return HFTokenizer.from_file(str(file)).get_vocab(with_added_tokens=True)
    except Exception as e:       # tokenizers raises a bare Exception for a file it cannot parse
        raise BackboneError(f"{root}: {file.name} cannot be read as a tokenizer ({e})") from None


def check_tokenizer(root: Path, file: Path, lowercase: bool, config: BertConfig) -> None:
    """The tokenizer knows BERT's special tokens, gives no id the embeddings lack, and wraps a
    text as [CLS] ... [SEP] (the classifier reads row 0)."""
    vocab = vocabulary(root, file)
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise BackboneError(f"{root}: the tokenizer does not fit the weights: {file.name} lacks {', '.join(missing)}")
    n_ids = max(vocab.values()) + 1
    if n_ids > config.vocab_size:
        raise BackboneError(f"{root}: the tokenizer does not fit the weights: {file.name} has {n_ids} ids, "
                            f"{CONFIG}'s vocab_size is {config.vocab_size}")
    tokens = Tokenizer(path=file, lowercase=lowercase).encode("a")[1]
    if tokens[0] != "[CLS]" or tokens[-1] != "[SEP]":
        raise BackboneError(f"{root}: {file.name} does not wrap a text as [CLS] ... [SEP] (it tokenises 'a' "
                            f"as {tokens})")


def own_names(tensors: dict) -> dict:
    """A checkpoint's entries under the encoder's names: a task checkpoint's `bert.` prefix
    stripped, the pooler, heads and index buffers dropped."""
    out = {}
    for key, value in tensors.items():
        key = key.removeprefix("bert.")
        if not key.startswith(UNUSED_PREFIXES) and key not in UNUSED_BUFFERS:
            out[key] = value
    return out


@lru_cache(maxsize=8)
def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The encoder's pretrained tensors for `config` and their shapes, from the module itself
    (built on the meta device: no memory, no init); the prior networks are ours, not a checkpoint's."""
    with torch.device("meta"):
        bert = Bert(config)
    return {k: tuple(v.shape) for k, v in bert.state_dict().items() if ".prior_net." not in k}


def header_shapes(root: Path, weights: Path) -> dict[str, tuple[int, ...]]:
    """The shapes model.safetensors declares, under the encoder's names, read from its header
    (safetensors also checks that the data covers them: a truncated file is refused here)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(weights), framework="pt") as f:
            return own_names({k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})
    except SafetensorError as e:
        raise BackboneError(f"{root}: {WEIGHTS} is not a safetensors file ({e})") from None


def check_tensors(root: Path, config: BertConfig, shapes: dict[str, tuple[int, ...]]) -> None:
    expected = expected_shapes(config)

    def show(shape):
        return f"({', '.join(map(str, shape))})"

    misfits = [f"{k} is {show(shapes[k])}, expected {show(s)}" for k, s in expected.items()
               if k in shapes and shapes[k] != s]
    misfits += [f"{k} is missing" for k in expected if k not in shapes]
    misfits += [f"{k} is no tensor of a BERT encoder" for k in shapes if k not in expected]
    if misfits:
        more = f" (and {len(misfits) - 1} more)" if len(misfits) > 1 else ""
        raise BackboneError(f"{root}: {WEIGHTS} does not fit {CONFIG}: {misfits[0]}{more}")


def load_backbone_state(backbone: Backbone) -> dict[str, torch.Tensor]:
    """The backbone's pretrained tensors under the encoder's names (float32), refused if the file
    is not the one read (sha256) or does not fit the config. The packaged MiniLM comes from the
    pinned, cached `load_minilm_state`, whose tensors every zoo model shares."""
    if backbone.folder is None:
        return load_minilm_state()
    from safetensors import SafetensorError
    from safetensors.torch import load

    root = backbone.folder
    try:
        data = backbone.weights.read_bytes()     # hashed and parsed from the same bytes
    except OSError as e:
        raise BackboneError(f"{root}: {WEIGHTS} cannot be read ({e.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != backbone.sha256:
        raise BackboneError(f"{root}: {WEIGHTS} has sha256 {digest}, not the {backbone.sha256} it had when "
                            f"the backbone was read: refusing to load a changed file")
    try:
        state = own_names(load(data))
    except SafetensorError as e:
        raise BackboneError(f"{root}: {WEIGHTS} is not a safetensors file ({e})") from None
    check_tensors(root, backbone.config, {k: tuple(v.shape) for k, v in state.items()})
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def build_bert(backbone: Backbone, attention: list[AttentionConfig] | None = None) -> Bert:
    """The encoder of `backbone`'s shape holding its pretrained tensors, with `attention` per layer."""
    return Bert.from_state(backbone.config, load_backbone_state(backbone), attention)


def tokenizer_for(backbone: Backbone, max_tokens: int = 128) -> Tokenizer:
    """The backbone's tokenizer, truncating to `max_tokens`, which its position embeddings must cover."""
    if max_tokens > backbone.config.max_positions:
        raise BackboneError(f"{backbone.folder or backbone.name}: {max_tokens} tokens need more than its "
                            f"{backbone.config.max_positions} position embeddings (max_position_embeddings)")
    return Tokenizer(max_tokens, backbone.tokenizer_file, lowercase=backbone.lowercase)
