"""`python -m bam_viz bench --training`: how fast `python -m bam_viz train` learns on this machine.

Two figures, in one run:
- `sentences_per_second`: training steps (forward, ELBO, backward, AdamW) of batches of
  `batch_size` sentences of exactly `tokens` word pieces, the default recipe (BAM-WC), the median
  over `steps` timed steps after two warm-up steps;
- `csv_to_model_s`: the wall time of the whole command, in a fresh process, on a `rows`-row CSV (reading, the split,
  the model's construction, every epoch with its dev evaluation, early stopping, writing the folder),
  with the epochs it ran. The rows are movie-review sentences labelled three ways when the corpora
  are there (`bam_viz.data.labelled_table`), otherwise sentences drawn from a word list.
The target is at most 5 minutes for 2,000 rows (issue #26). A benchmark, not a test.
"""

from __future__ import annotations

import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

FILLER = "the film is good but the story is slow and the ending is dull yet the music is fine".split()


def _rows_csv(path: Path, rows: int, seed: int) -> str:
    import pandas as pd

    from bam_viz.data import data_dir, labelled_table

    if data_dir() is not None:
        frame = labelled_table("movies", "all", "three-way")[["text", "label"]]
        frame = frame.sample(n=min(rows, len(frame)), random_state=seed)
        source = "movies, three-way labels (bam_viz.data.labelled_table), a seeded sample"
    else:
        g = torch.Generator().manual_seed(seed)
        words = torch.randint(len(FILLER), (rows, 12), generator=g)
        frame = pd.DataFrame({"text": [" ".join(FILLER[i] for i in r) for r in words.tolist()],
                              "label": [("negative", "neutral", "positive")[i % 3] for i in range(rows)]})
        source = "sentences drawn from a word list (no corpora here)"
    frame.to_csv(path, index=False)
    return source


def steps_per_second(tokens: int, batch_size: int, steps: int, seed: int = 0) -> dict:
    """Median training-step time of the default recipe at exactly `tokens` word pieces a sentence."""
    from bam_viz.bench.library import sentence_of_length
    from bam_viz.model import BamClassifier
    from bam_viz.train import DEFAULT_PRESET, loss_terms
    from bam_viz.zoo import RECIPES

    torch.manual_seed(seed)
    model = BamClassifier(RECIPES[DEFAULT_PRESET]).train()
    text = sentence_of_length(model, tokens)
    ids, mask = model.tokenizer.batch([text] * batch_size)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        nll, kl = loss_terms(model, ids, mask, torch.zeros(batch_size, dtype=torch.long), g)
        opt.zero_grad(set_to_none=True)
        (nll + 0.01 * kl).backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    return {"tokens": int(ids.shape[1]), "batch_size": batch_size, "timed_steps": steps,
            "step_ms_median": round(1000 * step, 1), "sentences_per_second": round(batch_size / step, 1)}


def run_training_bench(args) -> dict:
    import json
    import subprocess
    import sys

    from bam_viz.train import DEFAULT_PRESET

    figures = steps_per_second(args.tokens, 32, max(3, args.repeats // 3))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "rows.csv"
        source = _rows_csv(data, args.rows, 0)
        out = Path(tmp) / "model"
        # The command itself, in a fresh process: its imports and start-up are part of the wait.
        command = [sys.executable, "-m", "bam_viz", "train", "--data", str(data), "--out", str(out)]
        t0 = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"train exited with status {done.returncode}: {done.stderr.strip()[-500:]}")
        card = json.loads((out / "card.json").read_text())
    return {
        **figures, "preset": DEFAULT_PRESET, "rows": args.rows, "rows_source": source,
        "csv_to_model_s": round(wall, 1), "target_s": 300, "epochs_run": card["training"]["epochs_run"],
        "best_epoch": card["training"]["best_epoch"], "training_s": card["training"]["seconds"],
        "dev": card["dev_metrics"], "torch_threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
    }
