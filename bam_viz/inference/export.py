"""Exports of an `ExplainResult`: the whole result, and the view of one layer and head that the
explorer's downloads hold, with a header of every setting and a file name that says them."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import torch

from bam_viz.core.labels import LABELS
from bam_viz.core.spreadsheet import safe_cell
from bam_viz.inference.result import ExplainResult


def full_json(result: ExplainResult) -> dict:
    """Everything needed to redraw the page, as plain lists (for the download button). The weights'
    names say which mean each is (`bam_viz.inference.gaps`): `posterior_mean_weights` the Monte Carlo mean
    E[w] of `sample_weights`, `softmax_weights` the deterministic pass's softmax(psi),
    `prior_pi_weights` the prior's pi and `prior_mean_weights` the mean of `prior_sample_weights`.
    Every (.., C) list is in the order of `classes`; the headline's one-class numbers are for
    `target` (an index, `target_class` its name)."""
    def lst(t: torch.Tensor | None):
        return None if t is None else _finite(t.detach().cpu().double().tolist())

    prior_draws = result.prior_sample_weights
    return {
        "text": result.text, "tokens": result.tokens, **_classes(result),
        "model": result.model_name, "family": result.family,
        "stochastic_layers": result.stochastic_layers, "hyper": result.hyper,
        "n_samples": result.n_samples, "seed": result.seed, "truncated": result.truncated,
        "mc_probs": lst(result.mc_probs), "mean_attention_probs": lst(result.mean_attention_probs),
        "softmax_probs": lst(result.softmax_probs), "mean_attention_loo_probs": lst(result.mean_attention_loo_probs),
        **view_headline(result),
        "sample_probs": lst(result.sample_probs), "kl": lst(result.kl),
        "posterior_mean_weights": lst(result.posterior_mean_weights),
        "posterior_mean_se": lst(result.posterior_mean_se),
        "softmax_weights": lst(result.softmax_weights),
        "prior_pi_weights": lst(result.prior_weights),
        "prior_mean_weights": lst(prior_draws.double().mean(0)),
        "sample_weights": lst(result.sample_weights),
        "prior_sample_weights": lst(prior_draws),
        "notes": result.notes,
    }


def weights_csv(result: ExplainResult) -> str:
    """Sampled weights in long form: sample, layer, head, query, key, tokens, weight."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["sample", "layer", "head", "query", "key", "query_token", "key_token", "weight"])
    sw = result.sample_weights.detach().cpu()
    S, L, H, T, _ = sw.shape
    flat = sw.reshape(-1).tolist()
    i = 0
    for s in range(S):
        for layer in range(L):
            for h in range(H):
                for q in range(T):
                    for k in range(T):
                        w.writerow([s, layer, h, q, k, safe_cell(result.tokens[q]), safe_cell(result.tokens[k]),
                                    f"{flat[i]:.6g}"])
                        i += 1
    return buf.getvalue()

# ---- the explorer's downloads: what the page shows, for one layer and head ----------------------
def view_header(result: ExplainResult, layer: int, head: int) -> dict:
    """What a download of (layer, head) was made from: the text, model, the classes and the one
    shown, and every setting."""
    return {
        "text": result.text, "tokens": result.tokens, **_classes(result), "model": result.model_name,
        "family": result.family, "hyper": dict(result.hyper), "n_samples": result.n_samples, "seed": result.seed,
        "truncated": result.truncated, "stochastic_layers": result.stochastic_layers,
        "layer": layer, "head": head, "bam_viz_version": package_version(),
    }

def _classes(result: ExplainResult) -> dict:
    """The classes, the one the one-class numbers are for (index and name) and the predicted one."""
    return {"classes": list(result.classes), "target": result.target, "target_class": result.target_name,
            "predicted": result.predicted}


def view_headline(result: ExplainResult) -> dict:
    """The page's headline numbers, with the Monte Carlo standard errors it shows (None where one
    is not estimable: fewer samples than its estimator needs) and how each is estimated. The target
    class's probability three ways (`bam_viz.inference.gaps`): E[f(z)] over the samples, f(E[w]) at
    their mean attention and f(softmax) the deterministic pass; `gap` is Deng's E[f(z)] - f(E[w]),
    `gap_softmax` E[f(z)] - f(softmax), both for the target."""
    t = result.target
    se = result.se
    return {
        "p_target": float(result.mc_probs[t]),
        "p_target_mean_attention": float(result.mean_attention_probs[t]),
        "p_target_softmax": float(result.softmax_probs[t]),
        "gap": result.gap, "gap_softmax": result.gap_softmax,
        "mutual_information": result.mutual_information,
        # bias-corrected from 3 samples (`ExplainResult.mutual_information`), the plug-in below
        "mutual_information_estimator": LABELS["mi_estimator"] if result.n_samples >= 3 else "plug-in",
        "mutual_information_plugin": result.mutual_information_plugin,
        "predictive_entropy": result.predictive_entropy, "expected_entropy": result.expected_entropy,
        "se_p_target": se.p_target, "se_gap": se.gap, "se_gap_softmax": se.gap_softmax,
        "se_mutual_information": se.mutual_information, "se_estimators": dict(se.ESTIMATORS),
        "gap_distinguishable": result.gap_distinguishable,
    }


def view_json(result: ExplainResult, layer: int, head: int) -> dict:
    """The page's view of (layer, head) as plain lists, weights to 6 significant digits:
    every sampled weight (S, T, T) and the prior's draws (S, T, T); as (T, T) the posterior mean
    E[w] (the mean of the sampled weights) with its Monte Carlo SE, the deterministic pass's
    softmax(psi), the prior's pi and the mean of its draws; the prediction samples (S, C) and the
    headline numbers. Non-finite values (an SE of one sample) are null. `full_json` has all heads."""
    return {
        "header": view_header(result, layer, head),
        "headline": view_headline(result),
        "sample_probs": _significant(result.sample_probs),
        "kl": float(result.kl[layer, head]),
        "sample_weights": _significant(result.sample_weights[:, layer, head]),
        "prior_sample_weights": _significant(result.prior_draws(layer, head)),
        "posterior_mean_weights": _significant(result.posterior_mean_weights[layer, head]),
        "posterior_mean_se": _significant(result.posterior_mean_se[layer, head]),
        "softmax_weights": _significant(result.softmax_weights[layer, head]),
        "prior_pi_weights": _significant(result.prior_weights[layer, head]),
        "prior_mean_weights": _significant(result.prior_mean_weights(layer, head)),
    }

CSV_COLUMNS = ["sample", "sample_p_target", "query", "key", "query_token", "key_token", "weight", "prior_draw",
               "posterior_mean_weight", "posterior_mean_se", "softmax_weight", "prior_pi_weight", "prior_mean_weight"]


def view_csv(result: ExplainResult, layer: int, head: int) -> str:
    """The same view in long form: "# name: JSON value" lines for the header and headline, then
    one row per (sample, query, key) with the sample's probability of the target class, that cell's
    sampled weight and prior draw, and the cell's (T, T) values as in `view_json` (`CSV_COLUMNS`; an
    empty cell is a value that is not finite)."""
    buf = io.StringIO()
    for name, value in {**view_header(result, layer, head), **view_headline(result)}.items():
        buf.write(f"# {name}: {json.dumps(value, ensure_ascii=False)}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    sampled = _significant(result.sample_weights[:, layer, head])                # (S, T, T)
    drawn = _significant(result.prior_draws(layer, head))                        # (S, T, T)
    cells = [_significant(t) for t in (                                          # (T, T) each
        result.posterior_mean_weights[layer, head], result.posterior_mean_se[layer, head],
        result.softmax_weights[layer, head], result.prior_weights[layer, head],
        result.prior_mean_weights(layer, head))]
    p = _significant(result.sample_probs[:, result.target])                      # (S,)
    T = len(result.tokens)
    for s in range(len(sampled)):
        for q in range(T):
            for k in range(T):
                w.writerow([s, p[s], q, k, safe_cell(result.tokens[q]), safe_cell(result.tokens[k]), sampled[s][q][k],
                            drawn[s][q][k], *(c[q][k] for c in cells)])
    return buf.getvalue()

def file_name(result: ExplainResult, layer: int, head: int, suffix: str) -> str:
    """A file name that says the settings, e.g. "bam-wc_shape_k3_beta1_S32_seed0_L5H0.json"."""
    hyper = "".join(f"_{name}{value:g}" for name, value in result.hyper.items())
    stem = f"{result.model_name}{hyper}_S{result.n_samples}_seed{result.seed}_L{layer}H{head}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem) + "." + suffix.lstrip(".")


def _significant(t: torch.Tensor, digits: int = 6) -> list:
    """`t` as nested lists of floats rounded to `digits` significant digits (short in JSON and CSV),
    None where not finite (JSON has no NaN)."""
    a = t.detach().cpu().double().numpy()
    flat = [float(f"{x:.{digits}g}") if math.isfinite(x) else None for x in a.ravel().tolist()]
    return np.array(flat, dtype=object).reshape(a.shape).tolist()


def _finite(values):
    """Nested lists with every non-finite float made None."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    return values if math.isfinite(values) else None


def package_version() -> str:
    """bam_viz's version: the installed distribution's, else the checkout's pyproject.toml."""
    from importlib import metadata

    try:
        return metadata.version("bam-viz")
    except metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
