"""How often the explorer's gap intervals cover the gap's mean over seeds, on the shipped models.

    .venv/bin/python bench/intervals.py [--seeds 300] [--json out.json]

For each case (a model and a sentence) and S = 4, 8, 32: `explain(text, n_samples=S, seed=1000 S + i)`
for i < seeds, and the share of seeds whose interval, gap ± z SE, holds the mean of the seeds' gaps,
for Deng's gap (E[f(z)] − f(E[w]), jackknife SE) and the gap to f(softmax), with z = 2 and with the
page's t at S − 1 df (`metrics.interval_multiplier`). The seeds' mean at S is the S-sample gap's own
expectation, which falls short of Deng's gap (S → ∞) by about a 1/S share; so each row also has the
seeds' mean gap and the share of t intervals that hold Deng's gap, taken as the seeds' mean of the
jackknife's bias-corrected gap at the largest S (`metrics.jackknife_corrected_gap`), and how often the
gap is said to be distinguishable from zero. docs/estimates.md, "Intervals at the samples drawn",
quotes the table (300 seeds: about 6 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bam_viz  # noqa: E402
from bam_viz.core import metrics  # noqa: E402

CASES = (("bam-wc", "the script is a quiet delight from start to end"),
         ("bam-lc", "the script is a quiet delight from start to end"),
         ("bam-wc", "the ending drags the middle down and never recovers"),
         ("dirichlet", "not bad at all, though the middle drags"))
SAMPLES = (4, 8, 32)


def coverage(gaps: np.ndarray, ses: np.ndarray, z: float, centre: float | None = None) -> float:
    """The share of seeds whose gap ± z SE holds `centre`, the mean of every seed's gap unless given."""
    return float(np.mean(np.abs(gaps - (gaps.mean() if centre is None else centre)) <= z * ses))


def numbers(r) -> dict[str, float]:
    """What the table reads of one result: both gaps and their SEs, and Deng's gap for the result's
    target class with the jackknife's 1/S bias removed (`metrics.jackknife_corrected_gap`)."""
    t = r.target
    corrected = metrics.jackknife_corrected_gap(r.sample_probs[:, t].double().numpy(), float(r.mean_attention_probs[t]),
                                                r.mean_attention_loo_probs[:, t].double().numpy())
    return {"gap": r.gap, "gap_se": r.se.gap, "gap_softmax": r.gap_softmax, "gap_softmax_se": r.se.gap_softmax,
            "corrected": corrected}


def run(seeds: int) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    for name, text in CASES:
        model = bam_viz.load(name)
        table = {}
        for S in SAMPLES:
            each = [numbers(model.explain(text, n_samples=S, seed=1000 * S + i)) for i in range(seeds)]
            table[S] = {k: np.array([n[k] for n in each]) for k in each[0]}
        deng = float(table[max(SAMPLES)]["corrected"].mean())
        for S in SAMPLES:
            z, seen = metrics.interval_multiplier(S), table[S]
            row = {"model": name, "text": text, "n_samples": S, "deng_gap": deng}
            for kind in ("gap", "gap_softmax"):
                gaps, ses = seen[kind], seen[f"{kind}_se"]
                row |= {f"{kind}_2se": coverage(gaps, ses, 2.0), f"{kind}_t": coverage(gaps, ses, z)}
            gaps, ses = seen["gap"], seen["gap_se"]
            row |= {"gap_mean": float(gaps.mean()), "gap_t_deng": coverage(gaps, ses, z, deng),
                    "gap_spread_over_se": float(gaps.std(ddof=1) / ses.mean()),
                    "gap_said_2se": float(np.mean(np.abs(gaps) > 2 * ses)),
                    "gap_said_t": float(np.mean(np.abs(gaps) > z * ses))}
            rows.append(row)
            print(f"{name:10s} S={S:2d}  Deng's gap {100 * row['gap_2se']:5.1f}% -> {100 * row['gap_t']:5.1f}%   "
                  f"gap to softmax {100 * row['gap_softmax_2se']:5.1f}% -> {100 * row['gap_softmax_t']:5.1f}%   "
                  f"mean gap {row['gap_mean']:+.5f} (Deng's {deng:+.5f}, t holds it {100 * row['gap_t_deng']:5.1f}%)  "
                  f"said {100 * row['gap_said_2se']:5.1f}% / {100 * row['gap_said_t']:5.1f}%  "
                  f"spread/SE {row['gap_spread_over_se']:.2f}  ({text})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    args = parser.parse_args()
    rows = run(args.seeds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
