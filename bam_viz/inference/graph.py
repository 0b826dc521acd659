"""A model's sampled pass as an ONNX graph: what the browser runs to make a frame itself.

`export_frame_graph(model, folder, n_samples)` writes `frame.onnx` and `frame.json` (the manifest).
The graph takes the states below the first stochastic layer ("states", (1, T, D)), the posterior's
hyperparameters ("hyper") and one array of uniforms per draw site ("noise_i"); it runs the model's
own `upper` with `GivenNoise`, so its draws are `explain(..., rng="portable")`'s for the uniforms
`bam_viz.core.portable_random` makes. Outputs: each sample's probabilities, the sampled weights of
every stochastic layer (drawn, or dropped out), and f(E[w]) with its S leave-one-out values
(`bam_viz.inference.gaps`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path

import torch
import torch.nn as nn

from bam_viz.families import Hyper
from bam_viz.families.sampling import GivenNoise, PortableNoise
from bam_viz.inference import gaps
from bam_viz.nn.attention import Trace

FORMAT = 1                   # the manifest's layout; a new one makes every cached graph again
OPSET = 17
GRAPHS_ENV = "BAM_VIZ_GRAPHS"    # where exported graphs are kept; default ~/.cache/bam-viz/graphs
_EXPORTING = threading.Lock()


class GraphHyper(Hyper):
    """A `Hyper` some of whose values are tensors (a graph's inputs), the rest the model's floats."""

    def __init__(self, base: Hyper, tensors: dict[str, torch.Tensor]):
        object.__setattr__(self, "_family", base._family)
        object.__setattr__(self, "_values", tuple(sorted({**dict(base), **tensors}.items())))


def posterior_names(model) -> list[str]:
    """The hyperparameters the sampled pass reads, in the order of the graph's "hyper" input."""
    return [s.name for s in model.attention_family.hyper_specs if not s.prior_only]


class FrameGraph(nn.Module):
    """`forward(states, hyper, *noise)`: the S-sample pass of `model` and its f(E[w]) pass."""

    def __init__(self, model, n_samples: int):
        super().__init__()
        if n_samples < 2:
            raise ValueError("a frame graph draws two samples or more")
        self.model, self.n_samples = model, n_samples
        self.names = posterior_names(model)
        self.random_layers = gaps.attention_random_layers(model)
        # the layers whose sampled weights a frame shows: attention drawn, or dropped out (MC dropout)
        self.weight_layers = sorted(model.config.stochastic_layers) if model.stochastic else []

    def forward(self, states, hyper, *noise):
        model, S = self.model, self.n_samples
        mask = torch.ones_like(states[..., 0], dtype=torch.bool)                         # (1, T)
        h = GraphHyper(model.hyper(), {n: hyper[i] for i, n in enumerate(self.names)})
        logits, traces, _ = model.upper(states, mask, n_samples=S, generator=GivenNoise(noise), hyper=h,
                                        trace=Trace.SAMPLES)
        outputs = [logits.softmax(-1)]
        first = model.first_stochastic
        outputs += [traces[i - first].weights for i in self.weight_layers]
        drawn = {i: traces[i - first].weights for i in self.random_layers}
        if drawn:
            probs = gaps.leave_one_out_probs(model, states, mask, drawn, h)
            outputs += [probs[0], probs[1:]]
        return tuple(outputs)

    def output_names(self) -> list[str]:
        names = ["sample_probs"] + [f"weights_{i}" for i in self.weight_layers]
        return names + (["mean_probs", "loo_probs"] if self.random_layers else [])


def noise_dims(model, n_samples: int, lengths=(5, 7)) -> list[list]:
    """Each draw site's shape with "T" where it follows the sentence's length: the sites of two
    sentence lengths' passes compared."""
    seen = []
    for T in lengths:
        noise = PortableNoise(0)
        x = torch.zeros(1, T, model.bert.config.hidden)
        with torch.inference_mode():
            model.upper(x, torch.ones(1, T, dtype=torch.bool), n_samples=n_samples, generator=noise,
                        trace=Trace.SAMPLES)
        seen.append(noise.shapes)
    a, b = seen
    if len(a) != len(b):
        raise RuntimeError("the pass draws a number of times that depends on the sentence's length")
    return [[d if d == e else "T" for d, e in zip(sa, sb, strict=True)] for sa, sb in zip(a, b, strict=True)]


def graph_key(model, n_samples: int) -> str:
    """sha256 of what the graph is made from: the parameters, the configuration, S and FORMAT."""
    h = hashlib.sha256(json.dumps({"format": FORMAT, "opset": OPSET, "S": n_samples,
                                   "config": model.config.to_dict(), "torch": torch.__version__},
                                  sort_keys=True, default=str).encode())
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def export_frame_graph(model, folder: str | Path, n_samples: int = 32) -> dict:
    """Write `frame.onnx` and `frame.json` into `folder` (made if missing); returns the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval()
    graph = FrameGraph(model, n_samples).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    dims = noise_dims(model, n_samples)
    T = 6
    states = torch.zeros(1, T, model.bert.config.hidden)
    hyper = torch.tensor([model.hyper()[n] for n in graph.names], dtype=torch.float32)
    noise = [torch.full([T if d == "T" else d for d in shape], 0.5) for shape in dims]
    inputs = ["states", "hyper"] + [f"noise_{i}" for i in range(len(dims))]
    dynamic = {"states": {1: "T"}} | {f"noise_{i}": {j: "T" for j, d in enumerate(shape) if d == "T"}
                                      for i, shape in enumerate(dims)}
    outputs = graph.output_names()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the tracer's notes on Python values it keeps
        path = Path(tmp) / "frame.onnx"
        torch.onnx.export(graph, (states, hyper, *noise), str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic | {name: {} for name in outputs}, opset_version=OPSET,
                          dynamo=False, do_constant_folding=True)
        data = shared_constants(path.read_bytes())
    manifest = {
        "format": FORMAT, "opset": OPSET, "key": graph_key(model, n_samples), "model": model.name,
        "family": model.family, "classes": list(model.classes), "n_samples": n_samples,
        "hidden": model.bert.config.hidden, "layers": model.n_layers, "heads": model.n_heads,
        "first_stochastic": model.first_stochastic, "random_layers": graph.random_layers,
        "weight_layers": graph.weight_layers,
        "hyper": graph.names, "noise": [{"name": f"noise_{i}", "dims": d} for i, d in enumerate(dims)],
        "outputs": outputs, "graph": "frame.onnx", "graph_sha256": hashlib.sha256(data).hexdigest(),
        "graph_bytes": len(data),
    }
    _write(folder / "frame.onnx", data)
    _write(folder / "frame.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def graphs_root() -> Path:
    """The folder that keeps every exported graph, one subfolder per `graph_key`."""
    if os.environ.get(GRAPHS_ENV):
        return Path(os.environ[GRAPHS_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bam-viz" / "graphs"


def graph_for(model, n_samples: int = 32) -> tuple[Path, dict]:
    """The folder of `model`'s frame graph at S = `n_samples` and its manifest, exported on first use
    and kept under `graphs_root()` by `graph_key` (the weights' sha256 among what it hashes)."""
    key = graph_key(model, n_samples)
    folder = graphs_root() / key[:32]
    with _EXPORTING:
        manifest = _read_manifest(folder, key)
        if manifest is None:
            manifest = export_frame_graph(model, folder, n_samples)
    return folder, manifest


def _read_manifest(folder: Path, key: str) -> dict | None:
    """The manifest kept in `folder` if it is this key's and its graph is whole, else None."""
    try:
        manifest = json.loads((folder / "frame.json").read_text())
        whole = (folder / "frame.onnx").stat().st_size == manifest["graph_bytes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return manifest if whole and manifest.get("key") == key and manifest.get("format") == FORMAT else None


def shared_constants(data: bytes) -> bytes:
    """The graph with each repeated constant kept once: the tracer writes a weight that two passes
    read (the sampled pass and the f(E[w]) pass, a LoRA weight folded with its adapter) once per pass."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load_from_string(data)
    first, renamed, kept = {}, {}, []
    for node in graph.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            t = numpy_helper.to_array(node.attribute[0].t)
            digest = (t.dtype.str, t.shape, hashlib.sha256(t.tobytes()).hexdigest())
            if digest in first:
                renamed[node.output[0]] = first[digest]
                continue
            first[digest] = node.output[0]
        kept.append(node)
    for node in kept:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
    del graph.graph.node[:]
    graph.graph.node.extend(kept)
    return graph.SerializeToString()


def _write(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename: a reader never sees half a graph."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
