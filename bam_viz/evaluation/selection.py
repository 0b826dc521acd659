"""An inference hyperparameter chosen on dev, recorded in the model's card: the trained weights
sampled at each value of a grid, scored on movies dev (no test sentence predicted), the value of
lowest mean NLL of E[f(z)] chosen. The explorer names it beside its slider; it is never a default
(an omitted hyperparameter still means the trained value).

    python -m bam_viz.evaluation.selection --model bam-wc --name shape_k --grid 3,1.5,1,0.7,0.5,0.35

(`make inference-k` runs that for bam-wc and writes the card.)
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from bam_viz.evaluation.evaluate import evaluate
from bam_viz.evaluation.predictors import ModelPredictor

CRITERION = "mean NLL of E[f(z)] on movies dev (S={S}, seed {seed}), lower is better"
REPORTED = ("nll", "ece", "auroc_ambiguous_in_split_entropy", "auroc_ambiguous_in_split_mi")


def select(model, name: str, grid: list[float], n_samples: int = 32, seed: int = 0, data=None,
           command: str | None = None) -> dict:
    """The card's `inference_selection` for `name` over `grid`; `command` is what reproduces it
    (default: this module's command line for the model's name)."""
    per = {}
    for value in grid:
        result = evaluate(ModelPredictor(model, **{name: value}), "movies", "dev", n_samples, seed, data,
                          references=False)
        per[f"{value:g}"] = {k: round(result["mc"][k], 4) for k in REPORTED}
    chosen = min(grid, key=lambda v: per[f"{v:g}"]["nll"])
    return {
        "name": name,
        "hyperparameter": f"{name} at inference: the trained weights ({name} = {model.trained_hyper[name]:g} in "
                          f"training) sampled at another value",
        "grid": [float(v) for v in grid],
        "criterion": CRITERION.format(S=n_samples, seed=seed),
        **{f"dev_{k}": {v: r[k] for v, r in per.items()} for k in REPORTED},
        "chosen": float(chosen),
        "command": command or f"python -m bam_viz.evaluation.selection --model {model.name} --name {name} "
                              f"--grid {','.join(f'{v:g}' for v in grid)}",
        "note": "chosen on dev; not a default: an omitted value still means the trained one, and the explorer "
                "names this value beside the slider.",
    }


def main(argv: list[str] | None = None) -> int:
    from bam_viz import zoo

    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m bam_viz.evaluation.selection")
    p.add_argument("--model", required=True, help="a zoo model, a $BAM_VIZ_MODELS name or a model folder; "
                                                  "its card gets the selection")
    p.add_argument("--name", required=True)
    p.add_argument("--grid", required=True, help="comma-separated values")
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=None)
    args = p.parse_args(argv)
    model = zoo.load_model(args.model)
    start = time.perf_counter()
    selection = select(model, args.name, [float(v) for v in args.grid.split(",")], args.samples, args.seed,
                       args.data, command=shlex.join(["python", "-m", "bam_viz.evaluation.selection", *argv]))
    selection["seconds"] = round(time.perf_counter() - start, 1)
    folder = zoo.resolve_model(args.model)
    card = json.loads((folder / "card.json").read_text())
    card["inference_selection"] = selection
    (folder / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    zoo.write_folder_manifest(folder)
    print(json.dumps(selection, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
