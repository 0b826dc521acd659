"""Weight-space against attention-space uncertainty on our data (Cinquin et al. 2021, "Pathologies in
Priors and Inference for Bayesian Transformers"), from the models' cards (`uncertainty_table`), with
the spread between training seeds that docs/results.md measures (`seed_spread`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from bam_viz import zoo
from bam_viz.evaluation.corpus import IN_DOMAIN, OUT_OF_DOMAIN
from bam_viz.plots.kit import figure
from bam_viz.plots.style import POSTERIOR_COLOUR, PRIOR_COLOUR
from bam_viz.theory.common import ATTENTION_SPACE, NO_NOISE, WEIGHT_SPACE, axis, layout, noise_space

SPACES = {name: noise_space(config) for name, config in zoo.RECIPES.items()}
OOD_CORPORA = OUT_OF_DOMAIN
# (key, label, better): read from each card's metrics[f"{IN_DOMAIN}_test"], except the OOD mean.
MEASURES = (
    ("nll", f"NLL, {IN_DOMAIN} test", "lower"),
    ("ece", f"ECE, {IN_DOMAIN} test", "lower"),
    ("auroc_ambiguous_mi", "AUROC ambiguous vs clear (MI)", "higher"),
    ("auroc_ood_mi", f"AUROC out-of-domain (MI), {len(OOD_CORPORA)} corpora", "higher"),
)
# Where the spread between training seeds is measured, with the commands that measure it.
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"
SEED_SECTION = "## Spread over training seeds"


def _short(label: str) -> str:
    return label.split(",")[0]


def seed_spread(results: Path = RESULTS) -> dict[str, float]:
    """Per measure, the larger standard deviation over training seeds of the models in `results`'
    seed table (a column "mean ± sd (each seed's value)" named like the measure). Empty where the
    file or the table is missing (an installed package carries no docs)."""
    try:
        text = Path(results).read_text()
    except OSError:
        return {}
    if SEED_SECTION not in text:
        return {}
    section = text[text.index(SEED_SECTION) + len(SEED_SECTION):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.lstrip().startswith("|")]
    if len(rows) < 3:
        return {}
    header, body = rows[0], rows[2:]                                    # rows[1] is the |---| line
    out = {}
    for key, label, _ in MEASURES:
        if _short(label) in header:
            column = header.index(_short(label))
            sds = [float(m.group(1)) for row in body if (m := re.search(r"± (\d+\.\d+)", row[column]))]
            if sds:
                out[key] = max(sds)
    return out



@dataclass(frozen=True)
class UncertaintyRow:
    model: str
    space: str
    nll: float
    ece: float
    auroc_ambiguous_mi: float
    auroc_ood_mi: float               # mean over OOD_CORPORA
    ood_by_corpus: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict:
        return {"model": self.model, "noise in": self.space, "NLL": self.nll, "ECE": self.ece,
                "AUROC ambiguous (MI)": self.auroc_ambiguous_mi, "AUROC OOD (MI)": self.auroc_ood_mi,
                **{f"OOD {c}": v for c, v in self.ood_by_corpus}}


def uncertainty_table(names: Sequence[str] | None = None, root=None) -> list[UncertaintyRow]:
    """One row per model from its card's stored evaluation (`python -m bam_viz evaluate
    --update-card`); a model whose card lacks a measure is left out, with no row half filled."""
    root = zoo.PRETRAINED if root is None else root
    names = [n for n in SPACES if n in zoo.available_models()] if names is None else list(names)
    rows = []
    for name in names:
        metrics = (zoo.read_card(zoo.model_folder(name, root)).get("metrics") or {})
        in_domain = metrics.get(f"{IN_DOMAIN}_test") or {}
        ood = [(c, (metrics.get(f"{c}_test") or {}).get("auroc_ood_mi")) for c in OOD_CORPORA]
        values = [in_domain.get(k) for k in ("nll", "ece", "auroc_ambiguous_mi")] + [v for _, v in ood]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            continue
        rows.append(UncertaintyRow(name, SPACES.get(name, ATTENTION_SPACE), float(in_domain["nll"]),
                                   float(in_domain["ece"]), float(in_domain["auroc_ambiguous_mi"]),
                                   float(np.mean([v for _, v in ood])), tuple((c, float(v)) for c, v in ood)))
    return rows


SPACE_COLOURS = {WEIGHT_SPACE: "#d62728", ATTENTION_SPACE: POSTERIOR_COLOUR, NO_NOISE: PRIOR_COLOUR}


def uncertainty_figure(rows: Sequence[UncertaintyRow]) -> go.Figure:
    """One small panel per measure (a 2 x 2 grid), models down the side, coloured by where their noise lives."""
    x_domains, y_domains = ([0.0, 0.42], [0.58, 1.0]), ([0.62, 1.0], [0.0, 0.36])
    data, look = [], layout("Where the noise lives: weight space against attention space", 700)
    names = [r.model for r in rows][::-1]
    seen = set()
    for i, (key, label, better) in enumerate(MEASURES):
        n = "" if i == 0 else str(i + 1)
        for space, colour in SPACE_COLOURS.items():
            chosen = [r for r in rows if r.space == space]
            if not chosen:
                continue
            data.append({"type": "scatter", "x": [getattr(r, key) for r in chosen], "y": [r.model for r in chosen],
                         "mode": "markers", "name": space, "legendgroup": space, "showlegend": space not in seen,
                         "xaxis": f"x{n}", "yaxis": f"y{n}", "marker": {"size": 16, "color": colour},
                         "hovertemplate": "%{y}: %{x:.3f}<extra></extra>"})
            seen.add(space)
        look[f"xaxis{n}"] = {**axis(f"{label}<br>({better} is better)"), "domain": x_domains[i % 2],
                             "anchor": f"y{n}", "nticks": 6}
        look[f"yaxis{n}"] = {"type": "category", "categoryorder": "array", "categoryarray": names,
                             "anchor": f"x{n}", "domain": y_domains[i // 2], "gridcolor": "#eeeeee"}
    # One row of legend over the grid, so that it meets no axis title.
    look["margin"] = {**look["margin"], "l": 120, "t": 110, "b": 110}
    look["legend"] = {**look["legend"], "y": 1.02, "yanchor": "bottom"}
    return figure(data, look)


def uncertainty_caption(rows: Sequence[UncertaintyRow], seed_sd: Mapping[str, float] | None = None) -> str:
    """What the stored numbers show, and what one seed of a small model cannot; a difference of two
    models is set against the spread of such a difference where `seed_sd` (`seed_spread()`) has it:
    each model is one training seed, so their difference spreads by √2 × one seed's sd (the
    variance of a difference of two independent seeds is twice one seed's)."""
    seed_sd = seed_sd or {}
    weight = [r for r in rows if r.space == WEIGHT_SPACE]
    attention = [r for r in rows if r.space == ATTENTION_SPACE]
    if not weight or not attention:
        return "The comparison needs the mc-dropout model and at least one attention-space model with stored metrics."
    w = weight[0]
    parts, weight_wins, attention_wins = [], [], []
    for key, label, better in MEASURES:
        short = _short(label)
        best = (min if better == "lower" else max)(attention, key=lambda r: getattr(r, key))
        diff = getattr(best, key) - getattr(w, key)
        (attention_wins if (diff < 0) == (better == "lower") else weight_wins).append(short)
        sd = seed_sd.get(key)
        spread = "" if sd is None else (
            f"; {'within' if abs(diff) <= math.sqrt(2) * sd else 'beyond'} the spread of a difference between "
            f"two training seeds, √2 × {sd:.3f} = {math.sqrt(2) * sd:.3f}")
        parts.append(f"{short} {getattr(w, key):.3f} against {getattr(best, key):.3f} ({best.model}{spread})")
    verdict = (f"{w.model} is better on {' and '.join(weight_wins) or 'nothing'}, attention-space noise on "
               f"{' and '.join(attention_wins) or 'nothing'}")
    return (f"Weight-space {w.model} against the best attention-space model: " + ", ".join(parts) + f"; so {verdict}. "
            "Each model is one training seed of a small LoRA-tuned MiniLM, and our weight-space model is dropout, "
            "not the weight-space variational inference Cinquin et al. found wanting: the numbers show attention-"
            "space noise is competitive here, not that weight-space inference fails.")
