"""K-class models for the Why section's tests: the real MiniLM with a K-output head drawn from an
explicit generator.

A model's predictions depend on the checkpoint and on what `BamClassifier` initialises at random:
the head, the adapters' A (whose B starts at zero, so they change nothing) and the prior networks
(which enter the KL, not the sampled pass). Drawing the head from `seed` makes every run's numbers
the same, whatever the global seed.
"""

from __future__ import annotations

import torch

from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig

FAMILIES = {
    "weibull": dict(attention=AttentionConfig("weibull", "contextual", hyper={"shape_k": 3.0, "beta": 1.0})),
    "categorical": dict(attention=AttentionConfig("categorical"), stochastic_layers=(5,)),
}


def class_names(K: int) -> tuple[str, ...]:
    """("a", "b", "c") for K = 3; "c00", "c01", ... for more than ten."""
    return tuple("abcdefghij"[:K]) if K <= 10 else tuple(f"c{i:02d}" for i in range(K))


def random_head_model(classes: int | tuple[str, ...], family: str = "weibull", seed: int = 0,
                      scale: float = 0.1, name: str | None = None) -> BamClassifier:
    """A K-class model (`classes` a count or the names) in eval mode, with head weights
    N(0, scale^2) and zero biases: logits a few units apart on MiniLM's [CLS] state."""
    names = class_names(classes) if isinstance(classes, int) else tuple(classes)
    config = ModelConfig(name or f"k{len(names)}-{family}", classes=names, **FAMILIES[family])
    model = BamClassifier(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.head.weight.copy_(scale * torch.randn(model.head.weight.shape, generator=g))
        model.head.bias.zero_()
    return model.eval()
