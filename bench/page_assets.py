"""What a page's scripts cost the server: N page loads at once, Streamlit's way and `views.serving`'s.

    .venv/bin/python bench/page_assets.py [--pages 15] [--rounds 5] [--json out.json]

On a fresh server (loopback only, nothing else running), `--pages` clients at once each fetch the page
and every script and style it names, on six connections of their own as a browser does, `--rounds`
times each way, alternating:
  identity   without `Accept-Encoding: gzip`: Streamlit's own static files (64 KiB pieces, each read
             in a worker thread);
  gzip       with it: `views.serving.PrecompressedStatic` (each file compressed once, sent from memory).
Reported per way: the median and worst round's time until the last page had all its files, the bytes
per page, and the server's CPU seconds per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_latency import ROOT, serve  # noqa: E402
from load import cpu_seconds  # noqa: E402
from protocol_client import ASSETS, CONNECTIONS  # noqa: E402  (what a page names, fetched as a browser does)


def get(url: str, gzip: bool) -> int:
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as r:
        return len(r.read())


def page(base: str, gzip: bool) -> int:
    with urllib.request.urlopen(base + "/", timeout=120) as r:
        html = r.read().decode("utf-8", "replace")
    assets = sorted(set(ASSETS.findall(html)))
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        return sum(pool.map(lambda a: get(base + "/" + a.lstrip("./"), gzip), assets))


def one_round(base: str, pages: int, gzip: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(pages) as pool:
        sizes = list(pool.map(lambda _: page(base, gzip), range(pages)))
    return time.perf_counter() - t0, sizes[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    proc: list = []
    out: dict = {"pages": args.pages, "rounds": args.rounds}
    with serve(ROOT / "app.py", process=proc) as base:
        pid = proc[0].pid
        page(base, True)                       # the first request compresses each file once
        runs: dict[str, list] = {"identity": [], "gzip": []}
        cpu: dict[str, float] = {"identity": 0.0, "gzip": 0.0}
        size: dict[str, int] = {}
        for _ in range(args.rounds):
            for way in ("identity", "gzip"):
                c0 = cpu_seconds(pid)
                seconds, size[way] = one_round(base, args.pages, way == "gzip")
                cpu[way] += cpu_seconds(pid) - c0
                runs[way].append(seconds)
    for way, times in runs.items():
        out[way] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                    "bytes_per_page": size[way], "server_cpu_s_per_round": round(cpu[way] / args.rounds, 3)}
        print(f"{way:8s} {args.pages} pages at once: median {out[way]['median_s']:.2f} s, worst "
              f"{out[way]['max_s']:.2f} s, {size[way] / 1e6:.2f} MB a page, server CPU "
              f"{out[way]['server_cpu_s_per_round']:.2f} s a round")
    out["ratio_median"] = round(out["gzip"]["median_s"] / out["identity"]["median_s"], 3)
    print(f"gzip / identity, median: {out['ratio_median']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
