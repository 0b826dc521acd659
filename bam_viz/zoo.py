"""The shipped models: their recipes, and loading them from `pretrained/<name>/`.

Each folder holds `model.safetensors` (only what training changed: adapters, layer norms, prior
networks, head) and `card.json` (config, hyperparameters, command, split, metrics, sha256 of files).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bam_viz.attention import AttentionConfig
from bam_viz.encoder import sha256_file
from bam_viz.families import CategoricalFamily, DirichletFamily, LognormalFamily, Softmax, WeibullFamily
from bam_viz.model import BamClassifier, ModelConfig

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


def load(name: str, device: str | torch.device | None = None, root: Path = PRETRAINED) -> BamClassifier:
    """A shipped model, checked against its card's sha256 before its tensors are read."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from bam_viz.device import choose_device, tune_allocator

    tune_allocator()

    card = read_card(name, root)
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
    model = BamClassifier(ModelConfig.from_dict(card["config"]))
    missing, unexpected = model.load_state_dict(state, strict=False)
    trainable = set(model.trainable_state_dict())
    if unexpected or trainable - set(state):
        raise CheckpointError(f"{file} does not fit the {name} model: unexpected {unexpected[:5]}, "
                              f"missing {sorted(trainable - set(state))[:5]}")
    model.card = card
    return model.to(choose_device(device)).eval().merge_adapters()


HEADLINE = ("accuracy", "nll", "brier", "ece", "auroc_error_entropy", "spearman_human_mean")


def update_card_metrics(name: str, result: dict, root: Path = PRETRAINED) -> None:
    """Store an evaluation's headline figures in the model's card (metrics[<corpus>_<split>])."""
    path = root / name / "card.json"
    card = json.loads(path.read_text())
    key = f"{result['corpus']}_{result['split']}"
    entry = {f"{k}": result["mc"][k] for k in HEADLINE if k in result.get("mc", {})}
    entry["mean_field"] = {k: result["mean_field"][k] for k in HEADLINE if k in result.get("mean_field", {})}
    for k, v in result.get("mc", {}).items():
        if k.startswith("auroc_ambiguous") or k.startswith("auroc_ood"):
            entry[k] = v
    entry.update(n_samples=result.get("n_samples"), seed=result.get("seed"), n_clear=result.get("n_clear"))
    card.setdefault("metrics", {})[key] = entry
    path.write_text(json.dumps(card, indent=2) + "\n")
