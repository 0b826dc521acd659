"""`python -m bam_viz report`: the tables of docs/results.md from saved `evaluate --json` files.

Three tables: in-domain (movies test) for both predictives, out-of-domain corpora, and every
model's difference from `softmax` with a 95% paired bootstrap interval over test sentences.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bam_viz.evaluation.evaluate import compare
from bam_viz.evaluation.predictors import VaderPredictor
from bam_viz.zoo import RECIPES

ORDER = [VaderPredictor.name, *RECIPES]      # the baseline, then the zoo in its own order


def _f(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def _pct(x):
    return "–" if x is None else f"{100 * x:.1f}"


def load_results(folder: str | Path) -> dict[tuple[str, str], dict]:
    out = {}
    for f in sorted(Path(folder).glob("*.json")):
        r = json.loads(f.read_text())
        if "predictor" in r and "corpus" in r and r.get("split") == "test":
            out[(r["predictor"], r["corpus"])] = r
    return out


def _sorted(names):
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def in_domain_table(res) -> str:
    rows = ["| model | acc E[f(z)] | acc f(softmax) | NLL E[f] | NLL f(softmax) | ECE E[f] | ECE f(softmax) "
            "| Brier E[f] | AUROC error (H) | AUROC ambiguous (H) | AUROC ambiguous (MI) | ρ P(pos) vs human mean "
            "| ρ H vs rater std |",
            "|" + "---|" * 13]
    for name in _sorted({p for p, c in res if c == "movies"}):
        r = res[(name, "movies")]
        mc, mf = r["mc"], r["softmax"]
        rows.append("| " + " | ".join([
            name, _pct(mc["accuracy"]), _pct(mf["accuracy"]), _f(mc["nll"]), _f(mf["nll"]), _f(mc["ece"]),
            _f(mf["ece"]), _f(mc["brier"]), _f(mc["auroc_error_entropy"]), _f(mc.get("auroc_ambiguous_entropy")),
            _f(mc.get("auroc_ambiguous_mi")), _f(mc["spearman_human_mean"]), _f(mc["spearman_entropy_rater_std"]),
        ]) + " |")
    return "\n".join(rows) + "\n"


def out_of_domain_table(res) -> str:
    corpora = ["tweets", "amazon", "nyt"]
    rows = ["| model | " + " | ".join(f"{c} acc | {c} ECE | {c} AUROC OOD (H) | {c} ρ human" for c in corpora) + " |",
            "|" + "---|" * (1 + 4 * len(corpora))]
    for name in _sorted({p for p, c in res if c in corpora}):
        cells = [name]
        for c in corpora:
            r = res.get((name, c))
            mc = r["mc"] if r else {}
            cells += [_pct(mc.get("accuracy")), _f(mc.get("ece")), _f(mc.get("auroc_ood_entropy")),
                      _f(mc.get("spearman_human_mean"))]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def difference_table(res, baseline="softmax", n_boot=2000) -> str:
    if (baseline, "movies") not in res:
        return f"(no {baseline} results on movies test)\n"
    base = res[(baseline, "movies")]
    rows = [f"| model − {baseline} (movies test, E[f(z)]) | Δ accuracy (points) | Δ NLL | Δ Brier | Δ ECE |",
            "|---|---|---|---|---|"]
    for name in _sorted({p for p, c in res if c == "movies" and p != baseline}):
        cells = [name]
        for metric in ("accuracy", "nll", "brier", "ece"):
            d, lo, hi = compare(res[(name, "movies")], base, metric, n_boot=n_boot, seed=0)
            scale, digits = (100, 1) if metric == "accuracy" else (1, 3)
            cells.append(f"{scale * d:+.{digits}f} [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}]")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


SEED_METRICS = (("accuracy", "acc E[f(z)]", 100, 1), ("nll", "NLL", 1, 3), ("ece", "ECE", 1, 3),
                 ("brier", "Brier", 1, 3), ("auroc_ambiguous_entropy", "AUROC ambiguous (H)", 1, 3))


def seed_table(files: list[str | Path]) -> str:
    """Mean ± standard deviation over training seeds, per model, with every seed's value."""
    groups: dict[str, list[dict]] = {}
    for f in files:
        r = json.loads(Path(f).read_text())
        if r.get("corpus") != "movies" or r.get("split") != "test":
            raise SystemExit(f"{f}: the seed spread is measured on movies test, not {r.get('corpus')}/{r.get('split')}")
        groups.setdefault(r["predictor"], []).append(r)
    header = "| model | seeds | " + " | ".join(title for _, title, _, _ in SEED_METRICS) + " |"
    rows = [header, "|" + "---|" * (2 + len(SEED_METRICS))]
    for name in _sorted(groups):
        cells = [name, str(len(groups[name]))]
        for key, _, scale, digits in SEED_METRICS:
            values = [scale * r["mc"][key] for r in groups[name] if r["mc"].get(key) is not None]
            if not values:
                cells.append("–")
                continue
            mean = statistics.mean(values)
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            each = ", ".join(f"{v:.{digits}f}" for v in values)
            cells.append(f"{mean:.{digits}f} ± {sd:.{digits}f} ({each})")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def run_report(args) -> str:
    if getattr(args, "seeds", None):
        return "### Spread over training seeds (movies test, mean ± sd, then each seed)\n" + seed_table(args.seeds)
    res = load_results(args.results)
    if not res:
        raise SystemExit(f"no evaluate --json results in {args.results}")
    return "\n".join([
        "### In domain: movies test", in_domain_table(res),
        "### Out of domain (test splits; AUROC OOD tells each corpus from movies test)", out_of_domain_table(res),
        f"### Differences from {args.baseline}, 95% paired bootstrap over test sentences ({args.n_boot} resamples)",
        difference_table(res, args.baseline, args.n_boot),
    ])
