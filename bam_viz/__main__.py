"""python -m bam_viz {train, evaluate, report, bench}"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m bam_viz", description=__doc__)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    sub = parser.add_subparsers(dest="command", required=True)

    from bam_viz.train import add_train_args
    add_train_args(sub.add_parser("train", help="fine-tune a zoo model and write pretrained/<name>/"))

    from bam_viz.evaluate import add_evaluate_args
    ev = sub.add_parser("evaluate", help="accuracy, NLL, Brier, ECE, AUROCs, Spearman on a corpus split")
    add_evaluate_args(ev)
    ev.add_argument("--update-card", action="store_true",
                    help="store the headline metrics in pretrained/<model>/card.json")

    from bam_viz.bench import add_bench_args
    add_bench_args(sub.add_parser("bench", help="explain() latency and batched-sampling speed-ups"))

    from bam_viz.report import add_report_args
    add_report_args(sub.add_parser("report", help="README tables from saved evaluate --json results"))

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the command a card records
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.command == "train":
        from bam_viz.train import train
        print(train(args))
    elif args.command == "evaluate":
        from bam_viz.evaluate import run_evaluate
        if args.update_card and (args.hyper or args.temperature is not None or args.root):
            parser.error("--update-card stores the trained configuration's metrics: "
                         "not with --hyper, --temperature or --root")
        results = run_evaluate(args)
        if args.update_card:
            from bam_viz.zoo import update_card_metrics
            for result in results:
                update_card_metrics(args.model, result)
    elif args.command == "report":
        from bam_viz.report import run_report
        print(run_report(args))
    elif args.command == "bench":
        from bam_viz.bench import run_bench
        print(json.dumps(run_bench(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
