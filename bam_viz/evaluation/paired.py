"""Two models compared on the same sentences, from their `evaluate --json` files: each metric of
each, and their difference with a 95% paired bootstrap interval (`metrics.paired_bootstrap`).

    python -m bam_viz.evaluation.paired A.json B.json [--table test.csv] [--n-boot 2000] [--json out.json]
    python -m bam_viz.evaluation.paired --scores OLD.parquet NEW.parquet [--model M] [--corpus C] [--json out.json]

Corpus results (`evaluate --corpus`, two classes): accuracy, NLL, Brier, ECE and the AUROC of the
predictive entropy at telling errors from right answers, on the clear sentences, and the AUROC of
the entropy at telling the split's ambiguous sentences from its clear ones, on all of them. File
results (`evaluate --input`, any classes): the same on the file's labelled rows; the ambiguous
AUROC needs `--table`, the file itself with each row's raters' mean (`python -m bam_viz table`), and
counts a sentence as ambiguous when its mean lies near a three-way band edge (`data.near_boundary`).
Both files must hold the same sentences with the same labels. With `--scores`, two score tables
(`python -m bam_viz score`, e.g. the shipped `scores/test.parquet` before and after a retraining) are
compared the same way, each model on each corpus: E[f(z)] of every sentence, its label and entropy.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bam_viz.core import metrics
from bam_viz.core.task import CLASSES
from bam_viz.data import AMBIGUOUS, near_boundary

LABELLED = {"accuracy": metrics.accuracy, "nll": metrics.nll, "brier": metrics.brier, "ece": metrics.ece}


def _auroc_error(inputs: np.ndarray, labels: np.ndarray) -> float:
    probs, entropy = inputs[:, :-1], inputs[:, -1]
    return metrics.auroc(entropy, probs.argmax(1) != labels)


def _auroc_flag(entropy: np.ndarray, flags: np.ndarray) -> float:
    return metrics.auroc(entropy, flags.astype(bool))


def rows(result: dict, table: Path | None = None) -> dict:
    """Per-sentence keys, class probabilities (N, K), class labels (-1: unlabelled), entropies and
    ambiguity flags (or None) of one evaluate result."""
    per = result["per_sentence"]
    if "mc_p_positive" in per:                                  # a corpus result, two classes
        p = np.asarray(per["mc_p_positive"], dtype=np.float64)
        labels = np.array([CLASSES.index(y) if y != AMBIGUOUS else -1 for y in per["labels"]])
        return {"keys": list(per["ids"]), "probs": np.stack([1 - p, p], 1), "labels": labels,
                "entropy": np.asarray(per["mc_entropy"]), "ambiguous": labels == -1}
    classes = result["classes"]
    flags = None
    if table is not None:
        import pandas as pd

        means = pd.read_csv(table)["mean"].to_numpy() if table.suffix == ".csv" else pd.read_parquet(table)["mean"]
        flags = np.array([near_boundary(float(means[r - 1])) for r in per["rows"]])
    return {"keys": list(per["rows"]), "probs": np.asarray(per["mc_probs"], dtype=np.float64),
            "labels": np.array([classes.index(y) for y in per["labels"]]), "entropy": np.asarray(per["mc_entropy"]),
            "ambiguous": flags}


def score_rows(frame, model: str, corpus: str) -> dict:
    """`rows` of one model on one corpus of a binary score table, in id order."""
    part = frame[(frame["model"] == model) & (frame["corpus"] == corpus)].sort_values("id")
    if part.empty:
        raise ValueError(f"no rows of {model} on {corpus}")
    p = part["p_positive"].to_numpy(np.float64)
    labels = np.array([CLASSES.index(y) if y in CLASSES else -1 for y in part["label"]])
    return {"keys": list(part["id"]), "probs": np.stack([1 - p, p], 1), "labels": labels,
            "entropy": part["predictive_entropy"].to_numpy(np.float64), "ambiguous": labels == -1}


def compare_scores(old, new, models, corpora, n_boot: int = 2000) -> dict:
    """{model: {corpus: `paired` table}} of two score tables (old = a, new = b)."""
    return {m: {c: paired(score_rows(old, m, c), score_rows(new, m, c), n_boot) for c in corpora} for m in models}


def paired(a: dict, b: dict, n_boot: int = 2000, seed: int = 0) -> dict:
    """{metric: {a, b, difference, low, high}} for the rows of two results (`rows`)."""
    if a["keys"] != b["keys"] or not np.array_equal(a["labels"], b["labels"]):
        raise ValueError("the two results do not hold the same sentences with the same labels")
    out = {}
    clear = a["labels"] >= 0
    y = a["labels"][clear]
    for name, fn in LABELLED.items():
        out[name] = (fn, a["probs"][clear], b["probs"][clear], y)
    out["auroc_error_entropy"] = (_auroc_error, np.column_stack([a["probs"], a["entropy"]])[clear],
                                  np.column_stack([b["probs"], b["entropy"]])[clear], y)
    if a["ambiguous"] is not None and a["ambiguous"].any() and not a["ambiguous"].all():
        out["auroc_ambiguous_entropy"] = (_auroc_flag, a["entropy"], b["entropy"], a["ambiguous"])
    result = {}
    for name, (fn, ia, ib, labels) in out.items():
        diff, low, high = metrics.paired_bootstrap(fn, ia, ib, labels, n_boot=n_boot, seed=seed)
        result[name] = {"a": float(fn(ia, labels)), "b": float(fn(ib, labels)), "difference": diff,
                        "low": low, "high": high, "n": int(len(labels))}
    return result


def markdown(name_a: str, name_b: str, table: dict) -> str:
    lines = [f"| metric | {name_a} | {name_b} | difference (95% paired bootstrap) |", "|---|---|---|---|"]
    for metric, r in table.items():
        lines.append(f"| {metric} | {r['a']:.4f} | {r['b']:.4f} | {r['difference']:+.4f} "
                     f"[{r['low']:+.4f}, {r['high']:+.4f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bam_viz.evaluation.paired", description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--scores", action="store_true", help="a and b are score tables (.parquet)")
    p.add_argument("--model", action="append", default=None, help="--scores: a model (default: every one in both)")
    p.add_argument("--corpus", action="append", default=None, help="--scores: a corpus (default: every one)")
    p.add_argument("--table", type=Path, default=None, help="the evaluated file with a 'mean' column")
    p.add_argument("--n-boot", type=int, default=2000)
    p.add_argument("--json", default=None)
    p.add_argument("--names", nargs=2, default=None, help="column titles (default: the predictors' names)")
    args = p.parse_args(argv)
    if args.scores:
        return _main_scores(args)
    try:
        ra, rb = (json.loads(Path(f).read_text()) for f in (args.a, args.b))
        table = paired(rows(ra, args.table), rows(rb, args.table), args.n_boot)
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown(*(args.names or (ra["predictor"], rb["predictor"])), table))
    if args.json:
        Path(args.json).write_text(json.dumps({"a": args.a, "b": args.b, "n_boot": args.n_boot,
                                               "metrics": table}, indent=2) + "\n")
    return 0


def _main_scores(args) -> int:
    import pandas as pd

    try:
        old, new = pd.read_parquet(args.a), pd.read_parquet(args.b)
        models = args.model or [m for m in old["model"].unique() if m in set(new["model"])]
        corpora = args.corpus or sorted(set(old["corpus"]) & set(new["corpus"]))
        tables = compare_scores(old, new, models, corpora, args.n_boot)
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for m, per in tables.items():
        for c, table in per.items():
            print(f"\n{m} on {c}\n" + markdown(*(args.names or ("before", "after")), table))
    if args.json:
        Path(args.json).write_text(json.dumps({"a": args.a, "b": args.b, "n_boot": args.n_boot,
                                               "metrics": tables}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
