"""The models: the shipped zoo's recipes, the user's model folders, and loading either.

A model folder holds `model.safetensors` (only what training changed: adapters, layer norms, prior
networks, head), `card.json` (classes, config, hyperparameters, backbone, command, data and split,
metrics, sha256 of files) and `MANIFEST.json` (the sha256 of the card and the weights), so that an
edited card is refused like edited weights; every card's config is checked field by field
(`validate_card`) before a model is built from it. The zoo's folders are in `pretrained/`; folders
named in `$BAM_VIZ_MODELS` (a model folder, or a folder of them) join them.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import torch

from bam_viz.families import CategoricalFamily, DirichletFamily, LognormalFamily, Softmax, WeibullFamily
from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.model_files import (
    MAX_CARD_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_VERDICTS,
    CheckpointError,
    Refusals,
    check_fit,
    file_key,
    header_shapes,
    inside,
    read_json,
    regular_file,
    shown,
)
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


def _check_manifest(folder: Path, files: tuple[str, ...], digest) -> None:
    """The sha256 of `files` of the folder (those it has, card.json always) against MANIFEST.json;
    `digest` hashes a path (each file once in a load)."""
    path, zoo = folder / MANIFEST, folder.parent
    recorded = read_json(path, zoo, MAX_MANIFEST_BYTES)
    recorded = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not isinstance(recorded, dict):
        raise CheckpointError(f"{shown(path, zoo)} cannot be read: it holds no sha256 object")
    for file in files:
        if os.path.lexists(folder / file) or file == "card.json":
            if file not in recorded:
                raise CheckpointError(f"{shown(path, zoo)} has no entry for {file}")
            regular_file(folder / file, zoo)
            if recorded[file] != digest(folder / file):
                raise CheckpointError(f"{shown(folder / file, zoo)} was changed: its sha256 is not the one in "
                                      f"{shown(path, zoo)}")


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


def listed_folders() -> dict[str, Path]:
    """Every model folder by name: the zoo's shipped ones (its recipes first, in their order), then
    the user's (`$BAM_VIZ_MODELS`), refused ones included."""
    shipped = sorted(p.parent.name for p in PRETRAINED.glob("*/card.json") if not p.parent.name.startswith("."))
    names = [n for n in RECIPES if n in shipped] + [n for n in shipped if n not in RECIPES]
    return {**{n: PRETRAINED / n for n in names}, **user_folders()}


def available_models() -> list[str]:
    """The models a list offers: `listed_folders` less the refused (`refused_models`)."""
    return [name for name, folder in listed_folders().items() if folder_problem(folder) is None]


def refused_models() -> dict[str, str]:
    """The listed model folders that cannot be loaded, by name, each with the one line that says why,
    for a list to show beside the models it offers."""
    return {name: why for name, folder in listed_folders().items() if (why := folder_problem(folder)) is not None}


# A load refused for the same files (`_files_key`) is refused from here, without a hash.
REFUSED = Refusals()


def _files_key(folder: Path, card: dict, weights: Path) -> tuple:
    """The keys (`file_key`) of what a load of `folder` reads: card, manifest, weights, backbone."""
    config = card.get("config")
    backbone = config.get("backbone") if isinstance(config, dict) else None
    backbone_files = [Path(backbone) / f for f in ("config.json", "model.safetensors")] \
        if isinstance(backbone, str) else []
    return tuple(file_key(p) for p in (folder / "card.json", folder / MANIFEST, folder / "model.safetensors",
                                       weights, *backbone_files))


def folder_problem(folder: Path) -> str | None:
    """Why the model folder cannot be loaded, as far as is known without reading its weights: its
    files (regular, bounded, in its zoo) and card, or a load of the same files refused before; None
    if nothing is known against it. Cached by the files' keys: a page's run costs a few stats."""
    folder = Path(folder)
    card = _card_at(file_key(folder / "card.json"))
    if isinstance(card, CheckpointError):
        return str(card)
    try:
        key = _files_key(folder, card, weights_path(folder, card))
    except CheckpointError as e:
        return str(e)
    return REFUSED.get(key) or _static_problem(key)


@functools.lru_cache(maxsize=MAX_VERDICTS)
def _card_at(card_key: tuple) -> dict | CheckpointError:
    """The card of each version of a card.json (`file_key`, its path first): shared, so read and
    never written."""
    try:
        return read_card(Path(card_key[0]).parent)
    except CheckpointError as e:
        return e


@functools.lru_cache(maxsize=MAX_VERDICTS)
def _static_problem(key: tuple) -> str | None:
    card, folder = _card_at(key[0]), Path(key[0][0]).parent
    try:
        regular_file(folder / MANIFEST, folder.parent, MAX_MANIFEST_BYTES)
        regular_file(weights_path(folder, card), folder.parent)
        config = card.get("config")
        if not (isinstance(config, dict) and config.get("backbone")):   # another backbone's depth is in its folder
            validate_card(card, folder.name)
    except CheckpointError as e:
        return str(e)
    return None


class UnknownModel(CheckpointError):
    """A name that is no model of the zoo or of `$BAM_VIZ_MODELS` (nor, for `resolve_model`, a folder)."""


def model_folder(name: str, root: Path = PRETRAINED) -> Path:
    """The folder of the model called `name`: root/name, else a folder of `$BAM_VIZ_MODELS`. Names
    only: the app loads what its list offers, never a path from its address."""
    if isinstance(name, str) and name and "/" not in name and (Path(root) / name / "card.json").exists():
        return Path(root) / name
    users = user_folders()
    if isinstance(name, str) and name in users:
        return users[name]
    raise UnknownModel(f"no model called {name!r} (have: {available_models()}); a model folder is "
                       f"loaded with path=, or added to the app with ${MODELS_ENV}")


def resolve_model(spec: str, root: Path = PRETRAINED) -> Path:
    """The folder a command's `--model` names: a model called `spec` (`model_folder`), else the model
    folder at the path `spec`. Names come first: "bam-wc" is the zoo's even where the working folder
    holds a folder of that name ("./bam-wc" is that folder)."""
    try:
        return model_folder(spec, root)
    except UnknownModel:
        folder = Path(spec).expanduser() if isinstance(spec, str) and spec else None
        if folder is None or not folder.is_dir():
            raise UnknownModel(f"no model called {spec!r} (have: {available_models()}) and no folder at that "
                               "path") from None
    if not (folder / "card.json").is_file():
        raise CheckpointError(f"{folder} is not a model folder: it has no card.json (a model folder holds card.json, "
                              "model.safetensors and MANIFEST.json, as python -m bam_viz train writes them)")
    return folder


def load_model(spec: str, root: Path = PRETRAINED, device: str | torch.device | None = None) -> BamClassifier:
    """The model a command's `--model` names (`resolve_model`), loaded."""
    return load(path=resolve_model(spec, root), device=device)


def weights_path(folder: Path, card: dict) -> Path:
    """The weights a card names: its own, or those of the model of the same zoo it shares them with
    (`weights_from`: mc-dropout's), refused if that path leads out of the zoo."""
    if "weights_from" not in card:
        return folder / "model.safetensors"
    source = card["weights_from"]
    what = f"{folder.name}/card.json's weights_from {source!r}"
    if not isinstance(source, str) or not source.strip() or "\x00" in source:
        raise CheckpointError(f"{what} is not the name of a model folder")
    file = folder.parent / source / "model.safetensors"
    inside(file.parent, folder.parent, what)
    inside(file, folder.parent, what)                   # a link in that folder may lead elsewhere too
    return file


def read_card(folder: Path) -> dict:
    """folder/card.json: a regular file of at most MAX_CARD_BYTES that holds a JSON object."""
    folder = Path(folder)
    card = read_json(folder / "card.json", folder.parent, MAX_CARD_BYTES)
    if not isinstance(card, dict):
        raise CheckpointError(f"{folder.name}/card.json is not a JSON object")
    return card


def load(name: str | None = None, device: str | torch.device | None = None, root: Path = PRETRAINED, *,
         path: str | Path | None = None) -> BamClassifier:
    """The model called `name` (a zoo model in `root`, the shipped ones by default, or a folder of
    `$BAM_VIZ_MODELS`), or the model folder at `path`.
    Its files are checked (`bam_viz.model_files`), its card against the folder's manifest and field
    by field, the weights' shapes against the model the card builds, its backbone and weights
    against the card's sha256, before any tensor is read; each refusal is one CheckpointError line,
    and a refused load is refused again from memory while the same files are there (`REFUSED`)."""
    from bam_viz.core.device import choose_device, tune_allocator

    folder = Path(path) if path is not None else model_folder(name, root)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a model folder")
    tune_allocator()
    card = read_card(folder)
    file = weights_path(folder, card)
    key = _files_key(folder, card, file)
    if (refused := REFUSED.get(key)) is not None:
        raise CheckpointError(refused)
    try:
        model = _checked_model(folder, card, file)
    except CheckpointError as e:
        REFUSED.put(key, str(e))
        raise
    model.card = card
    model = share_pretrained(model.to(choose_device(device)).eval().merge_adapters())
    model.origin = (folder.name, str(folder.parent.resolve()))   # where another process loads the same model
    return model


def _checked_model(folder: Path, card: dict, file: Path) -> BamClassifier:
    """The model of `card` with the weights `file`, the cheap checks first: a card's edit, its
    fields, the weights' header (a file that is no safetensors is refused before it is hashed); then
    the weights hashed once, and their shapes against the model the card builds."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bam_viz.nn.backbone import BackboneError, read_backbone

    name, zoo = folder.name, folder.parent
    digest = functools.cache(sha256_file)
    _check_manifest(folder, ("card.json",), digest)
    backbone_dir = card["config"].get("backbone") if isinstance(card.get("config"), dict) else None
    try:
        backbone = read_backbone(backbone_dir if isinstance(backbone_dir, str) else None)
    except BackboneError as e:
        # Its message names the backbone's folder by its path on this disk; a page shows its name.
        where = Path(backbone_dir).expanduser().resolve() if isinstance(backbone_dir, str) else None
        raise CheckpointError(f"the backbone of {name} cannot be used: "
                              f"{str(e).replace(str(where), where.name) if where else e}") from None
    config = validate_card(card, name, backbone.config.n_layers)
    regular_file(file, zoo)
    shapes = header_shapes(file, zoo)
    _check_manifest(folder, ("model.safetensors",), digest)
    recorded = card["backbone"].get("sha256") if isinstance(card.get("backbone"), dict) else None
    if recorded is not None and recorded != backbone.sha256:
        raise CheckpointError(f"{name} was trained on a backbone with weights sha256 {str(recorded)[:12]}..., "
                              f"but {backbone.name}'s {backbone.weights.name} has {backbone.sha256[:12]}...")
    entry = f"../{card['weights_from']}/{file.name}" if "weights_from" in card else file.name
    expected, found = card["files"].get(entry), digest(file)
    if expected != found:
        raise CheckpointError(f"{shown(file, zoo)} is corrupt or was changed: sha256 {found[:12]}..., "
                              f"card says {str(expected)[:12]}...")
    model = BamClassifier(config)
    check_fit(shapes, {k: tuple(v.shape) for k, v in model.state_dict().items()}, set(model.trainable_state_dict()),
              list(config.classes), shown(file, zoo))
    try:
        state = load_file(str(file))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{shown(file, zoo)} cannot be read as safetensors: {e}") from None
    model.load_state_dict(state, strict=False)          # check_fit: every key and shape fits
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
    """Store an evaluation's headline figures in the card of the model `name` names (`resolve_model`:
    evaluate --update-card's --model), under metrics[<corpus>_<split>]."""
    path = resolve_model(name, root) / "card.json"
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
