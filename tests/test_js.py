"""What the explorer's JavaScript (views/live/) gets from Python, and how it is served.

The JavaScript keeps no constants of its own: every payload's header brings them
(`bam_viz.live.grid.page_style`), from their homes in `bam_viz.plots`. The JavaScript's unit tests
(`node --test tests/js/`, run by `make test`) check its pure functions against what Python says,
read from tests/js/fixtures/python.json: the wire format's bytes and their arrays, Python's "g"
formatting, the standard error's decimals, the nearest grid value, the classes the predictive
distribution draws one by one, the page's style, and the entropy bar of summary payloads. The
fixture is made by `python tests/test_js.py`, and a test here fails when it is stale.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "views" / "live"
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "python.json"
MAX_JS_LINES = 600


def fixture() -> dict:
    """What the JavaScript's unit tests compare their results with."""
    from bam_viz.core.grids import nearest_index
    from bam_viz.live.grid import page_style
    from bam_viz.live.wire import pack, unpack
    from bam_viz.plots.captions import gap_sentence
    from bam_viz.plots.classes import shown_classes
    from bam_viz.plots.format import se_digits

    header = {"kind": "summary", "id": "fixture", "tokens": ["[CLS]", "naïve", "\u200b", "<b>"], "ready": [True, False]}
    arrays = {"stats": np.array([[0.5, -1.25, 3e38], [np.nan, 1e-7, 2.0]]),
              "maps": np.array([[0.0, 0.5, 1.0], [0.25, 0.75, 0.1]], dtype=np.float16),
              "empty": np.zeros((0, 3))}
    data = pack(header, arrays)
    _, decoded = unpack(data)
    expected = {}
    for name, a in decoded.items():
        if name == "maps":                                     # u2: the codes, value = code / 65535
            expected[name] = {"shape": list(a.shape), "codes": np.rint(a * 65535).astype(int).ravel().tolist()}
        else:                                                  # f4: the float32 values exactly, NaN as null
            expected[name] = {"shape": list(a.shape),
                              "values": [None if np.isnan(v) else float(v) for v in a.ravel()]}
    errors = [0.0, 1e-9, 5e-7, 1e-6, 2.3e-5, 0.000999, 0.001, 0.0012, 0.05, 1.0, 12.0]
    numbers = [0.000123456, 1234567.0, 0.5, 1e-05, 123.456, -0.0012, 0.1 + 0.2, 6.02e23, 3e38, 2.0, 100.0,
               0.001, 99999.0, -45.678, 1 / 3]
    grids = [([0.2, 0.5, 1.0, 3.0, 10.0], v, log) for v in (0.35, 0.7, 2.0, 5.0, 100.0, 1e-9) for log in (True, False)]
    grids += [([-1.0, 0.0, 1.0], 0.4, True), ([1.0, 2.0, 4.0], 2.0 ** 0.5 * 1.0000001, True)]
    rng = np.random.default_rng(0)
    fifty = rng.dirichlet(np.full(50, 0.3)).round(6).tolist()
    distributions = [([0.2, 0.8], 0, 10), ([0.5, 0.5], 1, 10), ([0.1, 0.3, 0.3, 0.2, 0.1], 4, 3),
                     ([0.1, 0.3, 0.3, 0.2, 0.1], 1, 3), ([0.4, None, 0.6], 1, 10), (fifty, 7, 10),
                     (fifty, int(np.argmax(fifty)), 10), (fifty, int(np.argmin(fifty)), 10)]
    return {
        "wire": {"base64": base64.b64encode(data).decode("ascii"), "header": header, "arrays": expected},
        "fmt_g": [[v, p, f"{v:.{p}g}"] for v in numbers for p in (2, 3, 6)],
        "se_digits": [[se, se_digits(se)] for se in errors],
        "gap_sentence": [[told, "0.005", gap_sentence(told, "0.005")] for told in (True, False)],
        "nearest": [[values, v, log, nearest_index(values, v, log)] for values, v, log in grids],
        "shown_classes": [[probs, target, most, *shown_classes([np.nan if p is None else p for p in probs], target,
                                                               most)] for probs, target, most in distributions],
        "style": {kind: page_style(kind) for kind in ("summary", "inside")},
        "entropy": _entropy_frames(),
    }


def _entropy_frames() -> list[dict]:
    """Summary payloads of one frame, the stats `class_stats` of results with these samples, and the
    entropy bar Python draws of each (`entropy_parts`, `entropy_mi_note`), as float32 where the page
    reads them: entropy.js must draw the same total and parts from the bytes and say the same note.
    The first table is symmetric, its E p uniform: H[E p] = ln 2, where the expected entropy plus the
    bias-corrected MI is above it."""
    import dataclasses

    import torch
    from fake_result import make_fake_result

    from bam_viz.core.labels import labels
    from bam_viz.core.task import entropy_bound
    from bam_viz.live.frames import STATS, class_stats
    from bam_viz.live.grid import page_style
    from bam_viz.live.wire import finite32, pack
    from bam_viz.plots.wording import entropy_mi_note, entropy_parts

    symmetric = [[0.05, 0.95], [0.95, 0.05], [0.3, 0.7], [0.7, 0.3]]
    tables = [symmetric, symmetric[:2], np.random.default_rng(1).dirichlet(np.full(3, 0.5), size=8)]
    results = []
    for table in tables:
        probs = torch.tensor(np.asarray(table), dtype=torch.float32)
        fake = make_fake_result("weibull", T=3, L=2, H=1, n_classes=probs.shape[1])
        results.append(dataclasses.replace(fake, sample_probs=probs, mc_probs=probs.mean(0),
                                           n_samples=probs.shape[0], mean_attention_loo_probs=None))
    results.append(make_fake_result("softmax", T=3, L=2, H=1, S=1))
    style = page_style("summary")
    out = []
    for r in results:
        K = len(r.classes)
        header = {"kind": "summary", "stats": list(STATS), "stochastic": bool(r.stochastic_layers),
                  "n_samples": r.n_samples, "frame_samples": [r.n_samples], "entropy_bound": entropy_bound(K),
                  "labels": labels(r.classes[r.target], K),
                  "style": {k: style[k] for k in ("se_digits", "samples_needed")}}
        data = pack(header, {"stats": finite32(class_stats(r)[r.target][None])})
        parts = {k: float(np.float32(v)) for k, v in entropy_parts(r)._asdict().items()}
        out.append({"base64": base64.b64encode(data).decode("ascii"), **parts, "note": entropy_mi_note(r) or ""})
    return out


def test_the_fixture_is_current():
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == json.loads(json.dumps(fixture())), \
        "tests/js/fixtures/python.json is stale: run `.venv/bin/python tests/test_js.py`"


# ---- the header: each fact from its one home -------------------------------------------------------
def test_the_style_is_the_constants_of_bam_viz_plots():
    from bam_viz.live.grid import page_style
    from bam_viz.plots import style
    from bam_viz.plots.captions import gap_sentence
    from bam_viz.plots.format import samples_needed, se_digits

    summary, inside = page_style("summary"), page_style("inside")
    assert summary["colours"] == inside["colours"] == style.PAGE_COLOURS
    assert style.PAGE_COLOURS["posterior"] == style.POSTERIOR_COLOUR and style.PAGE_COLOURS["mc"] == style.MC_COLOUR
    assert inside["scales"] == {"weight": style.WEIGHT_SCALE, "std": style.STD_SCALE, "value": style.VALUE_SCALE}
    assert inside["weight_range"] == list(style.WEIGHT_RANGE) and inside["std_range"] == list(style.STD_RANGE)
    assert inside["kl_decades"] == style.KL_DECADES and inside["map_labels_max"] == style.MAX_TICK_TOKENS
    assert inside["bar_labels_max"] == style.BAR_TICK_TOKENS
    # the decimals' rule as data reproduces se_digits, the JavaScript's way (format.js: decimalsFor)
    rule = summary["se_digits"]
    for se in (None, 0.0, 5e-4, 1e-3, 2e-5, 1e-12, 0.3):
        js = (min(rule["max_digits"], -int(np.floor(np.log10(se)))) if se and se < 10.0 ** -rule["digits"]
              else rule["digits"])
        assert js == se_digits(se), se
    assert summary["samples_needed"] == {"p_target": 2, "gap": 3, "gap_softmax": 2, "mutual_information": 3}
    assert summary["class_bars"] == style.CLASS_BARS
    assert all(samples_needed(q) == n for q, n in summary["samples_needed"].items())
    for told, key in ((True, "distinguishable"), (False, "indistinguishable")):
        assert summary["gap_sentence"][key].replace("{half_width}", "0.004") == gap_sentence(told, "0.004")


@pytest.mark.slow
def test_every_payload_header_carries_its_style():
    import bam_viz
    from bam_viz.core.labels import labels
    from bam_viz.core.task import entropy_bound
    from bam_viz.live import grid as live
    from bam_viz.live.frames import STATS

    model = bam_viz.load("bam-wc")
    grid = live.LiveGrid(model, "A film.", 2, 0)
    grid.frame(0)
    summary, arrays = live.unpack(live.summary_payload(grid, 0))
    inside, _ = live.unpack(live.inside_payload(grid, 0, 0, 3, 0, 0, 1))
    assert summary["style"] == json.loads(json.dumps(live.page_style("summary")))
    assert inside["style"] == json.loads(json.dumps(live.page_style("inside")))
    assert summary["stats"] == list(STATS)           # summary.js reads the stats by these names
    # summary.js names the class it shows and the entropy's bound only from these
    predicted = int(np.argmax(grid.frames[0].stats[:, STATS.index("p_mc")]))
    assert summary["classes"] == list(model.classes) and summary["target"] == summary["predicted"] == predicted
    assert summary["labels"] == labels(model.classes[predicted], 2) and summary["entropy_bound"] == entropy_bound(2)
    assert arrays["class_probs"].shape == (len(grid.values), 4, 2)
    other, _ = live.unpack(live.summary_payload(grid, 0, target=1 - predicted))
    assert other["target"] == 1 - predicted and other["labels"]["p"] == f"P({model.classes[1 - predicted]})"


def _js_sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(LIVE.glob("*.js"))}


def test_the_javascript_keeps_no_copy_of_them():
    from bam_viz.core.labels import LABELS
    from bam_viz.live.grid import page_style

    style = page_style("inside") | page_style("summary")
    facts = set(style["colours"].values()) | {c for stops in style["scales"].values() for _, c in stops}
    facts |= {"distinguishable from zero", "STAT_NAMES", '"p_mc", "p_se"'}
    facts |= {LABELS[k] for k in ("entropy", "aleatoric", "epistemic", "entropy_mi")}
    facts |= {LABELS["interval"]}
    found = [(name, fact) for name, text in _js_sources().items() for fact in facts if fact.lower() in text.lower()]
    # An interval's multiplier is Python's (the header's `frame_interval_z`): no "2 * se" of the JavaScript's own.
    found += [(name, m) for name, text in _js_sources().items()
              for m in re.findall(r"\b\d(?:\.\d+)? \* [\w.]*se\b", text)]
    # The class shown, its name and the model's K come with the header: no class, P(...) or ln 2 here.
    named = ("P(", '"positive"', '"negative"', "`positive", "ln 2", "0.693", "LN2")
    found += [(name, fact) for name, text in _js_sources().items() for fact in named if fact in text]
    assert found == []


# ---- the modules, and how the browser gets them ------------------------------------------------------
def test_the_modules_import_each_other_by_relative_paths_that_exist():
    sources = _js_sources()
    assert "live.js" in sources and len(sources) > 5
    for name, text in sources.items():
        assert len(text.splitlines()) <= MAX_JS_LINES, name
        for target in re.findall(r"""^import\b[^;]*?from\s+["']([^"']+)["']""", text, flags=re.M | re.S):
            assert target.startswith("./") and target.endswith(".js"), (name, target)
            assert (LIVE / target).is_file(), (name, target)
        dynamic = re.findall(r"\bimport\s*\(\s*(\w*)", text)
        if name == "frame_worker.js":
            # The one import at run time: the browser runtime, from the URL the server gives
            # (views.runtime.runtime_url), once frame_queue.js's sameOrigin has refused any other origin's.
            assert len(dynamic) == 1 and re.search(rf"\bconst {dynamic[0]} = sameOrigin\(", text), name
            dynamic = []
        assert not dynamic and not re.search(r"https?://", text), name     # nothing fetched from elsewhere


def test_the_component_serves_the_modules_and_imports_the_entry(tmp_path, monkeypatch):
    from streamlit.components.v2.component_path_utils import ComponentPathUtils

    from views import components

    monkeypatch.setattr(components, "STATIC", tmp_path / "static" / "live")
    url = components._modules()
    assert re.fullmatch(r"/app/static/live/js/[0-9a-f]{16}/live\.js", url)
    served = components.STATIC / "js" / url.split("/")[-2]
    assert {p.name: p.read_text(encoding="utf-8") for p in served.glob("*.js")} == _js_sources()
    assert components._modules() == url                       # the same code: the same folder
    js = components._loader(url)
    assert ComponentPathUtils.looks_like_inline_content(js)   # else Streamlit would take it for a file's path
    assert f'import(new URL("{url}", location.href).href)' in js and "export default" in js


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    entries = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in fixture().items()]
    FIXTURE.write_text("{\n" + ",\n".join(entries) + "\n}\n", encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}")
