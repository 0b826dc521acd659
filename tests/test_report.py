"""`python -m bam_viz report`: the results tables (docs/results.md) from saved evaluation files."""

import json

import pytest
from test_evaluate import FakePredictor

from bam_viz.cli import _jsonable, main
from bam_viz.data import data_dir
from bam_viz.evaluation import evaluate as ev


def test_report_tables_from_saved_results(tmp_path, capsys):
    for name, salt in (("softmax", ""), ("bam-wc", "x")):
        for corpus in ("movies", "amazon"):
            r = ev.evaluate(FakePredictor(name, salt=salt), corpus, "test", n_samples=4, data=data_dir())
            (tmp_path / f"{name}-{corpus}.json").write_text(json.dumps(_jsonable(r)))
    # A dev-chosen inference setting, evaluated on movies only: a row in domain, none out of it.
    r = ev.evaluate(FakePredictor("bam-wc@shape_k=1", salt="y"), "movies", "test", n_samples=4, data=data_dir())
    (tmp_path / "bam-wc-k1-movies.json").write_text(json.dumps(_jsonable(r)))
    (tmp_path / "notes.json").write_text("{}")  # not an evaluation: ignored
    assert main(["report", "--results", str(tmp_path), "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    in_domain = out.split("### Out of domain")[0]
    assert in_domain.index("| softmax |") < in_domain.index("| bam-wc |")   # baseline first
    diff = out.split("### Differences")[1]
    assert "| bam-wc | " in diff and "| softmax | " not in diff
    row = [line for line in diff.splitlines() if line.startswith("| bam-wc")][0]
    assert row.count("[") == 4                                                    # four intervals
    ood = out.split("### Out of domain")[1].split("### Differences")[0]
    assert "| bam-wc | – | – | – | – | " in ood                                 # no tweets results: dashes
    assert "| bam-wc@shape_k=1 |" in in_domain and "| bam-wc@shape_k=1 |" in diff
    assert "bam-wc@shape_k=1" not in ood


def test_seed_spread_table(tmp_path, capsys):
    files = []
    for name in ("softmax", "bam-wc"):
        for seed in range(3):
            r = ev.evaluate(FakePredictor(name, salt=f"{name}{seed}"), "movies", "test", n_samples=2,
                            data=data_dir(), references=False)
            r["mc"]["accuracy"] = 0.80 + 0.01 * seed  # known values: mean 81.0, sd 1.0
            files.append(tmp_path / f"{name}-s{seed}.json")
            files[-1].write_text(json.dumps(_jsonable(r)))
    assert main(["report", "--seeds", *map(str, files)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| softmax") or line.startswith("| bam-wc")]
    assert [r.split(" | ")[0] for r in rows] == ["| softmax", "| bam-wc"]
    assert all(" | 3 | 81.0 ± 1.0 (80.0, 81.0, 82.0) | " in r for r in rows)
    # no references: the ambiguity AUROC against the 562-sentence pool is absent, not invented
    assert all(r.rstrip().endswith("| – |") for r in rows)
    amazon = ev.evaluate(FakePredictor("x"), "amazon", "test", n_samples=2, data=data_dir(), references=False)
    (tmp_path / "amazon.json").write_text(json.dumps(_jsonable(amazon)))
    with pytest.raises(SystemExit, match="movies test"):
        main(["report", "--seeds", str(tmp_path / "amazon.json")])
