"""How often the explorer's gap intervals cover the gap's mean over seeds, on the shipped models.

    .venv/bin/python bench/intervals.py [--seeds 300] [--json out.json]

For each case (a model and a sentence) and S = 4, 8, 32: `explain(text, n_samples=S, seed=1000 S + i)`
for i < seeds, and the share of seeds whose interval, gap ± z SE, holds the mean of the seeds' gaps,
for Deng's gap (E[f(z)] − f(E[w]), delta-method SE) and the gap to f(softmax), with z = 2 and with the
page's t at S − 1 df (`metrics.interval_multiplier`). docs/estimates.md, "Intervals at the samples drawn",
quotes the table (300 seeds: about 40 minutes on 2 cores).
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
from bam_viz.core.metrics import interval_multiplier  # noqa: E402

CASES = (("bam-wc", "the script is a quiet delight from start to end"),
         ("bam-lc", "the script is a quiet delight from start to end"),
         ("bam-wc", "the ending drags the middle down and never recovers"),
         ("dirichlet", "not bad at all, though the middle drags"))
SAMPLES = (4, 8, 32)


def coverage(gaps: np.ndarray, ses: np.ndarray, z: float) -> float:
    """The share of seeds whose gap ± z SE holds the mean of every seed's gap."""
    return float(np.mean(np.abs(gaps - gaps.mean()) <= z * ses))


def run(seeds: int) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    for name, text in CASES:
        model = bam_viz.load(name)
        for S in SAMPLES:
            results = [model.explain(text, n_samples=S, seed=1000 * S + i) for i in range(seeds)]
            row = {"model": name, "text": text, "n_samples": S}
            for kind in ("gap", "gap_softmax"):
                gaps = np.array([getattr(r, kind) for r in results])
                ses = np.array([getattr(r.se, kind) for r in results])
                row |= {f"{kind}_2se": coverage(gaps, ses, 2.0),
                        f"{kind}_t": coverage(gaps, ses, interval_multiplier(S))}
            rows.append(row)
            print(f"{name:10s} S={S:2d}  Deng's gap {100 * row['gap_2se']:5.1f}% -> {100 * row['gap_t']:5.1f}%   "
                  f"gap to softmax {100 * row['gap_softmax_2se']:5.1f}% -> {100 * row['gap_softmax_t']:5.1f}%  "
                  f"({text})", flush=True)
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
