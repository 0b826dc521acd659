"""The Ray engine of corpus scoring: Ray Data with one `ScorerActor` per worker, each loading the
models once and scoring its blocks one sentence at a time with the local engine's `Scorer`, so that
its rows equal the local engine's exactly. A worker loads each model from the folder the driver's
copy came from (`model.origin`, a (name, root) pair: `zoo.load(name, root=root)`), so any model
folder works, whatever its classes. Ray is an optional dependency: this module imports it only when
the engine runs (`ray_module`), and says how to install it when it is missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bam_viz.evaluation.score.rows import (
    COMPRESSION,
    SCORING_THREADS,
    VADER,
    Scorer,
    check_models,
    check_options,
    columns_for,
    common_classes,
    finish,
    load_models,
    model_name,
    with_labels,
)
from bam_viz.evaluation.score.tables import ScoreInputError

RAY_BATCH = 16            # sentences an actor takes at a time: small, so that the workers finish together
ORDER = "_order"          # carried through Ray to restore model-major, input order on the driver


class ScorerActor:
    """A Ray Data actor: loads the models once (each of `models` "vader" or a (name, root) origin),
    then scores each batch one sentence at a time."""

    def __init__(self, models: list[str | tuple[str, str]], classes: tuple[str, ...], n_samples: int, seed: int):
        import torch

        from bam_viz import zoo

        # One actor per CPU, each on one torch thread like the local engine (`one_thread`).
        torch.set_num_threads(SCORING_THREADS)
        tokenizer, self.scorers, self.classes = None, {}, tuple(classes)
        for spec in models:
            model = VADER if spec == VADER else zoo.load(spec[0], root=Path(spec[1]))
            scorer = Scorer(model, n_samples, seed, tokenizer)
            self.scorers[scorer.name], tokenizer = scorer, scorer.tokenizer

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        records = batch.to_dict("records")
        frame = finish([self.scorers[r["model"]].row(r) for r in records], self.classes)
        frame[ORDER] = [r[ORDER] for r in records]
        return frame


def worker_models(models: list[Any]) -> list[str | tuple[str, str]]:
    """What each worker loads for `models` (loaded ones, or "vader"): "vader", or the (name, root) a
    model was loaded from (`model.origin`, set by `zoo.load`); a model built in code has none."""
    specs = []
    for m in models:
        origin = None if m == VADER else getattr(m, "origin", None)
        if m != VADER and origin is None:
            raise ScoreInputError(f"the Ray engine loads each model again on its workers, from its folder: "
                                  f"{model_name(m)!r} was not loaded from one (zoo.load); score it with the "
                                  "local engine")
        specs.append(VADER if m == VADER else (str(origin[0]), str(origin[1])))
    return specs


def ray_module():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ScoreInputError("the Ray engine needs Ray Data: pip install 'ray[data]'") from None
    return ray


def start_ray(address: str | None = None, num_workers: int = 1) -> bool:
    """Connect to the Ray cluster at `address` (else $RAY_ADDRESS), or start a local one with a CPU for
    each of `num_workers`; True when this call started or joined it (the caller shuts it down), False
    when Ray was already initialised."""
    import logging

    ray = ray_module()
    if ray.is_initialized():
        return False
    # Ray logs its execution plans and notices (a disabled progress bar, token authentication) on the
    # command's stderr, where its own progress bar says enough; errors still show.
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR,
               "configure_logging": True}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ScoreInputError(f"cannot join the Ray cluster at {address!r} ({str(err).splitlines()[0]}): "
                                  "start it with `ray start --head`, or leave out --address and $RAY_ADDRESS "
                                  "for a local one") from None
    else:
        # Workers import bam_viz from wherever this process does (an installed wheel or the checkout).
        root = str(Path(__file__).resolve().parents[3])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        ray.init(num_cpus=max(os.cpu_count() or 1, num_workers), runtime_env={"env_vars": {"PYTHONPATH": path}},
                 **options)
    return True


def _ray_dataset(inputs: pd.DataFrame, models: list[Any], classes: tuple[str, ...], n_samples: int, seed: int,
                 num_workers: int):
    """The scored rows as a lazy Ray dataset (`columns_for(classes)` plus ORDER), one block per
    RAY_BATCH sentences, of `inputs` whose labels are read already (`with_labels`)."""
    ray = ray_module()
    specs = worker_models(models)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False              # our own bar counts sentences
    work = pd.concat([inputs.assign(model=model_name(m)) for m in models], ignore_index=True)
    work[ORDER] = np.arange(len(work))
    blocks = [work.iloc[i : i + RAY_BATCH] for i in range(0, len(work), RAY_BATCH)]
    return ray.data.from_pandas(blocks).map_batches(
        ScorerActor, fn_constructor_kwargs={"models": specs, "classes": classes, "n_samples": n_samples,
                                            "seed": seed},
        batch_size=RAY_BATCH, batch_format="pandas", num_cpus=1,
        # More actors than blocks would only wait (and Ray warns): each loads every model for nothing.
        compute=ray.data.ActorPoolStrategy(size=max(1, min(num_workers, len(blocks)))))


def score_ray(inputs: pd.DataFrame, models: list[Any], n_samples: int, seed: int, progress: Callable | None,
              num_workers: int, address: str | None) -> pd.DataFrame:
    """`score_inputs` on Ray: `models` loaded (or "vader"), of one set of classes, `inputs`' labels
    read as those classes already."""
    ray = ray_module()
    classes = common_classes(models)
    worker_models(models)                  # a model without a folder is refused before Ray starts
    started = start_ray(address, num_workers)
    try:
        total, parts = len(inputs) * len(models), []
        for batch in _ray_dataset(inputs, models, classes, n_samples, seed, num_workers).iter_batches(
                batch_size=None, batch_format="pandas"):
            parts.append(batch)
            if progress is not None:
                progress(sum(len(p) for p in parts), total)
    finally:
        if started:
            ray.shutdown()
    frame = (pd.concat(parts, ignore_index=True).sort_values(ORDER) if parts
             else pd.DataFrame(columns=[*columns_for(classes)]))
    return finish(frame.drop(columns=[ORDER], errors="ignore"), classes)


def write_ray_parquet(inputs: pd.DataFrame, models: Any, folder: str | os.PathLike, *, n_samples: int = 32,
                      seed: int = 0, num_workers: int = 1, address: str | None = None) -> Path:
    """Score on Ray and let the workers write the rows as partitioned Parquet under `folder` (one file
    per block, zstd), for a cluster whose nodes share that path; read it back with
    `pandas.read_parquet(folder)`. Row order across files is not kept: sort by model, corpus and id."""
    models = check_models(models)
    n_samples, seed = check_options(n_samples, seed, "ray", num_workers)
    models = load_models(models)
    classes = common_classes(models)
    inputs = with_labels(inputs, classes, ", ".join(model_name(m) for m in models))
    ray = ray_module()
    worker_models(models)
    folder = Path(folder).resolve()          # the workers' own working folders differ from ours
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        # Ray would add its files beside the old ones, and reading the folder would mix two runs.
        raise ScoreInputError(f"--out {folder} already exists and is not an empty folder: remove it or name another")
    started = start_ray(address, num_workers)
    try:
        dataset = _ray_dataset(inputs, models, classes, n_samples, seed, num_workers).drop_columns([ORDER])
        dataset.write_parquet(str(folder), compression=COMPRESSION)
    finally:
        if started:
            ray.shutdown()
    return Path(folder)
