// The explorer's frames made in this browser (the server's $BAM_VIZ_FRAMES=browser, the app's). A summary
// payload's header then brings `frames_here` (bam_viz.live.grid.LiveGrid.browser_frames: the graph's
// hyperparameters at each slider value, seed, S, the reduction's rules, f(softmax), the token window) and
// `frame_graph` (views.runtime.frame_graph: the runtime's and the model graph's URLs and its manifest, or
// the problem), its arrays the sentence's `states`. One module Web Worker (frame_worker.js) runs the
// model's frame graph at every slider value, the slider's first, and reduces each (frame.js) before it
// posts it, so that this thread only draws. The captions are written from the frame this page sends the
// server (`send`, views/page_frames.py), at the values the sliders rest at and whenever
// a payload's captions wait for one (`captions_wait`); the server makes a frame only for a sentence other
// pages show or for a user alone (views/page_frames.py), and its payloads carry it until this page has its own
// (`keepServed`). Payloads keep coming (captions, a new selection): `fill` puts this page's frames in.
import { insideArrays, summaryArrays } from "./frame.js";
import { carried } from "./frame_queue.js";
import { sliderIndex } from "./indices.js";

const MAX_THREADS = 4;          // WASM threads asked for: onnxruntime-web gains little past four
const DIGITS = 9;               // significant digits sent of a number: a float32 comes back exactly

const rounded = (values) => Array.from(values, (v) => (Number.isFinite(v) ? Number(v.toPrecision(DIGITS)) : null));

// What the server reads of a frame for its captions (bam_viz.live.posted): its stats, samples, spread and
// per stochastic layer the caption rows (frame.js), and the stats of every frame made (the sweep's).
function captionNumbers(key, index, S, frames) {
  const f = frames[index];
  const rows = {};
  for (const [layer, r] of Object.entries(f.rows)) {
    rows[layer] = { top: Array.from(r.top), mean: rounded(r.mean), se: rounded(r.se), lo: rounded(r.lo),
      hi: rounded(r.hi), share: rounded(r.share), query: Array.from(r.query), key: Array.from(r.key),
      std_max: rounded(r.stdMax), std_mean: rounded(r.stdMean), map_share: rounded(r.mapShare) };
  }
  return { sentence: key, index, n_samples: S, stats: rounded(f.stats), p_samples: rounded(f.pSamples),
    spread: rounded(f.spread), rows, sweep: frames.map((g) => (g ? rounded(g.stats) : null)) };
}

// In `arrays` (frame.js's, a row per slider value), the server's rows of the values this browser has not
// made a frame of and the server has (`servedReady`); `served` the payload's arrays ({data, shape, scale}).
function keepServed(arrays, served, frames, servedReady) {
  for (const [name, local] of Object.entries(arrays)) {
    const s = served && served[name];
    if (!s || s.data.length !== local.data.length) continue;
    const row = local.data.length / local.shape[0];
    frames.forEach((f, i) => {
      if (f || servedReady[i] !== true) return;
      for (let k = i * row; k < (i + 1) * row; k++) local.data[k] = s.data[k] * s.scale;
    });
  }
}

export class LocalFrames {
  constructor(bus, change) {
    this.bus = bus;
    this.worker = null;
    this.graph = null;          // the graph URL the worker loaded
    this.key = null;            // the sentence being made: frames_here.sentence
    this.here = null;
    this.frames = [];
    this.problem = "";
    this.stats = { loaded: null, frames: 0, carried: 0, turns: 0, ms: [], reduceMs: [] };   // tests, benchmarks
    this.pending = false;
    this.wanted = null;         // the frame the server's captions wait for: {key, index, hyper}
    this.sent = 0;              // frames sent (tests)
    this.turn = null;           // the turn asked for, until it comes
    window.addEventListener(change, () => this.moved());
  }

  // A summary payload's header: its captions wait for this page's frame at `captions_wait`.
  asked(h) {
    if (Number.isInteger(h.captions_wait) && h.sentence === this.key) this.want(h.captions_wait, null);
  }

  // The sliders rest at `hyper` (sliders.js): their values go with the frame there, once it is made.
  rest(hyper) {
    const s = this.bus.views.summary;
    if (!s || !s.h || !s.h.slider) return false;
    this.want(sliderIndex(s.h.slider, hyper), hyper);
    return true;
  }

  // The frame at `index` to send, with `hyper`; one still waiting for its turn gives up its place, not
  // the slider values it carries (null: the server's).
  want(index, hyper) {
    const before = this.wanted && this.wanted.key === this.key ? this.wanted.hyper : null;
    this.wanted = { key: this.key, index, hyper: hyper || before };
    this.send();
  }

  // The frame wanted, to the server (the summary component's "frame" state: a rerun that writes the
  // captions from it), once it is made and the server gives this page its turn (`turn`, views/turns.py:
  // pages opening go first; a failed ask sends at once); `hyper` null leaves the server's slider values as
  // they are. What is wanted when the turn comes goes.
  send() {
    const s = this.bus.views.summary;
    if (!this.sendable() || this.turn) return;
    const url = s.h && s.h.turn;
    if (typeof url !== "string") { this.post(); return; }
    this.stats.turns += 1;
    this.turn = fetch(url, { cache: "no-store" }).catch(() => null).finally(() => { this.turn = null; this.post(); });
  }

  sendable() {
    const w = this.wanted;
    const s = this.bus.views.summary;
    return !!(w && w.key === this.key && this.frames[w.index] && s && s.args);
  }

  post() {
    if (!this.sendable()) return;
    const w = this.wanted;
    const s = this.bus.views.summary;
    this.wanted = null;
    const numbers = captionNumbers(this.key, w.index, this.here.n_samples, this.frames);
    try {
      s.args.setStateValue("frame", { hyper: w.hyper, numbers });
      this.sent += 1;
    } catch (err) {
      console.warn("bamviz: could not send the frame", err);
    }
  }

  // A summary payload's header `h` and arrays `a`: a sentence not being made starts its frames.
  sentence(h, a) {
    const here = h.frames_here;
    const graph = h.frame_graph;
    if (!here || !graph) return;
    if (graph.problem) { this.fail(graph.problem); return; }
    if (here.sentence === this.key && graph.graph === this.graph) return;
    const states = a.states;
    if (!states || states.shape.length !== 2) { this.fail("the payload brings no states for the frame graph"); return; }
    // a grid of the same base (a value typed off the grid makes one): its frames at the same values are these
    const before = this.here && this.here.base === here.base && graph.graph === this.graph ? this.here : null;
    const frames = before ? carried(before.values, this.frames, here.values) : new Array(here.values.length).fill(null);
    this.key = here.sentence;
    this.here = here;
    this.frames = frames;
    this.problem = "";                       // a sentence that starts says nothing of the last one's failure
    const s = this.bus.views.summary;
    if (s && s.root) {
      s.root.querySelectorAll(".bamviz-local-problem").forEach((node) => node.remove());
      delete s.root.dataset.localProblem;
    }
    const made = frames.flatMap((f, i) => (f ? [i] : []));
    this.stats.frames = made.length;
    this.stats.carried = made.length;
    this.stats.ms = [];
    this.stats.reduceMs = [];
    if (!this.worker || graph.graph !== this.graph) this.load(graph);
    const current = h.slider ? sliderIndex(h.slider, this.bus.values) : 0;
    const reduce = { rules: here.rules, softmaxProbs: here.softmax_probs, window: here.window, stochastic: here.stochastic,
      intervalZ: here.interval_z === null ? NaN : here.interval_z, layers: here.layers, heads: here.heads };
    this.worker.postMessage({ type: "sentence", id: this.key, states: Float32Array.from(states.data),
      T: states.shape[0], S: here.n_samples, seed: BigInt(here.seed), values: here.values, current, reduce, made });
    if (made.length) this.repaint();
  }

  load(graph) {
    if (this.worker) this.worker.terminate();
    this.graph = graph.graph;
    this.stats.loaded = null;
    this.worker = new Worker(new URL("./frame_worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (event) => this.received(event.data);
    this.worker.onerror = (event) => this.fail(`the frame worker failed: ${event.message || "it could not start"}`);
    const threads = Math.max(1, Math.min(MAX_THREADS, navigator.hardwareConcurrency || 1));
    this.worker.postMessage({ type: "load", runtimeUrl: new URL(graph.runtime, location.href).href,
      graphUrl: new URL(graph.graph, location.href).href, manifest: graph.manifest, threads });
  }

  received(m) {
    if (!m) return;
    if (m.type === "loaded") this.stats.loaded = m;
    else if (m.type === "error") this.fail(m.error);
    else if (m.type === "frame" && m.id === this.key && m.frame) {
      this.frames[m.index] = m.frame;               // reduced in the worker (frame.js's frameFromOutputs)
      this.stats.frames += 1;
      this.stats.ms.push(m.ms);
      this.stats.reduceMs.push(m.reduceMs);
      this.send();
      this.repaint();
    }
  }

  // The slider moved: the worker makes what is left nearest the new value first.
  moved() {
    const s = this.bus.views.summary;
    if (!this.worker || !this.key || !s || !s.h || !s.h.slider) return;
    this.worker.postMessage({ type: "current", id: this.key, current: sliderIndex(s.h.slider, this.bus.values) });
  }

  // Frames that came since the last paint, drawn once per animation frame.
  repaint() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      for (const view of Object.values(this.bus.views)) {
        if (view.h && this.fill(view)) view.paint(view.charts);
      }
    });
  }

  // Put the frames made into a payload view's arrays (its header names the same sentence): true if it did.
  fill(view) {
    const h = view.h;
    const here = this.here;
    if (!h || !here || h.sentence !== this.key || !(view.kind === "summary" || view.kind === "inside")) return false;
    const frames = this.frames;
    const S = here.n_samples;
    const served = view.servedReady || [];
    const arrays = view.kind === "summary"
      ? summaryArrays(frames, here.rules, h.target, frames.length, S, h.classes.length)
      : view.a.softmax && insideArrays(frames, here.rules, { layer: h.layer, head: h.head, query: h.query,
        window: h.window, softmax: view.a.softmax.data, layers: h.layers, heads: h.heads, nSamples: S });
    if (!arrays) return false;
    keepServed(arrays, view.served, frames, served);
    Object.assign(view.a, arrays);
    if (view.kind === "summary") {
      const z = Array.isArray(h.frame_interval_z) ? h.frame_interval_z : [];
      h.frame_interval_z = frames.map((f, i) => (f ? here.interval_z : served[i] === true ? z[i] : null));
    }
    const samples = Array.isArray(h.frame_samples) ? h.frame_samples : [];
    h.ready = frames.map((f, i) => f !== null || served[i] === true);
    h.frame_samples = frames.map((f, i) => (f ? S : served[i] === true ? samples[i] : 0));
    view.filled = (view.filled || 0) + 1;             // what a chart drew from the arrays is stale
    view.root.dataset.ready = String(h.ready.filter((r) => r).length);
    view.root.dataset.local = String(this.stats.frames);
    return true;
  }

  // One line on the summary, never a blank page: the server's payloads still draw what they carry.
  fail(line) {
    this.problem = String(line);
    const s = this.bus.views.summary;
    if (!s || !s.root) return;
    let note = s.root.querySelector(".bamviz-local-problem");
    if (!note) {
      note = document.createElement("p");
      note.className = "bamviz-note bamviz-local-problem";
      s.root.prepend(note);
    }
    note.textContent = `This browser could not compute the explorer's frames: ${this.problem}`;
    s.root.dataset.localProblem = this.problem;
    const w = this.wanted;            // the values the sliders rest at still go, without a frame
    this.wanted = null;
    if (w && w.hyper && s.args) {
      try { s.args.setStateValue("frame", { hyper: w.hyper, numbers: null }); } catch (err) { /* the page stays */ }
    }
  }
}
