"""Exports of an `ExplainResult`: the whole result, and the view of one layer and head that the
explorer's downloads hold, with a header of every setting and a file name that says them."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import torch

from bam_viz.result import ExplainResult


def full_json(result: ExplainResult) -> dict:
    """Everything needed to redraw the page, as plain lists (for the download button)."""
    def lst(t: torch.Tensor):
        return t.detach().cpu().double().tolist()

    return {
        "text": result.text, "tokens": result.tokens, "classes": result.classes,
        "model": result.model_name, "family": result.family,
        "stochastic_layers": result.stochastic_layers, "hyper": result.hyper,
        "n_samples": result.n_samples, "seed": result.seed, "truncated": result.truncated,
        "mc_probs": lst(result.mc_probs), "mean_field_probs": lst(result.mean_field_probs),
        "gap": result.gap, "predictive_entropy": result.predictive_entropy,
        "expected_entropy": result.expected_entropy, "mutual_information": result.mutual_information,
        "sample_probs": lst(result.sample_probs), "kl": lst(result.kl),
        "mean_weights": lst(result.mean_weights), "prior_weights": lst(result.prior_weights),
        "sample_weights": lst(result.sample_weights),
        "prior_sample_weights": lst(result.prior_sample_weights),
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
                        w.writerow([s, layer, h, q, k, result.tokens[q], result.tokens[k], f"{flat[i]:.6g}"])
                        i += 1
    return buf.getvalue()

# ---- the explorer's downloads: what the page shows, for one layer and head ----------------------
def view_header(result: ExplainResult, layer: int, head: int) -> dict:
    """What a download of (layer, head) was made from: the text, model and every setting."""
    return {
        "text": result.text, "tokens": result.tokens, "classes": result.classes, "model": result.model_name,
        "family": result.family, "hyper": dict(result.hyper), "n_samples": result.n_samples, "seed": result.seed,
        "truncated": result.truncated, "stochastic_layers": result.stochastic_layers,
        "layer": layer, "head": head, "bam_viz_version": package_version(),
    }

def view_headline(result: ExplainResult) -> dict:
    """The page's headline numbers, with the Monte Carlo standard errors it shows (None where one
    is not estimable: fewer samples than its estimator needs)."""
    i = result.positive_index
    se = result.se
    return {
        "p_positive": float(result.mc_probs[i]), "p_positive_mean_field": float(result.mean_field_probs[i]),
        "gap": result.gap, "mutual_information": result.mutual_information,
        "predictive_entropy": result.predictive_entropy, "expected_entropy": result.expected_entropy,
        "se_p_positive": se.p_positive, "se_gap": se.gap, "se_mutual_information": se.mutual_information,
        "gap_distinguishable": result.gap_distinguishable,
    }


def view_json(result: ExplainResult, layer: int, head: int) -> dict:
    """The page's view of (layer, head) as plain lists, weights to 6 significant digits:
    every sampled weight (S, T, T), the prior's draws (S, T, T), the posterior-mean and prior-mean
    weights (T, T), the prediction samples (S, C) and the headline numbers. `full_json` has all heads."""
    return {
        "header": view_header(result, layer, head),
        "headline": view_headline(result),
        "sample_probs": _significant(result.sample_probs),
        "kl": float(result.kl[layer, head]),
        "sample_weights": _significant(result.sample_weights[:, layer, head]),
        "prior_sample_weights": _significant(result.prior_draws(layer, head)),
        "mean_weights": _significant(result.mean_weights[layer, head]),
        "prior_weights": _significant(result.prior_weights[layer, head]),
    }

def view_csv(result: ExplainResult, layer: int, head: int) -> str:
    """The same view in long form: "# name: JSON value" lines for the header and headline, then
    one row per (sample, query, key) with the sample's P(positive) and that cell's weights."""
    buf = io.StringIO()
    for name, value in {**view_header(result, layer, head), **view_headline(result)}.items():
        buf.write(f"# {name}: {json.dumps(value, ensure_ascii=False)}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["sample", "sample_p_positive", "query", "key", "query_token", "key_token", "weight",
                "prior_draw", "mean_weight", "prior_weight"])
    sampled = _significant(result.sample_weights[:, layer, head])                # (S, T, T)
    drawn = _significant(result.prior_draws(layer, head))                        # (S, T, T)
    mean = _significant(result.mean_weights[layer, head])                        # (T, T)
    prior = _significant(result.prior_weights[layer, head])                      # (T, T)
    p = _significant(result.sample_probs[:, result.positive_index])                # (S,)
    T = len(result.tokens)
    for s in range(len(sampled)):
        for q in range(T):
            for k in range(T):
                w.writerow([s, p[s], q, k, result.tokens[q], result.tokens[k], sampled[s][q][k],
                            drawn[s][q][k], mean[q][k], prior[q][k]])
    return buf.getvalue()

def file_name(result: ExplainResult, layer: int, head: int, suffix: str) -> str:
    """A file name that says the settings, e.g. "bam-wc_shape_k3_beta1_S32_seed0_L5H0.json"."""
    hyper = "".join(f"_{name}{value:g}" for name, value in result.hyper.items())
    stem = f"{result.model_name}{hyper}_S{result.n_samples}_seed{result.seed}_L{layer}H{head}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem) + "." + suffix.lstrip(".")


def _significant(t: torch.Tensor, digits: int = 6) -> list:
    """`t` as nested lists of floats rounded to `digits` significant digits (short in JSON and CSV)."""
    a = t.detach().cpu().double().numpy()
    return np.array([float(f"{x:.{digits}g}") for x in a.ravel().tolist()]).reshape(a.shape).tolist()


def package_version() -> str:
    """bam_viz's version: the installed distribution's, else the checkout's pyproject.toml."""
    from importlib import metadata

    try:
        return metadata.version("bam-viz")
    except metadata.PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
