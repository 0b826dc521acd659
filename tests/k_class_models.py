"""K-class models for the tests of scoring, evaluation and the Corpus page: a random head on the real
MiniLM (nothing trained), in code or written as a model folder that `zoo.load` reads like any other."""

from __future__ import annotations

from pathlib import Path

from bam_viz.model import BamClassifier, ModelConfig
from bam_viz.nn.attention import AttentionConfig

CLASSES3 = ("sports", "politics", "science")


def k_class_model(classes: tuple[str, ...] = CLASSES3, name: str = "t3") -> BamClassifier:
    """A BAM-WC model with a head of len(classes) outputs (in eval mode), built in code."""
    config = ModelConfig(name, AttentionConfig("weibull", "contextual", hyper={"shape_k": 3.0, "beta": 1.0}),
                         classes=classes)
    return BamClassifier(config).eval()


def k_class_folder(root: Path, classes: tuple[str, ...] = CLASSES3, name: str = "t3") -> Path:
    """`k_class_model` written as a model folder root/name (weights, card, manifest)."""
    from bam_viz.train import write_model_folder

    model = k_class_model(classes, name)
    card = {"name": name, "description": model.description, "classes": list(model.classes),
            "config": model.config.to_dict(), "trained_hyper": dict(model.config.attention.hyper), "metrics": {}}
    return write_model_folder(Path(root) / name, model.trainable_state_dict(), card)
