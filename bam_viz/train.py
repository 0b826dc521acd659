"""Fine-tune a model by maximising the ELBO, on the movie-review sentences (the zoo's presets) or
on a user's labelled texts with any number of classes, and write its folder.

ELBO = E_q[log p(y | S, x)] - kl_weight * KL(q(S) || p(S))   (Fan et al. 2020, eq. 3)

with one attention sample per sentence and step (the reparameterised Monte Carlo estimate of BAM).
The KL is summed over the stochastic layers, heads and the real (query, key) cells of each sentence,
padded rows and keys excluded, and divided by the batch's count of real cells, so that `kl_weight`
reads per cell; it is linearly annealed from 0 over the first `kl_anneal` of the steps (Bowman et
al. 2016). The categorical model maximises the exact marginal likelihood instead (Deng et al. 2018,
eq. 1). After every epoch the dev set's predictive NLL (E[f(z)] with `dev_samples` attention
samples) is measured; the weights of the best epoch are kept, and training stops after `patience`
epochs without a better one.

The folder is written under a temporary name beside `--out` and renamed at the end, so a failed or
interrupted run leaves nothing that loads.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from bam_viz.model import ModelConfig
from bam_viz.zoo import RECIPES, SHARED_WEIGHTS, read_card, write_folder_manifest

DEFAULTS = dict(batch_size=32, lr=1e-3, weight_decay=0.01, warmup=0.06, kl_weight=0.01, kl_anneal=0.5, seed=0,
                patience=2, dev_fraction=0.1, dev_samples=8)
# Epochs when --epochs is not given: the zoo's recipe on its 8,000 sentences, and a user's data
# (early stopping on dev NLL decides when to stop before that).
PRESET_EPOCHS, DATA_EPOCHS = 2, 8
DEFAULT_PRESET = "bam-wc"      # the recipe when neither --preset nor --family is given


class TrainingError(RuntimeError):
    """Options that cannot make a model (the message says which and why)."""


def recipe(name: str, hyper: dict[str, float]) -> ModelConfig:
    """The zoo recipe of `name` with attention hyperparameter overrides (a sweep on dev)."""
    config = RECIPES[name]
    if not hyper:
        return config
    return replace(config, attention=replace(config.attention, hyper=config.attention.with_hyper(**hyper)))


def family_config(name: str, family: str, n_layers: int, hyper: dict[str, float], *, prior: str = "contextual"):
    """A model of `family` with that family's default hyperparameters (overridden by `hyper`): its
    attention in the upper half of the layers, or, for a hard alignment, the top layer's [CLS] query."""
    from bam_viz import families
    from bam_viz.nn.attention import AttentionConfig

    fam = families.get(family)
    layers = (n_layers - 1,) if fam.hard_alignment else tuple(range(n_layers // 2, n_layers))
    return ModelConfig(name, AttentionConfig(fam.name, prior, hyper=fam.hyper(None).replace(**hyper)),
                       stochastic_layers=layers, description=f"{fam.name.capitalize()} attention.")


def fit_layers(config: ModelConfig, n_layers: int) -> ModelConfig:
    """A preset's stochastic layers moved onto a backbone with `n_layers` layers (the same rule)."""
    if config.mc_dropout:
        return replace(config, stochastic_layers=tuple(range(n_layers)))
    if config.attention.attention_family.hard_alignment:
        return replace(config, stochastic_layers=(n_layers - 1,))
    return replace(config, stochastic_layers=tuple(range(n_layers // 2, n_layers)))


@dataclass
class TrainingData:
    texts: list[str]
    targets: torch.Tensor          # (N,) class indices, or (N, K) class probabilities (soft targets)
    dev_texts: list[str]
    dev_labels: torch.Tensor       # (M,) class indices
    classes: tuple[str, ...]
    card: dict                     # the card's "data" section


def corpus_data(args) -> TrainingData:
    """The zoo's data: the clear movie-review sentences of the corpus's own train and dev splits."""
    from bam_viz.core.task import CLASSES
    from bam_viz.data import SPLIT_RULE, load_split, split_fingerprint

    train_set, dev_set = load_split("movies", "train", args.data), load_split("movies", "dev", args.data)
    if args.limit:
        train_set = train_set[: args.limit]
    labels = torch.tensor([CLASSES.index(s.label) for s in train_set])
    soft = args.targets == "soft"
    targets = soft_targets(train_set) if soft else labels
    card = {"corpus": "movies (Hutto & Gilbert 2014)", "train_sentences": len(train_set),
            "dev_sentences": len(dev_set), "split_rule": SPLIT_RULE, "split_fingerprint": split_fingerprint(args.data),
            "targets": "soft: share of raters rating > 0 (human_p_positive)" if soft else "hard: clear labels"}
    return TrainingData([s.text for s in train_set], targets, [s.text for s in dev_set],
                        torch.tensor([CLASSES.index(s.label) for s in dev_set]), CLASSES, card)


def user_data(args) -> TrainingData:
    """A user's file: its classes, and a seeded stratified dev split of it unless --dev-data is given."""
    from bam_viz import dataset

    classes = tuple(c.strip() for c in args.classes.split(",")) if args.classes else None
    data = dataset.read_labelled(args.data, args.text_column, args.label_column, classes)
    if args.dev_data:
        train_set = data
        dev_set = dataset.read_labelled(args.dev_data, args.text_column, args.label_column, data.classes)
        rule = f"--dev-data {args.dev_data}"
    else:
        train_set, dev_set = dataset.stratified_split(data, args.dev_fraction, args.seed)
        rule = dataset.SPLIT_RULE.format(seed=args.seed, fraction=args.dev_fraction)
    notes = dataset.check_dev(train_set, dev_set)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.limit:
        train_set = train_set.subset(range(min(args.limit, len(train_set.texts))))
    card = {"file": str(args.data), "sha256": data.sha256, "text_column": args.text_column,
            "label_column": args.label_column, "train": dataset.describe(train_set),
            "dev": dataset.describe(dev_set), "split_rule": rule,
            "split_fingerprint": dataset.split_fingerprint(train_set, dev_set), "targets": "hard: the label column",
            "notes": notes}
    return TrainingData(list(train_set.texts), torch.tensor(train_set.labels), list(dev_set.texts),
                        torch.tensor(dev_set.labels), data.classes, card)


def soft_targets(snippets) -> torch.Tensor:
    """(N, 2) [1 - p, p] with p the share of raters who called the sentence positive."""
    p = torch.tensor([s.human_p_positive for s in snippets], dtype=torch.float32)
    return torch.stack([1 - p, p], -1)


def class_weights(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(K,) n / (K n_c): the "balanced" weights of each class's negative log-likelihood, so that every
    class weighs as much in the loss as if the classes were equally frequent (n_c >= 1)."""
    counts = torch.bincount(labels, minlength=n_classes).float()
    return len(labels) / (n_classes * counts.clamp_min(1.0))


def loss_terms(model, ids, mask, labels, generator, weight: torch.Tensor | None = None):
    """(negative log-likelihood, KL per real cell), both for the batch. `labels` are class indices
    (B,), or (B, K) class probabilities for training on the raters' soft labels; `weight` (K,) weighs
    each class's NLL (`class_weights`; the weighted mean, as torch's cross entropy takes it)."""
    x, _ = model.lower(ids, mask, generator=generator)
    if model.attention_family.hard_alignment:
        log_marginal, _, _ = model.exact_log_marginal(x, mask, generator=generator)
        if labels.is_floating_point():
            return -(labels * log_marginal).sum(-1).mean(), x.new_zeros(())
        return torch.nn.functional.nll_loss(log_marginal, labels, weight=weight), x.new_zeros(())
    logits, _, kl = model.upper(x, mask, generator=generator)
    n_stoch = len([i for i in model.config.stochastic_layers if i >= model.first_stochastic])
    # Real cells of each sentence: L valid queries x L valid keys, in every head of every stochastic layer.
    cells = (mask.sum(1).float() ** 2) * model.n_heads * max(n_stoch, 1)
    return torch.nn.functional.cross_entropy(logits, labels, weight=weight), kl.sum() / cells.sum()


@torch.no_grad()
def dev_metrics(model, texts: list[str], labels: torch.Tensor, n_samples: int, seed: int) -> dict:
    """The dev set's predictive NLL, accuracy and top-label ECE of E[f(z)] (`n_samples` samples)."""
    from bam_viz.core import metrics

    model.eval()
    probs = model.predict(texts, n_samples=n_samples, seed=seed).numpy().astype(np.float64)
    model.train()
    y = labels.numpy()
    return {"nll": round(metrics.nll(probs, y), 5), "accuracy": round(metrics.accuracy(probs, y), 5),
            "ece": round(metrics.ece(probs, y), 5), "sentences": len(texts)}


def length_bucketed_batches(lengths: list[int], batch_size: int, generator: torch.Generator,
                            pool: int = 50) -> list[torch.Tensor]:
    """Shuffled batches of similar length (less padding), in a shuffled order: sort within pools of
    `pool` batches, cut, then shuffle the batches."""
    order = torch.randperm(len(lengths), generator=generator)
    batches = []
    for start in range(0, len(order), batch_size * pool):
        chunk = order[start : start + batch_size * pool]
        chunk = chunk[torch.argsort(torch.tensor([lengths[i] for i in chunk]), stable=True)]
        batches += list(chunk.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]


def build_config(args, classes: tuple[str, ...], n_layers: int, name: str) -> ModelConfig:
    from bam_viz.nn.encoder import BertConfig

    if args.preset or not args.family:      # no choice: the default recipe, BAM-WC (Fan et al. 2020)
        config = recipe(args.preset or DEFAULT_PRESET, args.attention)
    else:
        config = family_config(name, args.family, n_layers, args.attention)
    if args.data_is_user:
        config = replace(config, description=f"{config.description} Trained on {Path(args.data).name} "
                                             f"({', '.join(classes)}).")
    if n_layers != BertConfig().n_layers:        # the presets' layers are MiniLM's
        config = fit_layers(config, n_layers)
    backbone = str(Path(args.backbone).resolve()) if args.backbone else None
    return replace(config, name=name, classes=classes, backbone=backbone)


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise TrainingError(f"{out} exists: pass --overwrite to replace it (it is replaced only when training ends)")
    if not out.parent.exists():
        out.parent.mkdir(parents=True)


def train(args) -> Path:
    """Train, then write the model folder `--out` (weights, card.json, MANIFEST.json) in one rename."""
    from tqdm import tqdm

    from bam_viz.model import BamClassifier
    from bam_viz.nn.backbone import read_backbone

    out = Path(args.out) if args.out else None
    if out is None:
        if args.data_is_user or not args.preset:
            raise TrainingError("--out names the model folder to write (e.g. --out models/intents)")
        from bam_viz.zoo import PRETRAINED

        out = PRETRAINED / args.preset
    _check_out(out, args.overwrite)
    epochs = args.epochs or (DATA_EPOCHS if args.data_is_user else PRESET_EPOCHS)
    backbone = read_backbone(args.backbone)
    data = user_data(args) if args.data_is_user else corpus_data(args)
    config = build_config(args, data.classes, backbone.config.n_layers, out.name)

    torch.manual_seed(args.seed)  # only the parameter initialisation reads the global seed
    g = torch.Generator().manual_seed(args.seed)
    model = BamClassifier(config)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = math.ceil(len(data.texts) / args.batch_size)
    total = steps_per_epoch * epochs
    warm = max(1, int(args.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))

    weight = None
    if args.class_weights == "balanced":
        if data.targets.is_floating_point():
            raise TrainingError("--class-weights balanced needs hard labels, not --targets soft")
        weight = class_weights(data.targets, len(data.classes))
    model.train()
    step, t0, history, best = 0, time.time(), [], None
    lengths = [len(model.tokenizer.encode(t)[0]) for t in data.texts]
    bar = tqdm(total=total, desc=f"train {out.name}", file=sys.stderr, mininterval=2, unit="step")
    dev_nll = "-"
    for epoch in range(epochs):
        for idx in length_bucketed_batches(lengths, args.batch_size, g):
            ids, mask = model.tokenizer.batch([data.texts[i] for i in idx])
            nll, kl = loss_terms(model, ids, mask, data.targets[idx], g, weight)
            anneal = min(1.0, step / max(1.0, args.kl_anneal * total))
            loss = nll + args.kl_weight * anneal * kl
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            bar.set_postfix_str(f"epoch {epoch + 1}/{epochs} loss {loss.item():.3f} kl {kl.item():.3f} "
                                f"dev nll {dev_nll}", refresh=False)
            bar.update()
        dev = dev_metrics(model, data.dev_texts, data.dev_labels, args.dev_samples, args.seed)
        history.append({"epoch": epoch + 1, "step": step, **dev})
        dev_nll = f"{dev['nll']:.4f}"
        if best is None or dev["nll"] < best[0]["nll"]:
            best = (history[-1], {k: v.clone() for k, v in model.trainable_state_dict().items()})
        elif epoch + 1 - best[0]["epoch"] >= args.patience:
            break
    bar.close()
    seconds = time.time() - t0
    chosen, state = best
    card = {
        "name": out.name,
        "description": config.description,
        "classes": list(config.classes),
        "config": config.to_dict(),
        "trained_hyper": dict(config.attention.hyper),
        "backbone": backbone.to_card(),
        "training": {
            "objective": "exact marginal likelihood" if config.attention.attention_family.hard_alignment else "ELBO",
            "preset": args.preset, "class_weights": None if weight is None else
            dict(zip(config.classes, [round(float(w), 4) for w in weight], strict=True)),
            "kl_weight_per_cell": args.kl_weight, "kl_anneal_fraction": args.kl_anneal,
            "kl_cells": "valid query rows x valid keys, per head and stochastic layer",
            "epochs": epochs, "epochs_run": len(history), "best_epoch": chosen["epoch"], "patience": args.patience,
            "batch_size": args.batch_size, "lr": args.lr, "weight_decay": args.weight_decay,
            "warmup_fraction": args.warmup, "seed": args.seed, "attention_samples_per_step": 1,
            "dev_samples": args.dev_samples, "steps": step, "seconds": round(seconds, 1),
            "sentences_per_second": round(step * args.batch_size / max(seconds, 1e-9), 1),
            "trainable_parameters": sum(p.numel() for p in params),
            "encoder": f"{backbone.name}, frozen; LoRA rank {config.lora_rank} on every linear layer",
        },
        "command": "python -m bam_viz " + shlex.join(getattr(args, "argv", sys.argv[1:])),
        "data": data.card,
        "dev_history": history,
        "dev_metrics": chosen,
        "metrics": {},
    }
    write_model_folder(out, state, card)
    if args.preset in SHARED_WEIGHTS.values() and not args.data_is_user:
        for name, base in SHARED_WEIGHTS.items():
            if base == args.preset:
                write_shared_card(name, card, out.parent)
    return out


def write_model_folder(out: Path, state: dict[str, torch.Tensor], card: dict) -> Path:
    """Weights, card (with their sha256) and manifest into a temporary sibling of `out`, renamed onto
    `out` at the end: an interrupted write leaves only a hidden `.partial` folder, which loads nowhere."""
    from safetensors.torch import save_file

    from bam_viz.nn.encoder import sha256_file

    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_file(state, str(tmp / "model.safetensors"))
        card = {**card, "files": {"model.safetensors": sha256_file(tmp / "model.safetensors")}}
        (tmp / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
        write_folder_manifest(tmp)
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def write_shared_card(name: str, base_card: dict, root: Path):
    """A model that reuses another's weights (mc-dropout) gets its own folder and card pointing at them."""
    config = RECIPES[name]
    base = base_card["name"]
    card = {**base_card, "name": name, "description": config.description,
            "config": replace(config, classes=tuple(base_card["classes"])).to_dict(),
            "weights_from": base, "metrics": {},
            "files": {f"../{base}/model.safetensors": read_card(root / base)["files"]["model.safetensors"]}}
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    write_folder_manifest(folder)
