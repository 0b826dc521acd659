"""Softmax attention: the deterministic baseline (Vaswani et al. 2017)."""

from __future__ import annotations

from bam_viz.families.base import AttentionFamily


class Softmax(AttentionFamily):
    name = "softmax"
    label = "softmax (deterministic)"
    short_label = "softmax"
    source = "Vaswani et al. 2017"
    stochastic = False
