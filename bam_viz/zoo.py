"""The models: the shipped zoo's recipes, the user's model folders, and loading either.

A model folder holds `model.safetensors` (only what training changed: adapters, layer norms, prior
networks, head), `card.json` (classes, config, hyperparameters, backbone, command, data and split,
metrics, sha256 of files) and `MANIFEST.json` (the sha256 of the card and the weights), so that an
edited card is refused like edited weights; every card's config is checked field by field
(`validate_card`) before a model is built from it. The zoo's folders are in `pretrained/`; folders
named in `$BAM_VIZ_MODELS` (a model folder, or a folder of them) join them.
"""

from __future__ import annotations

import json
import os
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
                 "mc_dropout": bool, "max_tokens": int, "description": str, "classes": list,
                 "backbone": (str, type(None))}
OPTIONAL_FIELDS = {"classes", "backbone"}     # cards written before K classes: MiniLM, binary sentiment
CONFIG_RANGES = {"lora_rank": (0, 256), "dropout": (0.0, 0.99), "max_tokens": (2, MAX_POSITIONS)}


def validate_card(card, name: str, n_layers: int | None = None) -> ModelConfig:
    """The model config of `card`, checked field by field: one CheckpointError naming the first bad
    field (its type, its range, a missing or unknown key), never a KeyError from deep inside."""
    from bam_viz import families
    from bam_viz.core.task import MAX_CLASSES
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
            bad(f"config.{key}", f"must be {getattr(kind, '__name__', 'a string or null')}, not {config[key]!r}")
    if config["name"] != name:
        bad("config.name", f"is {config['name']!r}, not {name!r}")
    n_layers = BertConfig().n_layers if n_layers is None else n_layers
    classes = config.get("classes", ["negative", "positive"])
    if not (2 <= len(classes) <= MAX_CLASSES and all(isinstance(c, str) and c for c in classes)
            and len(set(classes)) == len(classes)):
        bad("config.classes", f"must be 2 to {MAX_CLASSES} distinct non-empty names, not {classes!r}")
    if "classes" in card and card["classes"] != classes:
        bad("classes", f"are {card['classes']!r}, but the config's are {classes!r}")
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


MODELS_ENV = "BAM_VIZ_MODELS"


def write_folder_manifest(folder: Path) -> Path:
    """Record the sha256 of the card and the weights of the model folder in folder/MANIFEST.json."""
    files = [p for p in (folder / "card.json", folder / "model.safetensors") if p.exists()]
    path = folder / MANIFEST
    path.write_text(json.dumps({"sha256": {p.name: sha256_file(p) for p in files}}, indent=2) + "\n")
    return path


def _check_manifest(folder: Path) -> None:
    path = folder / MANIFEST
    if not path.exists():
        raise CheckpointError(f"{path} is missing: it records the sha256 of the card and the weights "
                              "(python -m bam_viz train writes it)")
    try:
        recorded = json.loads(path.read_text())["sha256"]
        assert isinstance(recorded, dict)
    except (json.JSONDecodeError, KeyError, TypeError, AssertionError) as e:
        raise CheckpointError(f"{path} cannot be read: {e}") from e
    for file in ("card.json", "model.safetensors"):
        if (folder / file).exists() or file == "card.json":
            if file not in recorded:
                raise CheckpointError(f"{path} has no entry for {file}")
            if recorded[file] != sha256_file(folder / file):
                raise CheckpointError(f"{folder / file} was changed: its sha256 is not the one in {path}")


def path_list(value: str) -> list[str]:
    """The entries of a list of paths in an environment variable: separated by commas or the path
    separator, blanks dropped ($BAM_VIZ_MODELS, $BAM_VIZ_LESSONS)."""
    return [e.strip() for e in re.split(rf"[,{re.escape(os.pathsep)}]", value) if e.strip()]


def user_folders(value: str | None = None) -> dict[str, Path]:
    """The model folders `$BAM_VIZ_MODELS` names, by model name: entries separated by commas or the
    path separator, each a model folder (with card.json) or a folder of them. A name the zoo or an
    earlier entry already has is qualified by its parent folder's name ("runs/bam-wc")."""
    value = os.environ.get(MODELS_ENV, "") if value is None else value
    found: dict[str, Path] = {}
    for entry in path_list(value):
        root = Path(entry).expanduser()
        folders = [root] if (root / "card.json").exists() else sorted(
            p for p in (root.iterdir() if root.is_dir() else ()) if (p / "card.json").exists()
            and not p.name.startswith("."))
        for folder in folders:
            name = folder.name
            if (PRETRAINED / name / "card.json").exists() or name in found:
                name = f"{folder.parent.name}/{folder.name}"
            found.setdefault(name, folder.resolve())
    return found


def missing_user_folders(value: str | None = None) -> list[str]:
    """Entries of `$BAM_VIZ_MODELS` that hold no model folder (for a message, never an exception)."""
    value = os.environ.get(MODELS_ENV, "") if value is None else value
    return [e for e in path_list(value) if not user_folders(e)]


def available_models() -> list[str]:
    """The zoo's shipped models (its recipes first, in their order), then the user's (`$BAM_VIZ_MODELS`)."""
    shipped = sorted(p.parent.name for p in PRETRAINED.glob("*/card.json") if not p.parent.name.startswith("."))
    return [n for n in RECIPES if n in shipped] + [n for n in shipped if n not in RECIPES] + list(user_folders())


def model_folder(name: str, root: Path = PRETRAINED) -> Path:
    """The folder of the model called `name`: root/name, else a folder of `$BAM_VIZ_MODELS`."""
    if isinstance(name, str) and name and "/" not in name and (Path(root) / name / "card.json").exists():
        return Path(root) / name
    users = user_folders()
    if isinstance(name, str) and name in users:
        return users[name]
    raise CheckpointError(f"no model called {name!r} (have: {available_models()}); a model folder is "
                          f"loaded with path=, or added to the app with ${MODELS_ENV}")


def weights_path(folder: Path, card: dict) -> Path:
    """The weights a card names: its own, or those of the model it shares them with (mc-dropout)."""
    return folder.parent / card["weights_from"] / "model.safetensors" if "weights_from" in card \
        else folder / "model.safetensors"


def read_card(folder: Path) -> dict:
    path = Path(folder) / "card.json"
    if not path.exists():
        raise CheckpointError(f"{path} is missing: a model folder holds card.json, model.safetensors "
                              "and MANIFEST.json")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from e


def load(name: str | None = None, device: str | torch.device | None = None, root: Path = PRETRAINED, *,
         path: str | Path | None = None) -> BamClassifier:
    """The model called `name` (a zoo model in `root`, the shipped ones by default, or a folder of
    `$BAM_VIZ_MODELS`), or the model folder at `path`. Its card is checked against the folder's
    manifest and field by field, its backbone and weights against the card's sha256, before any
    tensor is read."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bam_viz.core.device import choose_device, tune_allocator
    from bam_viz.nn.backbone import BackboneError, read_backbone

    folder = Path(path) if path is not None else model_folder(name, root)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a model folder")
    name = folder.name
    tune_allocator()

    card = read_card(folder)
    _check_manifest(folder)
    backbone_dir = card.get("config", {}).get("backbone") if isinstance(card, dict) and isinstance(
        card.get("config"), dict) else None
    try:
        backbone = read_backbone(backbone_dir if isinstance(backbone_dir, str) else None)
    except BackboneError as e:
        raise CheckpointError(f"the backbone of {folder} cannot be used: {e}") from e
    config = validate_card(card, name, backbone.config.n_layers)
    recorded = (card.get("backbone") or {}).get("sha256")
    if recorded is not None and recorded != backbone.sha256:
        raise CheckpointError(f"{folder} was trained on a backbone with weights sha256 {recorded[:12]}..., "
                              f"but {backbone.weights} has {backbone.sha256[:12]}...")
    file = weights_path(folder, card)
    if not file.exists():
        raise CheckpointError(f"{file} is missing")
    key = f"../{card['weights_from']}/{file.name}" if "weights_from" in card else file.name
    expected, digest = card["files"].get(key), sha256_file(file)
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
    model.origin = (name, str(folder.parent.resolve()))     # where another process loads the same model
    return model


def share_pretrained(model: BamClassifier) -> BamClassifier:
    """Point every encoder tensor that still equals MiniLM's pretrained one at that one tensor.

    Fine-tuning changes only the adapters (merged into the attention projections), the LayerNorms,
    the prior networks and the head; the rest (the embeddings most of all) is the same in every
    model of the zoo. Shared, the whole zoo holds it once (docs/performance.md has what that saves).
    The shared tensors are frozen (`requires_grad` False); nothing in the library writes them."""
    from bam_viz.nn.encoder import load_minilm_state

    if model.config.backbone is not None:
        return model
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
    path = model_folder(name, root) / "card.json"
    card = json.loads(path.read_text())
    key = f"{result['corpus']}_{result['split']}"
    entry = {f"{k}": result["mc"][k] for k in HEADLINE if k in result.get("mc", {})}
    entry["softmax"] = {k: result["softmax"][k] for k in HEADLINE if k in result.get("softmax", {})}
    for k, v in result.get("mc", {}).items():
        if k.startswith("auroc_ambiguous") or k.startswith("auroc_ood"):
            entry[k] = v
    entry.update(n_samples=result.get("n_samples"), seed=result.get("seed"), n_clear=result.get("n_clear"))
    card.setdefault("metrics", {})[key] = entry
    path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    write_folder_manifest(path.parent)
