"""K-class models for the tests: a random head on the real MiniLM (nothing trained), drawn from an
explicit generator, in code or written as a model folder that `zoo.load` reads like any other. The
one home of such models; `fake_result.k_class_model` and `why_k_models.random_head_model` name
particular ones.

A model's predictions depend on the checkpoint and on what `BamClassifier` initialises at random:
the head, the adapters' A (whose B starts at zero, so they change nothing) and the prior networks
(which enter the KL, not the sampled pass). Drawing the head from `seed` makes every run's numbers
the same, whatever the global seed."""

from __future__ import annotations

from pathlib import Path

import torch

from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig

CLASSES3 = ("sports", "politics", "science")


FAMILIES = {
    "weibull": dict(attention=AttentionConfig("weibull", "contextual", hyper={"shape_k": 3.0, "beta": 1.0})),
    "categorical": dict(attention=AttentionConfig("categorical"), stochastic_layers=(5,)),
}


def k_class_model(classes: tuple[str, ...] = CLASSES3, name: str = "t3", *, family: str = "weibull", seed: int = 0,
                  weight_scale: float = 0.1, bias_scale: float = 0.0) -> BamClassifier:
    """A model of `family` (BAM-WC's Weibull, or the categorical alignment) with a head of
    len(classes) outputs, in eval mode: head weights `weight_scale` and biases `bias_scale` times
    standard normals drawn in that order from a generator seeded with `seed`."""
    model = BamClassifier(ModelConfig(name, classes=tuple(classes), **FAMILIES[family]))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.head.weight.copy_(weight_scale * torch.randn(model.head.weight.shape, generator=g))
        model.head.bias.copy_(bias_scale * torch.randn(model.head.bias.shape, generator=g))
    return model.eval()


def k_class_folder(root: Path, classes: tuple[str, ...] = CLASSES3, name: str = "t3") -> Path:
    """`k_class_model` written as a model folder root/name (weights, card, manifest)."""
    from bam_viz.train import write_model_folder

    model = k_class_model(classes, name)
    card = {"name": name, "description": model.description, "classes": list(model.classes),
            "config": model.config.to_dict(), "trained_hyper": dict(model.config.attention.hyper), "metrics": {}}
    return write_model_folder(Path(root) / name, model.trainable_state_dict(), card)
