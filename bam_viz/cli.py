"""`python -m bam_viz {train, evaluate, report, bench, examples, score, table}`: each subcommand's options, dispatch.

Each subcommand's run function takes the parsed options: `train.train`, `run_evaluate` (here),
`report.run_report` and `bench.library.run_bench`; `examples` calls `examples.build` and `examples.write`;
`run_score` (here) reads a file or corpora into `evaluation.score.scorer.score_inputs` under a progress bar and writes
the scores (and their card).
`run_evaluate` lives here because what it adds to `evaluate.evaluate` is command-line business:
checking the corpora (problem lines stop the run unless --lenient), building a predictor from the
options (a model or VADER, inference hyperparameters, a temperature), printing summaries and writing
JSON files.
Modules that pull in torch are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from bam_viz.data import CORPORA, SPLITS, CorpusProblems, load_corpus
from bam_viz.evaluation.evaluate import IN_DOMAIN, corpus_files, evaluate, summary, temperature_from_dev
from bam_viz.evaluation.predictors import (
    MemoPredictor,
    ModelPredictor,
    Predictor,
    TemperedPredictor,
    VaderPredictor,
)

DESCRIPTION = "python -m bam_viz {train, evaluate, report, bench, examples, score, table}"
# Every --model but train's (a recipe): what `zoo.resolve_model` reads.
MODEL_HELP = "a zoo model, a model of $BAM_VIZ_MODELS, or a model folder's path"


def parse_assignments(items: list[str]) -> dict[str, float]:
    """["shape_k=3", "beta=0.5"] -> {"shape_k": 3.0, "beta": 0.5}, for the CLI's hyperparameter options."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            raise SystemExit(f"expected NAME=VALUE with a number, got {item!r}") from None
    return out


def add_train_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz train`."""
    from bam_viz import families
    from bam_viz.train import DEFAULTS
    from bam_viz.zoo import RECIPES, SHARED_WEIGHTS

    which = p.add_mutually_exclusive_group()
    which.add_argument("--preset", "--model", dest="preset", choices=[n for n in RECIPES if n not in SHARED_WEIGHTS],
                       help="a zoo recipe (its family, prior, layers and hyperparameters)")
    which.add_argument("--family", choices=list(families.names()),
                       help="an attention family, with that family's default hyperparameters")
    p.add_argument("--data", default=None,
                   help="a CSV, TSV, JSON Lines or Parquet file of labelled texts; or the corpus folder for "
                        "the zoo's movie-review data (default: $BAM_VIZ_DATA or ../shared/...)")
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--classes", default=None, help="the class names in order, comma-separated (default: sorted "
                                                  "names, or integer labels in numeric order)")
    p.add_argument("--dev-data", default=None, help="a dev file instead of the stratified split of --data")
    p.add_argument("--backbone", default=None, help="a BERT folder (config.json, model.safetensors, tokenizer.json "
                                                    "or vocab.txt); default: the packaged all-MiniLM-L6-v2")
    p.add_argument("--out", default=None, help="the model folder to write (default for a preset on the zoo's "
                                               "data: pretrained/<preset>)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists (at the end, in one rename)")
    p.add_argument("--limit", type=int, default=None, help="train on the first N sentences (smoke tests)")
    p.add_argument("--class-weights", choices=["none", "balanced"], default="none",
                   help="balanced: each class's NLL weighted n / (K n_c), so that a rare class counts "
                        "(calibration pays for it; early stopping still reads the unweighted dev NLL)")
    p.add_argument("--targets", choices=["hard", "soft"], default="hard",
                   help="the zoo's data only: hard labels, or the share of raters who said positive")
    p.add_argument("--attention", action="append", default=[], metavar="NAME=VALUE",
                   help="set a hyperparameter of the attention, e.g. shape_k=3 (repeatable)")
    p.add_argument("--epochs", type=int, default=None,
                   help="at most this many epochs (default: 2 for a preset on the zoo's data, 8 on a file)")
    for k, v in DEFAULTS.items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    return p


def add_evaluate_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz evaluate`."""
    p.add_argument("--model", required=True, help=f'"vader" for the rule-based baseline, else {MODEL_HELP}')
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", choices=[*sorted(CORPORA), "all"], default=IN_DOMAIN,
                        help='"all" runs the four corpora in one process, sharing the reference sentences')
    source.add_argument("--input", default=None, metavar="FILE",
                        help="instead: sentences labelled with the model's classes (.csv, .tsv, .txt, .jsonl, "
                             ".parquet), for a model of any classes; unlabelled rows are left out")
    p.add_argument("--text-column", default=None, help="with --input: default found by its name or contents")
    p.add_argument("--label-column", default=None, help="with --input: default a column named label, y, class, ...")
    p.add_argument("--split", choices=[*SPLITS, "all"], default="test")
    p.add_argument("--samples", type=int, default=32, help="attention samples per sentence (S)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--data", default=None, help="folder of the corpora (default: $BAM_VIZ_DATA or ../shared)")
    p.add_argument("--no-references", dest="references", action="store_false",
                   help="score only the chosen split (no ambiguous pool, no movie test reference): "
                        "for sweeps on dev that must never predict a test sentence")
    p.add_argument("--lenient", action="store_true",
                   help="evaluate even if a corpus file has problem lines (skipped rows, non-UTF-8 lines, "
                        "duplicate or unpaired ids): they are counted on stderr and in the JSON")
    p.add_argument("--root", default=None,
                   help="folder holding <model>/card.json (default: the shipped pretrained/)")
    p.add_argument("--hyper", action="append", default=[], metavar="NAME=VALUE",
                   help="inference-time attention override, e.g. shape_k=3 (repeatable)")
    p.add_argument("--temperature", default=None, metavar="T|dev",
                   help="temperature scaling of every sample's probabilities: a number, or 'dev' to "
                        "fit T by NLL on the movies dev split first (Guo et al. 2017)")
    p.add_argument("--json", default=None, metavar="OUT",
                   help="write the full results here ({corpus} in the name is replaced per corpus)")
    p.add_argument("--update-card", action="store_true",
                   help="store the headline metrics in pretrained/<model>/card.json")
    return p


def add_bench_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz bench`."""
    p.add_argument("--model", default="bam-wc", help=MODEL_HELP)
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--tokens", type=int, default=None,
                   help="sentence length in word pieces, [CLS]/[SEP] included (default 24; --training 32)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--scoring", action="store_true",
                   help="instead: corpus scoring throughput (sentences/s) of the local engine and of Ray "
                        "with 1 and 2 workers, and Ray's start-up time")
    p.add_argument("--training", action="store_true",
                   help="instead: training sentences/s at 32 tokens, and the wall time of train on a --rows-row CSV")
    p.add_argument("--rows", type=int, default=2000, help="--training: rows of the CSV trained on")
    p.add_argument("--theory", action="store_true",
                   help="instead: the Theory lab's server time per slider move, each panel (--repeats moves)")
    p.add_argument("--sentences", type=int, default=200, help="--scoring: movies test sentences scored per run")
    p.add_argument("--scoring-repeats", type=int, default=3, help="--scoring: runs of each engine (medians)")
    return p


def add_examples_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz examples`."""
    p.add_argument("--model", default="bam-wc", help=MODEL_HELP)
    p.add_argument("--out", default="views/examples.json", help="the examples file the explorer reads")
    p.add_argument("--samples", type=int, default=32, help="attention samples per sentence (S)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=None, help="folder of the corpora (default: $BAM_VIZ_DATA or ../shared)")
    return p


def _one_line_errors(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make `p` report a bad option as one line, "error: ...", and exit 2, like every other input
    error of the command (argparse's default also prints the usage)."""

    def error(message: str):
        p.exit(2, f"error: {message} (see python -m bam_viz score --help)\n")

    p.error = error
    return p


def add_score_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz score`."""
    p.add_argument("--model", action="append", required=True, metavar="NAME",
                   help=f'{MODEL_HELP}, or "vader" (repeatable), all of one set of classes; "all" for every '
                        'shipped model and vader')
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", metavar="FILE", help="sentences to score: .csv, .tsv, .txt, .jsonl, .parquet")
    source.add_argument("--corpus", metavar="NAME", help=f"a rated corpus ({', '.join(CORPORA)}) or all")
    p.add_argument("--split", choices=[*SPLITS, "all"], default=None, help="with --corpus: the split (default test)")
    p.add_argument("--samples", type=int, default=32, help="attention samples per sentence (S)")
    p.add_argument("--seed", type=int, default=0, help="each sentence's generator is seeded from it and its id")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="a .parquet or .csv file; with --engine ray also a folder (partitioned Parquet)")
    p.add_argument("--card", default=None, metavar="JSON", help="also write what the file is and how it was made")
    p.add_argument("--no-text", dest="text", action="store_false",
                   help="leave the text column empty (a file to ship: the corpora are never copied; "
                        "score.with_corpus_text puts their text back from the data folder)")
    p.add_argument("--text-column", default=None, help="default: found by its name or its contents")
    p.add_argument("--label-column", default=None,
                   help="default: a column named label, sentiment, y, ...; read as the models' class names "
                        "(the sentiment models also take pos/neg, 1/0 or a rating)")
    p.add_argument("--id-column", default=None, help="default: a column named id; else the text's sha256")
    p.add_argument("--engine", choices=["local", "ray"], default="local")
    p.add_argument("--num-workers", type=int, default=1, help="Ray actors, one CPU each")
    p.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS, else a local one)")
    p.add_argument("--data", default=None, help="folder of the corpora (default: $BAM_VIZ_DATA or ../shared)")
    return _one_line_errors(p)


def add_report_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz report`."""
    p.add_argument("--results", default="results", help="folder of evaluate --json outputs")
    p.add_argument("--baseline", default="softmax")
    p.add_argument("--n-boot", type=int, default=2000)
    p.add_argument("--seeds", nargs="+", default=None, metavar="JSON",
                   help="instead: the spread over training seeds, from movies-test evaluate --json files "
                        "of the same models trained with different seeds (grouped by model name)")
    return p


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m bam_viz`: global options, then one subcommand."""
    parser = argparse.ArgumentParser(prog="python -m bam_viz", description=DESCRIPTION)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_args(sub.add_parser("train", help="train a model on your labelled texts (or a zoo preset), "
                                                "write its folder"))
    add_evaluate_args(sub.add_parser("evaluate", help="accuracy, NLL, Brier, ECE, AUROCs, Spearman on a corpus split"))
    add_bench_args(sub.add_parser("bench", help="explain() latency, batching speed-ups, a live grid"))
    add_report_args(sub.add_parser("report", help="README tables from saved evaluate --json results"))
    add_examples_args(sub.add_parser("examples", help="choose the explorer's example sentences on movies dev"))
    add_score_args(sub.add_parser("score", help="score a file or corpora: one row per sentence and model"))
    add_table_args(sub.add_parser("table", help="write a corpus split as a labelled file that train --data reads"))
    return parser


def add_table_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of `python -m bam_viz table`."""
    from bam_viz.data import LABEL_SCHEMES

    p.add_argument("--corpus", choices=sorted(CORPORA), default=IN_DOMAIN)
    p.add_argument("--split", choices=[*SPLITS, "all"], required=True)
    p.add_argument("--labels", choices=list(LABEL_SCHEMES), default="three-way",
                   help="; ".join(f"{k}: {v}" for k, v in LABEL_SCHEMES.items()))
    p.add_argument("--data", default=None, help="folder of the corpora (default: $BAM_VIZ_DATA or ../shared)")
    p.add_argument("--out", required=True, help="a .csv, .tsv, .jsonl or .parquet file")
    return p


def _jsonable(value: Any) -> Any:
    # NaN (an undefined AUROC or correlation) is not JSON; null is.
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _predictor(args: argparse.Namespace) -> Predictor:
    if args.model == "vader":
        return VaderPredictor()
    from bam_viz import zoo  # lazily: loading a model pulls in torch and the weights

    hyper = parse_assignments(getattr(args, "hyper", []))
    root = getattr(args, "root", None)
    model = zoo.load_model(args.model, root=Path(root)) if root else zoo.load_model(args.model)
    return ModelPredictor(model, **hyper)


def check_corpora(corpora: list[str], data: str | Path | None, lenient: bool) -> None:
    """Read every corpus a run needs before any model loads. A problem line stops the run with the
    count and the first few; with `lenient`, the same line is a warning on stderr and the run goes on."""
    for corpus in dict.fromkeys(corpora):
        load = load_corpus(corpus, data, strict=False)
        if not load.problems:
            continue
        if not lenient:
            raise CorpusProblems(load, advice="use --lenient to evaluate anyway")
        print(f"warning: {CorpusProblems(load)}; evaluating anyway (--lenient)", file=sys.stderr)


def run_evaluate(args: argparse.Namespace) -> list[dict]:
    """Run `evaluate` from parsed CLI options, print the summaries, and optionally write JSON: on the
    rated corpora, or (--input) on a file labelled with the model's classes."""
    parse_assignments(getattr(args, "hyper", []))  # a malformed option fails before anything is read
    lenient, references = getattr(args, "lenient", False), getattr(args, "references", True)
    temperature, fitted_on = getattr(args, "temperature", None), None
    if getattr(args, "input", None):
        from bam_viz.evaluation.evaluate import evaluate_file

        if temperature == "dev" or getattr(args, "update_card", False):
            raise SystemExit("--temperature dev and --update-card are for the rated corpora, not --input")
        predictor = _predictor(args)
        if temperature is not None:
            try:
                predictor = TemperedPredictor(predictor, float(temperature))
            except ValueError as err:
                raise SystemExit(f"--temperature takes a positive number, got {temperature!r} ({err})") from None
        results = evaluate_file(predictor, args.input, text_column=args.text_column, label_column=args.label_column,
                                n_samples=args.samples, seed=args.seed, batch_size=getattr(args, "batch_size", 64))
        print(summary(results))
        if args.json:
            out = Path(args.json.replace("{corpus}", Path(args.input).stem))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(_jsonable(results), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        return [results]
    corpora = [IN_DOMAIN, *sorted(c for c in CORPORA if c != IN_DOMAIN)] if args.corpus == "all" else [args.corpus]
    if args.json and len(corpora) > 1 and "{corpus}" not in args.json:
        raise SystemExit("--corpus all needs {corpus} in the --json file name")
    check_corpora([*corpora, *([IN_DOMAIN] if references or temperature == "dev" else [])], args.data, lenient)
    predictor = _predictor(args)
    if temperature is not None:
        if temperature == "dev":
            temperature, n_dev = temperature_from_dev(predictor, args.samples, args.seed, args.data,
                                                      getattr(args, "batch_size", 64), lenient)
            fitted_on = f"movies dev, {n_dev} clear sentences, NLL of the mc predictive"
            print(f"temperature fitted on movies dev: T = {temperature:.4f}")
        else:
            try:
                temperature = float(temperature)
            except ValueError:
                raise SystemExit(f"--temperature takes a number or 'dev', got {temperature!r}") from None
        predictor = TemperedPredictor(predictor, temperature)
    predictor = MemoPredictor(predictor)
    all_results = []
    for corpus in corpora:
        results = evaluate(
            predictor,
            corpus=corpus,
            split=args.split,
            n_samples=args.samples,
            seed=args.seed,
            data=args.data,
            batch_size=getattr(args, "batch_size", 64),
            references=references,
            lenient=lenient,
        )
        if temperature is not None:
            results["temperature"] = {"T": temperature, "fitted_on": fitted_on}
            if fitted_on and not any(f["corpus"] == IN_DOMAIN for f in results["corpus_files"]):
                # T was fitted on movies dev: those files shaped the scores too.
                results["corpus_files"] += corpus_files([load_corpus(IN_DOMAIN, args.data, strict=not lenient)],
                                                        lenient)
        print(summary(results))
        if args.json:
            out = Path(args.json.replace("{corpus}", corpus))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(_jsonable(results), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        all_results.append(results)
    return all_results


def run_score(args: argparse.Namespace) -> Path:
    """Run `score` from parsed CLI options: read, score under a progress bar on stderr, write."""
    import shlex

    from tqdm import tqdm

    from bam_viz.evaluation.score import scorer as score
    from bam_viz.evaluation.score.ray_engine import write_ray_parquet
    from bam_viz.zoo import RECIPES, available_models

    shipped = [m for m in available_models() if m in RECIPES]
    models = [m for name in args.model for m in ([*shipped, score.VADER] if name == "all" else [name])]
    # Every option is checked before the input is read and the progress bar starts.
    score.check_models(models)
    score.check_options(args.samples, args.seed, args.engine, args.num_workers)
    out = Path(args.out)
    partitioned = not out.suffix                     # a folder: one Parquet file per block, written by the workers
    if out.suffix and out.suffix.lower() not in score.OUTPUT_SUFFIXES or partitioned and args.engine != "ray":
        raise score.ScoreInputError(f"--out {out}: write a .parquet or .csv file (a folder of partitioned "
                                    "Parquet needs --engine ray)")
    if partitioned and args.card:
        raise score.ScoreInputError("--card describes one file: write a .parquet or .csv file for it")
    if args.input:
        if args.split is not None:
            raise score.ScoreInputError("--split is for --corpus; an --input file is scored whole")
        frame = score.read_table(args.input)
        text, label, id_ = score.find_columns(frame, args.text_column, args.label_column, args.id_column)
        inputs = score.frame_inputs(frame, text, label, id_)
    else:
        if args.text_column or args.label_column or args.id_column:
            raise score.ScoreInputError("--text-column, --label-column and --id-column are for --input files")
        args.split = args.split or "test"
        inputs = score.corpus_inputs("all" if args.corpus == "all" else [args.corpus], args.split, args.data)
    # The models are loaded and the labels read as their classes before the progress bar starts, so that
    # mixed classes or an unknown label is one line.
    models = score.load_models(models)
    inputs = score.with_labels(inputs, score.common_classes(models), ", ".join(score.model_name(m) for m in models))
    if partitioned:
        folder = write_ray_parquet(inputs, models, out, n_samples=args.samples, seed=args.seed,
                                   num_workers=args.num_workers, address=args.address)
        print(f"wrote {folder}/ (partitioned Parquet: {len(inputs) * len(models):,} rows)")
        return folder
    tty = sys.stderr.isatty()
    with tqdm(total=len(inputs) * len(models), desc="scoring", unit="sent", file=sys.stderr,
              mininterval=0.5 if tty else 30, dynamic_ncols=tty) as bar:
        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        frame = score.score_inputs(inputs, models, n_samples=args.samples, seed=args.seed, progress=progress,
                                   engine=args.engine, num_workers=args.num_workers, address=args.address)
    if not getattr(args, "text", True):
        frame = score.without_text(frame)
    written = score.write_scores(frame, out)
    print(f"wrote {written} ({len(frame):,} rows, {written.stat().st_size / 2**20:.2f} MB)")
    if args.card:
        command = "python -m bam_viz " + shlex.join(args.argv)
        doc = score.card(frame, written, command, split=None if args.input else args.split, n_samples=args.samples,
                         seed=args.seed, data=args.data, engine=args.engine, num_workers=args.num_workers)
        Path(args.card).parent.mkdir(parents=True, exist_ok=True)
        Path(args.card).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.card}")
    return written


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; a missing or broken corpus file, model, folder or option value (the library's
    checks raise ValueError) is one line on stderr and exit status 2, never a traceback."""
    from bam_viz.data import CorpusError
    from bam_viz.dataset import DataError
    from bam_viz.evaluation.score.scorer import ScoreInputError
    from bam_viz.nn.backbone import BackboneError
    from bam_viz.train import TrainingError
    from bam_viz.zoo import CheckpointError

    try:
        return _run(argv)
    except (CorpusError, CheckpointError, FileNotFoundError, ScoreInputError, DataError, BackboneError,
            TrainingError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; nothing was written", file=sys.stderr)
        return 2


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the command a card records
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    if args.command == "train":
        from bam_viz.train import train

        args.attention = parse_assignments(args.attention)
        args.data_is_user = args.data is not None and not Path(args.data).is_dir()
        if args.data is not None and not Path(args.data).exists():
            raise FileNotFoundError(f"--data {args.data}: no such file or folder")
        print(train(args))
    elif args.command == "evaluate":
        # A card describes the trained configuration; metrics of any other setting must not land there.
        if args.update_card and (args.hyper or args.temperature is not None or args.root):
            parser.error("--update-card stores the trained configuration's metrics: "
                         "not with --hyper, --temperature or --root")
        results = run_evaluate(args)
        if args.update_card:
            from bam_viz.zoo import update_card_metrics

            for result in results:
                update_card_metrics(args.model, result)
    elif args.command == "report":
        from bam_viz.evaluation.report import run_report

        print(run_report(args))
    elif args.command == "bench":
        if args.training:
            from bam_viz.bench.training import run_training_bench

            args.tokens = args.tokens or 32
            result = run_training_bench(args)
            if args.json:
                Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        else:
            from bam_viz.bench.library import run_bench

            result = run_bench(args)
        print(json.dumps(result, indent=2))
    elif args.command == "score":
        run_score(args)
    elif args.command == "table":
        from bam_viz.data import labelled_table, write_table

        frame = labelled_table(args.corpus, args.split, args.labels, args.data)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(frame["label"].value_counts().items()))
        print(f"wrote {write_table(frame, Path(args.out))} ({len(frame):,} rows: {counts})")
    elif args.command == "examples":
        from bam_viz import zoo
        from bam_viz.evaluation import examples

        doc = examples.build(zoo.load_model(args.model), args.data, args.samples, args.seed)
        print(f"wrote {examples.write(doc, args.out)}")
        for e in doc["examples"]:
            print(f"{e['category']:8s} MI {e['mutual_information']:.4f}  gap to softmax {e['gap_softmax']:+.4f}  "
                  f"P(positive) {e['p_positive']:.3f}  {e['text']}")
    return 0
