"""Exact marginal, posterior and ELBO of a latent alignment (Deng et al. 2018, "Latent Alignment and
Variational Attention", eqs. 1-2), on the zoo's hard-alignment model (`alignment`, `elbo_path`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch

from bam_viz import families, zoo
from bam_viz.core.inputs import check_text
from bam_viz.core.task import CLASSES
from bam_viz.plots.kit import figure
from bam_viz.plots.style import MC_COLOUR, POSTERIOR_COLOUR, PRIOR_COLOUR
from bam_viz.plots.tokens import axis_labels
from bam_viz.theory.common import Control, axis, layout, step_grid

# The zoo's model whose family aligns [CLS] to one key, enumerated exactly.
ALIGNMENT_MODEL = next(name for name, config in zoo.RECIPES.items() if families.get(config.family).hard_alignment)
CONTROLS = (Control("q_t", "t: q from the prior (0) to the posterior (1)", step_grid(0, 1, 0.05), 0.5),)


@dataclass(frozen=True)
class Alignment:
    """A hard-alignment model's top-layer alignment for one sentence: z is the one key the [CLS]
    query aligns to, shared by every head (p(z|x) averages the heads' softmax attention of [CLS]);
    p(y|x, z) is the classifier's answer if [CLS] read key z alone. In float64 from the model's
    float32; the model's family enumerates the marginal, the posterior and the ELBO."""

    model: str
    family: str                                     # the model's attention family: it enumerates z
    tokens: tuple[str, ...]
    log_prior: np.ndarray = field(repr=False)       # (T,) log p(z|x)
    log_lik: np.ndarray = field(repr=False)         # (T, 2) log p(y|x, z)
    n_heads: int = 12

    def _t(self, label: int):
        return torch.from_numpy(self.log_prior), torch.from_numpy(self.log_lik[:, label])

    @property
    def _family(self) -> families.AttentionFamily:
        return families.get(self.family)

    def log_marginal(self, label: int) -> float:
        """log p(y|x) = log sum_z p(z|x) p(y|x,z) (eq. 1)."""
        return float(self._family.exact_log_marginal(*self._t(label)))

    def log_posterior(self, label: int) -> np.ndarray:
        """log p(z|x,y) (T,), by Bayes' rule."""
        return self._family.exact_posterior(*self._t(label)).numpy()

    def log_q(self, label: int, t: float) -> np.ndarray:
        """The variational q_t ∝ p(z|x)^(1-t) p(z|x,y)^t (T,): a geometric path from the prior (t = 0)
        to the posterior (t = 1). As the posterior is ∝ p(z|x) p(y|x,z), q_t ∝ p(z|x) p(y|x,z)^t:
        the prior tilted by the likelihood raised to t."""
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"t runs from the prior (0) to the posterior (1), got {t}")
        return torch.from_numpy(self.log_prior + t * self.log_lik[:, label]).log_softmax(-1).numpy()

    def elbo(self, label: int, log_q: np.ndarray) -> float:
        """ELBO(q) = E_q[log p(y|x,z)] - KL(q || p(z|x)) (eq. 2), enumerated exactly."""
        return float(self._family.elbo(torch.from_numpy(np.asarray(log_q, dtype=np.float64)), *self._t(label)))

    def kl_to_posterior(self, label: int, log_q: np.ndarray) -> float:
        """KL(q || p(z|x,y)): what the ELBO falls short of log p(y|x) by."""
        q = np.exp(log_q)
        return float(np.sum(np.where(q > 0, q * (log_q - self.log_posterior(label)), 0.0)))


def alignment(model, text: str) -> Alignment:
    """p(z|x) and p(y|x,z) for every key of `text` from a hard-alignment model (`categorical`), via
    `BamClassifier.exact_log_marginal`."""
    text = check_text(text)
    if not model.attention_family.hard_alignment:
        raise ValueError(f"{model.name} has no latent alignment to enumerate: use the categorical model")
    model.eval()
    ids, mask = model.tokenizer.batch([text])
    with torch.inference_mode():
        x, _ = model.lower(ids.to(model.device), mask.to(model.device))
        _, log_pz, log_lik = model.exact_log_marginal(x, mask.to(model.device))
    log_prior = log_pz[0].double().cpu()
    # float32 log p(z|x) sums to one only to float32 precision: renormalised in float64, the identities
    # below hold to float64 precision.
    return Alignment(model.name, model.config.family, tuple(model.tokenize(text)), log_prior.log_softmax(-1).numpy(),
                     log_lik[0].double().cpu().log_softmax(-1).numpy(), model.n_heads)


@dataclass(frozen=True)
class ElboPath:
    """ELBO(q_t) along the path from the prior to the posterior, and the point at the chosen t."""

    label: int
    t: float
    ts: np.ndarray = field(repr=False)
    elbos: np.ndarray = field(repr=False)
    log_marginal: float
    elbo: float
    kl: float
    log_q: np.ndarray = field(repr=False)


def elbo_path(al: Alignment, label: int, t: float, n_points: int = 101) -> ElboPath:
    if label not in (0, 1):
        raise ValueError(f"label is 0 ({CLASSES[0]}) or 1 ({CLASSES[1]}), got {label!r}")
    ts = np.linspace(0.0, 1.0, n_points)
    log_q = al.log_q(label, t)
    return ElboPath(label, t, ts, np.array([al.elbo(label, al.log_q(label, s)) for s in ts]),
                    al.log_marginal(label), al.elbo(label, log_q), al.kl_to_posterior(label, log_q), log_q)


def alignment_figure(al: Alignment, path: ElboPath) -> go.Figure:
    """Per key: p(y|x,z) (top), and the prior p(z|x), q_t and the posterior p(z|x,y) (bottom)."""
    labels = axis_labels(list(al.tokens))
    y = CLASSES[path.label]
    return figure([
        {"type": "scatter", "x": labels, "y": np.exp(al.log_lik[:, path.label]), "mode": "lines+markers",
         "name": f"p(y = {y} | x, z)", "yaxis": "y2", "line": {"color": "#ff7f0e", "width": 3},
         "marker": {"size": 10}},
        {"type": "bar", "x": labels, "y": np.exp(al.log_prior), "name": "prior p(z | x)",
         "marker": {"color": PRIOR_COLOUR}},
        {"type": "bar", "x": labels, "y": np.exp(path.log_q), "name": f"q (t = {path.t:.2f})",
         "marker": {"color": MC_COLOUR}},
        {"type": "bar", "x": labels, "y": np.exp(al.log_posterior(path.label)), "name": f"posterior p(z | x, y = {y})",
         "marker": {"color": POSTERIOR_COLOUR}},
    ], layout(f"Which key z does [CLS] align to? y = {y}", 600, barmode="group",
               xaxis=axis("key z", type="category", tickangle=-45 if len(labels) > 12 else 0),
               yaxis=axis("probability of z", domain=[0.0, 0.58], range=[0, 1]),
               yaxis2=axis(f"p({y} | x, z)", domain=[0.68, 1.0], range=[0, 1.05])))


def elbo_figure(path: ElboPath) -> go.Figure:
    y = CLASSES[path.label]
    lo = min(float(path.elbos.min()), path.log_marginal)
    pad = 0.08 * max(path.log_marginal - lo, 1e-3)
    return figure([
        {"type": "scatter", "x": path.ts, "y": path.elbos, "mode": "lines", "name": "ELBO(q_t)",
         "line": {"color": MC_COLOUR, "width": 3}},
        {"type": "scatter", "x": [0, 1], "y": [path.log_marginal] * 2, "mode": "lines",
         "name": f"log p(y = {y} | x) = {path.log_marginal:.4f}", "line": {"color": POSTERIOR_COLOUR, "dash": "dash",
                                                                          "width": 3}},
        {"type": "scatter", "x": [path.t, path.t], "y": [path.elbo, path.log_marginal], "mode": "lines",
         "name": f"KL(q ‖ posterior) = {path.kl:.4f}", "line": {"color": "#ff7f0e", "width": 5}},
        {"type": "scatter", "x": [path.t], "y": [path.elbo], "mode": "markers", "name": f"ELBO = {path.elbo:.4f}",
         "marker": {"size": 16, "color": MC_COLOUR}},
    ], layout("ELBO(q) against log p(y|x)", 600,
               xaxis=axis("t (0: prior, 1: posterior)", range=[-0.02, 1.02]),
               yaxis=axis("nats", range=[lo - pad, path.log_marginal + pad])))


def alignment_caption(al: Alignment, path: ElboPath) -> str:
    return (f"z is the one key that the top layer's [CLS] query aligns to, shared by its {al.n_heads} heads "
            f"(p(z | x) averages their softmax attention), so "
            f"log p(y = {CLASSES[path.label]} | x) = {path.log_marginal:.4f} "
            f"is an exact sum over {len(al.tokens)} keys; at t = {path.t:.2f} the ELBO ({path.elbo:.4f}) falls short "
            f"of it by exactly KL(q ‖ p(z | x, y)) = {path.kl:.4f} nats, and only the exact posterior (t = 1) "
            "closes the gap.")

