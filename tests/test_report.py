"""`python -m bam_viz report`: the README tables from saved evaluation files."""

import json

from test_evaluate import FakePredictor

from bam_viz import evaluate as ev
from bam_viz.__main__ import main
from bam_viz.data import data_dir


def test_report_tables_from_saved_results(tmp_path, capsys):
    for name, salt in (("softmax", ""), ("bam-wc", "x")):
        for corpus in ("movies", "amazon"):
            r = ev.evaluate(FakePredictor(name, salt=salt), corpus, "test", n_samples=4, data=data_dir())
            (tmp_path / f"{name}-{corpus}.json").write_text(json.dumps(ev._jsonable(r)))
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
