"""Write tests/js/fixtures/random.json: uniforms of bam_viz.core.portable_random, which
views/live/random.js must make bit for bit (tests/js/random.test.mjs).

Run `.venv/bin/python tests/js/make_random_fixture.py`; tests/test_portable_random.py fails when the
file is stale. A seed past 2**53 is written as a string, since a JSON number cannot hold it exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "random.json"
SEEDS = (0, 1, 12345, 2**32 + 7, 2**53 - 1, 2**63 - 1)
SITES = (0, 1, 7)
COUNT = 16
# (seed, site, start, count): a stream read from the middle, and its last numbers.
OFFSETS = ((12345, 1, 1000, 8), (2**53 - 1, 0, 2**31 + 5, 4), (2**63 - 1, 7, 2**32 - 4, 4))


def _case(seed: int, site: int, start: int, count: int) -> dict:
    from bam_viz.core.portable_random import stream_key, uniforms

    return {"seed": seed if seed < 2**53 else str(seed), "site": site, "start": start, "count": count,
            "key": stream_key(seed, site), "values": [float(u) for u in uniforms(seed, site, count, start)]}


def fixture() -> dict:
    """The cases random.test.mjs compares, each with the stream's key and its float32 values."""
    cases = [_case(seed, site, 0, COUNT) for seed in SEEDS for site in SITES]
    return {"cases": cases + [_case(*offset) for offset in OFFSETS]}


def text() -> str:
    """The fixture as the file holds it: one case a line, so that a diff shows which changed."""
    lines = ",\n".join(f"  {json.dumps(case)}" for case in fixture()["cases"])
    return '{"cases": [\n' + lines + "\n]}\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(text(), encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}")
