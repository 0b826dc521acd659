"""The shipped models: their recipes, and loading them from `pretrained/<name>/`.

Each folder holds `model.safetensors` (only what training changed: adapters, layer norms, prior
networks, head) and `card.json` (config, hyperparameters, command, split, metrics, sha256 of files).
`MANIFEST.json` beside the folders holds the sha256 of every card and weights file, so that an
edited card is refused like edited weights; every card's config is checked field by field
(`validate_card`) before a model is built from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from bam_viz.families import CategoricalFamily, DirichletFamily, LognormalFamily, Softmax, WeibullFamily
from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig
from bam_viz.nn.encoder import sha256_file

# An installed wheel carries the models inside the package (pyproject.toml maps `pretrained/` there);
# the checkout keeps them at the top level.
_PACKAGE = Path(__file__).resolve().parent
PRETRAINED = _PACKAGE / "pretrained" if (_PACKAGE / "pretrained").is_dir() else _PACKAGE.parent / "pretrained"

# Same data, budget and recipe for all; only the attention differs.
RECIPES: dict[str, ModelConfig] = {
    "softmax": ModelConfig(
        "softmax", AttentionConfig(Softmax.name),
        description="Deterministic softmax attention: the usual transformer, one answer per sentence."),
    "mc-dropout": ModelConfig(
        "mc-dropout", AttentionConfig(Softmax.name), stochastic_layers=(0, 1, 2, 3, 4, 5), mc_dropout=True,
        description="The softmax model with dropout kept on at inference (Gal & Ghahramani 2016)."),
    "bam-wc": ModelConfig(
        # shape_k chosen on dev
        "bam-wc", AttentionConfig(WeibullFamily.name, "contextual", hyper={"shape_k": 3.0, "beta": 1.0}),
        description="BAM-WC: Weibull attention scores with a contextual Gamma prior (Fan et al. 2020)."),
    "bam-lc": ModelConfig(
        "bam-lc", AttentionConfig(LognormalFamily.name, "contextual", hyper={"sigma": 0.3, "prior_sigma": 1.0}),
        description="BAM-LC: Lognormal attention scores with a contextual Lognormal prior (Fan et al. 2020)."),
    "dirichlet": ModelConfig(
        "dirichlet", AttentionConfig(DirichletFamily.name, "contextual",
                                     hyper={"concentration": 100.0, "prior_concentration": 10.0}),
        description="Dirichlet attention weights, implicitly reparameterised (Cinquin et al. 2021)."),
    "categorical": ModelConfig(
        "categorical", AttentionConfig(CategoricalFamily.name), stochastic_layers=(5,),
        description="Hard latent alignment of [CLS] in the top layer, marginalised exactly (Deng et al. 2018)."),
}
# mc-dropout is the softmax model's weights used differently: it ships no weights of its own.
SHARED_WEIGHTS = {"mc-dropout": "softmax"}


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt or does not match its card."""


MANIFEST = "MANIFEST.json"
MAX_POSITIONS = 512                 # MiniLM's position embeddings
# Every field of a card's config: its type and, for numbers, the range it must lie in.
CONFIG_FIELDS = {"name": str, "attention": dict, "stochastic_layers": list, "lora_rank": int, "dropout": float,
                 "mc_dropout": bool, "max_tokens": int, "description": str, "classes": list}
OPTIONAL_FIELDS = {"classes"}     # cards written before K classes: binary sentiment
CONFIG_RANGES = {"lora_rank": (0, 256), "dropout": (0.0, 0.99), "max_tokens": (2, MAX_POSITIONS)}


def validate_card(card, name: str) -> ModelConfig:
    """The model config of `card`, checked field by field: one CheckpointError naming the first bad
    field (its type, its range, a missing or unknown key), never a KeyError from deep inside."""
    from bam_viz import families
    from bam_viz.nn.attention import PRIORS
    from bam_viz.nn.encoder import BertConfig

    def bad(field: str, why: str):
        raise CheckpointError(f"the card of {name} is invalid: {field} {why}")

    def number(field: str, value, kind, lo, hi):
        ok_type = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else (
            isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
        if not ok_type:
            bad(field, f"must be {'a number' if kind is float else 'an ' + kind.__name__}, not {value!r}")
        if not (lo <= value <= hi) or value != value:
            bad(field, f"must lie in [{lo}, {hi}], not {value!r}")

    if not isinstance(card, dict):
        bad("(the card)", "is not a JSON object")
    for key in ("name", "config", "files"):
        if key not in card:
            bad(key, "is missing")
    if card["name"] != name:
        bad("name", f"is {card['name']!r}, not {name!r}")
    if not isinstance(card["files"], dict) or not all(
            isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) for v in card["files"].values()):
        bad("files", "must map file names to sha256 hex digests")
    config = card["config"]
    if not isinstance(config, dict):
        bad("config", "is not an object")
    for key in sorted(set(config) - set(CONFIG_FIELDS)):
        bad(f"config.{key}", "is not a known field")
    for key, kind in CONFIG_FIELDS.items():
        if key not in config:
            if key in OPTIONAL_FIELDS:
                continue
            bad(f"config.{key}", "is missing")
        if key in CONFIG_RANGES:
            number(f"config.{key}", config[key], kind, *CONFIG_RANGES[key])
        elif kind is not float and not isinstance(config[key], kind):
            bad(f"config.{key}", f"must be a {kind.__name__}, not {config[key]!r}")
    if config["name"] != name:
        bad("config.name", f"is {config['name']!r}, not {name!r}")
    n_layers = BertConfig().n_layers
    layers = config["stochastic_layers"]
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers for i in layers) \
            or len(set(layers)) != len(layers):
        bad("config.stochastic_layers", f"must be distinct layer numbers in [0, {n_layers - 1}], not {layers!r}")
    attention = config["attention"]
    family_name = attention.get("family")
    if family_name not in families.names():
        bad("config.attention.family", f"must be one of {list(families.names())}, not {family_name!r}")
    family = families.get(family_name)
    if attention.get("prior", "contextual") not in PRIORS:
        bad("config.attention.prior", f"must be one of {list(PRIORS)}, not {attention.get('prior')!r}")
    number("config.attention.prior_hidden", attention.get("prior_hidden", 16), int, 1, 1024)
    for key, value in attention.items():
        if key in ("family", "prior", "prior_hidden"):
            continue
        if key not in family.hyper_names:
            bad(f"config.attention.{key}", f"is not a hyperparameter of {family_name} attention "
                                            f"(it has: {', '.join(family.hyper_names) or 'none'})")
        spec = family.spec(key)
        number(f"config.attention.{key}", value, float, spec.low, spec.high)
    try:
        return ModelConfig.from_dict(config)
    except (ValueError, TypeError, KeyError) as e:
        bad("config", f"does not make a model: {e}")


def write_manifest(root: Path = PRETRAINED) -> Path:
    """Record the sha256 of every card and weights file below `root` in root/MANIFEST.json."""
    files = sorted(p for pattern in ("*/card.json", "*/model.safetensors") for p in root.glob(pattern))
    manifest = {"sha256": {p.relative_to(root).as_posix(): sha256_file(p) for p in files}}
    path = root / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def _check_manifest(root: Path, card_path: Path) -> None:
    path = root / MANIFEST
    if not path.exists():
        raise CheckpointError(f"{path} is missing: it records the sha256 of every card "
                              "(python -m bam_viz train writes it)")
    try:
        recorded = json.loads(path.read_text())["sha256"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path} cannot be read: {e}") from e
    key = card_path.relative_to(root).as_posix()
    if key not in recorded:
        raise CheckpointError(f"{path} has no entry for {key}")
    if recorded[key] != sha256_file(card_path):
        raise CheckpointError(f"{card_path} was changed: its sha256 is not the one in {path}")


def available_models() -> list[str]:
    return [n for n in RECIPES if (PRETRAINED / n / "card.json").exists()]


def weights_path(name: str, root: Path = PRETRAINED) -> Path:
    return root / SHARED_WEIGHTS.get(name, name) / "model.safetensors"


def read_card(name: str, root: Path = PRETRAINED) -> dict:
    path = root / name / "card.json"
    if not path.exists():
        raise CheckpointError(f"no model called {name!r} in {root} (have: {available_models()})")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from e


def load(name: str | None = None, device: str | torch.device | None = None, root: Path = PRETRAINED, *,
         path: str | Path | None = None) -> BamClassifier:
    """A model of the zoo by `name` (from `root`, the shipped models by default), or the model
    folder at `path` (named like a zoo model, e.g. runs/k3/bam-wc, with MANIFEST.json beside it).
    Its card is checked against the manifest and field by field, and its weights against the card's
    sha256, before any tensor is read."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bam_viz.core.device import choose_device, tune_allocator

    if path is not None:
        folder = Path(path)
        root, name = folder.parent, folder.name
    if not isinstance(name, str) or name not in RECIPES:
        raise CheckpointError(f"no model called {name!r}: a model is one of {list(RECIPES)}, "
                              "or a folder given as path=")
    tune_allocator()

    card = read_card(name, root)
    _check_manifest(root, root / name / "card.json")
    config = validate_card(card, name)
    file = weights_path(name, root)
    if not file.exists():
        raise CheckpointError(f"{file} is missing")
    expected = card.get("files", {}).get(file.name if name not in SHARED_WEIGHTS else
                                          f"../{SHARED_WEIGHTS[name]}/{file.name}")
    digest = sha256_file(file)
    if expected != digest:
        raise CheckpointError(f"{file} is corrupt or was changed: sha256 {digest[:12]}..., "
                              f"card says {str(expected)[:12]}...")
    try:
        state = load_file(str(file))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{file} cannot be read as safetensors: {e}") from e
    model = BamClassifier(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    trainable = set(model.trainable_state_dict())
    if unexpected or trainable - set(state):
        raise CheckpointError(f"{file} does not fit the {name} model: unexpected {unexpected[:5]}, "
                              f"missing {sorted(trainable - set(state))[:5]}")
    model.card = card
    model = share_pretrained(model.to(choose_device(device)).eval().merge_adapters())
    model.origin = (name, str(Path(root).resolve()))     # where another process loads the same model
    return model


def share_pretrained(model: BamClassifier) -> BamClassifier:
    """Point every encoder tensor that still equals MiniLM's pretrained one at that one tensor.

    Fine-tuning changes only the adapters (merged into the attention projections), the LayerNorms,
    the prior networks and the head; the rest (the embeddings most of all) is the same in every
    model of the zoo. Shared, the whole zoo holds it once (docs/performance.md has what that saves).
    The shared tensors are frozen (`requires_grad` False); nothing in the library writes them."""
    from bam_viz.nn.encoder import load_minilm_state

    pretrained = load_minilm_state()
    with torch.no_grad():
        for key, tensor in model.bert.state_dict(keep_vars=True).items():
            ref = pretrained.get(key)
            if (ref is not None and not tensor.requires_grad and ref.device == tensor.device
                    and ref.dtype == tensor.dtype and ref.shape == tensor.shape and torch.equal(ref, tensor)):
                tensor.data = ref
    return model


HEADLINE = ("accuracy", "nll", "brier", "ece", "auroc_error_entropy", "spearman_human_mean")


def update_card_metrics(name: str, result: dict, root: Path = PRETRAINED) -> None:
    """Store an evaluation's headline figures in the model's card (metrics[<corpus>_<split>])."""
    path = root / name / "card.json"
    card = json.loads(path.read_text())
    key = f"{result['corpus']}_{result['split']}"
    entry = {f"{k}": result["mc"][k] for k in HEADLINE if k in result.get("mc", {})}
    entry["softmax"] = {k: result["softmax"][k] for k in HEADLINE if k in result.get("softmax", {})}
    for k, v in result.get("mc", {}).items():
        if k.startswith("auroc_ambiguous") or k.startswith("auroc_ood"):
            entry[k] = v
    entry.update(n_samples=result.get("n_samples"), seed=result.get("seed"), n_clear=result.get("n_clear"))
    card.setdefault("metrics", {})[key] = entry
    path.write_text(json.dumps(card, indent=2) + "\n")
    write_manifest(root)
