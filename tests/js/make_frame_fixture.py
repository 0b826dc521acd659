"""Write tests/js/fixtures/frame.json: frames of tiny models as a frame graph gives them and as the
server reduces them, which views/live/frame.js must reduce alike (tests/js/frame.test.mjs).

Each case is one model on a random 3-layer BERT (tests/tinybert.py) and a grid of a few slider
values, some frames not made (null) or a preview of fewer samples. For each frame made,
`model.explain(text, S, seed, rng="portable")` gives the graph's outputs (`bam_viz.inference.graph.FrameGraph`):
`sample_probs`, `weights_<layer>` of each stochastic layer, and where attention is drawn `mean_probs`,
f(E[w]), and `loo_probs`, f at each leave-one-out mean; and Python's reduction of it, as
`bam_viz.live.frames.make_frame` makes it: `class_stats`, the spread, `window_maps` (float32: the
frame rounds them to float16, the browser does not) and each stochastic layer's caption rows,
`caption_rows(r.row_summary(layer, WINDOW))` and `r.map_summary(layer, WINDOW)`. Each case then holds what
`bam_viz.live.payloads._summary_arrays` (every class as the target) and `_inside_frame_arrays` (a
few layers, heads and queries) make of its frames. Beside the cases, `bam_viz.live.frames.frame_rules()`:
what frame.js reduces by, as the server sends it.

The cases: Weibull (K = 2) with a preview and a frame whose S samples are one sample repeated (an exact
frame of a stochastic model: every weight drawn the same); Dirichlet (K = 3); the categorical alignment at
S = 2 (too few samples for the mutual information's jackknife), and one sample twice (exact: its MI's
error is 0, not "too few samples"); a softmax model with dropout kept on
(mc-dropout); the deterministic softmax model. The frame graph exports the weights of attention-random
layers only, so for mc-dropout it gives none today; the case gives its dropped weights as
`weights_<layer>`, what the reduction needs to draw its maps and spread.

Run `.venv/bin/python tests/js/make_frame_fixture.py` from the repository root;
tests/test_frame_fixture.py fails when the file is stale. Inputs (float32) are written in their shortest
float32 form; NaN as null.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "frame.json"
TEXT = "the movie was fun"               # [CLS] the movie was fun [SEP]: T = 6
WINDOW = [0, 1, 3, 4, 5]                  # token 2 left out, so that a window is not the whole sentence
SEED = 2**40 + 11
BERT = dict(layers=3, hidden=16, heads=2, intermediate=32, seed=0)
REPEATED = "repeated"                     # a frame whose samples are its first one, S times
# name, family, classes, model options, grid S, [(slider value, S drawn) or None or (value, REPEATED)],
# target-free selections (layer, head, query) of the inside arrays
CASES = [
    ("weibull K=2", "weibull", ("neg", "pos"), {}, 6, [(3.0, 6), None, (0.5, 3), (10.0, REPEATED)],
     [(2, 1, 3), (1, 0, 2), (0, 0, 0)]),
    ("dirichlet K=3", "dirichlet", ("a", "b", "c"), {}, 6, [(50.0, 6), (2.0, 6), None], [(1, 1, 4), (2, 0, 0)]),
    ("categorical K=2", "categorical", ("neg", "pos"), {"stochastic_layers": (2,)}, 2, [(None, 2)], [(2, 1, 0)]),
    ("categorical K=2, one sample twice", "categorical", ("neg", "pos"), {"stochastic_layers": (2,)}, 2,
     [(None, REPEATED)], [(2, 0, 0)]),
    ("mc-dropout K=3", "softmax", ("a", "b", "c"), {"mc_dropout": True, "dropout": 0.1}, 6, [(None, 6)],
     [(1, 0, 1), (2, 1, 5)]),
    ("softmax K=3", "softmax", ("a", "b", "c"), {}, 4, [(None, 4)], [(1, 0, 1)]),
]


def tiny_model(bert: Path, family: str, classes: tuple[str, ...], options: dict):
    """A model of `family` on the tiny BERT at `bert`, stochastic in layers 1 and 2 unless `options` say."""
    import torch

    from bam_viz.model import BamClassifier, ModelConfig
    from bam_viz.nn.attention import AttentionConfig

    options = {"stochastic_layers": (1, 2), "dropout": 0.0, **options}
    config = ModelConfig("tiny-" + family, AttentionConfig(family), classes=classes, backbone=str(bert), **options)
    # The head and the adapters are drawn at construction: from a fixed seed, without moving the caller's.
    with torch.random.fork_rng():
        torch.manual_seed(BERT["seed"])
        model = BamClassifier(config)
    g = torch.Generator().manual_seed(len(classes))
    with torch.no_grad():
        model.head.weight.copy_(0.5 * torch.randn(model.head.weight.shape, generator=g))
    return model.eval()


def repeated(r):
    """`r` as if each of its S samples had drawn its first sample's weights: its f(z_s), f(E[w]) and
    every leave-one-out mean are the first sample's."""
    S = r.n_samples
    probs = r.sample_probs[:1].repeat(S, 1)
    return dataclasses.replace(r, sample_weights=r.sample_weights[:1].repeat(S, 1, 1, 1, 1), sample_probs=probs,
                               mc_probs=probs.mean(0), mean_attention_probs=probs[0].clone(),
                               mean_attention_loo_probs=probs.clone())


def graph_outputs(r) -> dict:
    """What the frame graph gives for the result's samples, {name: float32 array}."""
    out = {"sample_probs": r.sample_probs.numpy()}
    for layer in r.stochastic_layers:
        out[f"weights_{layer}"] = r.sample_weights[:, layer].numpy()
    if r.mean_attention_loo_probs is not None:
        out["mean_probs"] = r.mean_attention_probs.numpy()
        out["loo_probs"] = r.mean_attention_loo_probs.numpy()
    return out


def reduced(r) -> dict:
    """Python's frame of `r` (`make_frame`'s reduction), its maps in float32: stats, spread, maps, and
    rows {layer: (RowSummary, MapSummary)} by make_frame's calls."""
    import torch

    from bam_viz.live.frames import caption_rows, class_stats, window_maps

    idx = torch.tensor(WINDOW)
    maps = {layer: window_maps(r.sample_weights[:, layer][:, :, idx][:, :, :, idx]).numpy()
            for layer in r.stochastic_layers}
    rows = {layer: (caption_rows(r.row_summary(layer, WINDOW)), r.map_summary(layer, WINDOW))
            for layer in r.stochastic_layers}
    return {"stats": class_stats(r), "spread": r.spread.double().numpy(), "maps": maps, "rows": rows}


def written_rows(rows: dict) -> dict:
    """A frame's rows as the file holds them: {layer: {"row_summary": RowSummary's fields (top as ints, the
    rest float32), "map_summary": MapSummary's (query and key as ints, the rest float64)}}."""
    def fields(summary, numbers):
        return {k: [int(v) for v in a.ravel()] if k in ("top", "query", "key") else numbers(a)
                for k, a in summary._asdict().items()}

    return {str(layer): {"row_summary": fields(row, f32), "map_summary": fields(summary, f64)}
            for layer, (row, summary) in rows.items()}


class FixtureGrid:
    """What `_summary_arrays` and `_inside_frame_arrays` read of a `LiveGrid`."""

    def __init__(self, model, values, n_samples, frames, softmax_weights):
        self.model, self.values, self.n_samples, self.frames = model, values, n_samples, frames
        self.classes, self.window, self.softmax_weights = tuple(model.classes), WINDOW, softmax_weights

    def posterior_row(self, i, layer, head, query):
        from bam_viz.live.grid import LiveGrid

        return LiveGrid.posterior_row(self, i, layer, head, query)


def f32(a) -> list:
    """Float32 numbers in their shortest form, each checked to read back as itself; NaN as None."""
    import numpy as np

    out = []
    for v in np.asarray(a, dtype=np.float32).ravel():
        if np.isnan(v):
            out.append(None)
            continue
        x = float(str(v))
        assert np.float32(x) == v, v
        out.append(x)
    return out


def f64(a) -> list:
    import numpy as np

    return [None if np.isnan(v) else float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def given_outputs(r, frame: dict, softmax_probs: list):
    """`r` with the graph's outputs and f(softmax) of a written `frame` and case in place of its own."""
    import torch

    arrays = {k: torch.tensor(numbers(v["data"]), dtype=torch.float32).reshape(v["dims"])
              for k, v in frame["outputs"].items()}
    weights = r.sample_weights.clone()
    for layer in r.stochastic_layers:
        weights[:, layer] = arrays[f"weights_{layer}"]
    probs, softmax = arrays["sample_probs"], torch.tensor(softmax_probs, dtype=torch.float32)
    return dataclasses.replace(r, sample_weights=weights, sample_probs=probs, mc_probs=probs.mean(0),
                               softmax_probs=softmax, mean_attention_probs=arrays.get("mean_probs", softmax),
                               mean_attention_loo_probs=arrays.get("loo_probs"))


def case(bert: Path, name, family, classes, options, n_samples, plan, selections, given: dict | None = None) -> dict:
    """One case as the file holds it; with `given` (the case as a file holds it), the reductions of its
    graph outputs rather than of this host's passes."""
    import numpy as np

    from bam_viz.core.metrics import interval_multiplier
    from bam_viz.live.frames import Frame
    from bam_viz.live.payloads import _inside_frame_arrays, _summary_arrays

    model = tiny_model(bert, family, classes, options)
    slider = model.slider_specs[0].name if model.slider_specs else None
    frames, written, first = [], [], None
    for i, made in enumerate(plan):
        if made is None:
            frames.append(None)
            written.append(None)
            continue
        value, S = made
        hyper = {slider: value} if slider else {}
        r = model.explain(TEXT, n_samples=n_samples if S == REPEATED else S, seed=SEED, rng="portable",
                          cache=False, **hyper)
        r = repeated(r) if S == REPEATED else r
        if given is not None:
            r = given_outputs(r, given["frames"][i], given["softmax_probs"])
        first = first or r
        mine = reduced(r)
        frames.append(Frame(stats=mine["stats"], p_samples=r.sample_probs.numpy().copy(), spread=mine["spread"],
                            kl=np.zeros(0), maps=mine["maps"], rows=mine["rows"]))
        outputs = {k: {"dims": list(v.shape), "data": f32(v)} for k, v in graph_outputs(r).items()}
        written.append({"hyper": hyper, "interval_z": interval_multiplier(r.n_samples), "outputs": outputs,
                        "stats": f64(mine["stats"]), "spread": f64(mine["spread"]),
                        "maps": {str(k): f32(m) for k, m in mine["maps"].items()},
                        "rows": written_rows(mine["rows"])})
    softmax_weights = first.softmax_weights.clone()
    for k, (layer, head, _) in enumerate(selections if given is not None else []):
        softmax_weights[layer, head] = torch_of(given["inside"][k]["softmax"]).reshape(softmax_weights.shape[-2:])
    grid = FixtureGrid(model, [m and m[0] for m in plan], n_samples, frames, softmax_weights)
    summary = [{k: f32(v) for k, v in _summary_arrays(grid, frames, t).items()} for t in range(len(classes))]
    inside = []
    for layer, head, query in selections:
        arrays = _inside_frame_arrays(grid, frames, layer, head, query)
        inside.append({"layer": layer, "head": head, "query": query,
                       "softmax": f32(softmax_weights[layer, head]),
                       **{k: {"dims": list(v.shape), "data": f32(v)} for k, v in arrays.items()}})
    return {"name": name, "classes": len(classes), "layers": model.n_layers, "heads": model.n_heads,
            "tokens": len(first.tokens), "window": WINDOW, "n_samples": n_samples,
            "stochastic": bool(first.stochastic_layers), "softmax_probs": f32(first.softmax_probs),
            "frames": written, "summary": summary, "inside": inside}


def numbers(values: list) -> list:
    return [float("nan") if v is None else v for v in values]


def torch_of(values: list):
    import torch

    return torch.tensor(numbers(values), dtype=torch.float32)


def fixture(given: dict | None = None) -> dict:
    """Every case, with the rules frame.js reduces them by (`bam_viz.live.frames.frame_rules`, as the
    server sends them). With `given` (a fixture as the file holds it), each case's reductions are of the
    graph outputs it holds (made on another host, whose float32 kernels may round otherwise), not of this
    host's passes."""
    from bam_viz.live.frames import frame_rules
    from tests.tinybert import make_tiny_bert

    with tempfile.TemporaryDirectory() as tmp:
        bert = make_tiny_bert(Path(tmp) / "bert", **BERT)
        cases = [case(bert, *c, given=given["cases"][k] if given else None) for k, c in enumerate(CASES)]
    return {"rules": frame_rules(), "text": TEXT, "seed": SEED, "cases": cases}


def text(data: dict | None = None) -> str:
    """`data` (else a fixture made now) as the file holds it: one frame, summary or selection a line."""
    data = fixture() if data is None else data
    lines = []
    for c in data["cases"]:
        head = {k: v for k, v in c.items() if k not in ("frames", "summary", "inside")}
        parts = [f'   "{key}": [\n' + ",\n".join(f"    {json.dumps(item)}" for item in c[key]) + "\n   ]"
                 for key in ("frames", "summary", "inside")]
        lines.append("  " + json.dumps(head)[:-1] + ",\n" + ",\n".join(parts) + "\n  }")
    top = json.dumps({k: v for k, v in data.items() if k != "cases"})[:-1]
    return top + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(text(), encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size // 1024} KB)")
