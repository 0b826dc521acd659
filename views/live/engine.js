// The browser's side of a frame graph (bam_viz.inference.graph.export_frame_graph): the model's
// stochastic layers and head as ONNX, run by onnxruntime-web's WASM build. The graph's random inputs
// are uniforms; draw site i (noise_i, the manifest's i-th `noise`) gets random.js's stream i of the
// frame's seed, the numbers bam_viz.core.portable_random makes, so a frame made here is the library's.
// `ort` is the runtime module, passed in: these functions import nothing from outside this folder and
// touch no DOM (tests/js/engine.test.mjs runs them in node).
import { uniforms } from "./random.js";

const product = (dims) => dims.reduce((n, d) => n * d, 1);

function count(value, what) {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${what} is a whole number >= 0, not ${value}`);
  return value;
}

// [{name, dims}]: the manifest's noise inputs with "S" (samples) and "T" (tokens) made numbers.
export function noiseShapes(manifest, S, T) {
  const sizes = { S: count(S, "S"), T: count(T, "T") };
  return manifest.noise.map(({ name, dims }) => ({
    name,
    dims: dims.map((d) => (typeof d === "string" ? count(sizes[d], `the manifest's dim "${d}" of ${name}`) : count(d, name))),
  }));
}

// {name: {data, dims}}: each noise input's uniforms, site i the i-th of the manifest's list.
export function noiseFeeds(manifest, S, T, seed) {
  const feeds = {};
  noiseShapes(manifest, S, T).forEach(({ name, dims }, site) => {
    feeds[name] = { data: uniforms(seed, site, product(dims)), dims };
  });
  return feeds;
}

// An InferenceSession of the graph's bytes on the WASM backend; `options` adds to or overrides that.
export async function createSession(ort, graphBytes, options = {}) {
  return ort.InferenceSession.create(graphBytes, { executionProviders: ["wasm"], ...options });
}

// The "hyper" input: the values of `hyper` (name -> number) in the manifest's order of names.
function hyperData(manifest, hyper) {
  return Float32Array.from(manifest.hyper, (name) => {
    const v = hyper ? hyper[name] : undefined;
    if (!Number.isFinite(v)) throw new RangeError(`the hyperparameter ${name} is ${v}, not a number`);
    return v;
  });
}

// The float32 tensors of one frame: `states` (1, T, hidden) and `hyper` where the graph reads them.
function frameFeeds(session, manifest, { states, T, S, seed, hyper }) {
  const wanted = new Set(session.inputNames);
  const arrays = {};
  if (wanted.has("states")) {
    const size = T * manifest.hidden;
    if (!states || states.length !== size) {
      throw new RangeError(`states hold ${states ? states.length : 0} numbers, not T * hidden = ${size}`);
    }
    arrays.states = { data: states instanceof Float32Array ? states : Float32Array.from(states), dims: [1, T, manifest.hidden] };
  }
  if (wanted.has("hyper")) arrays.hyper = { data: hyperData(manifest, hyper), dims: [manifest.hyper.length] };
  Object.assign(arrays, noiseFeeds(manifest, S, T, seed));
  const unfed = session.inputNames.filter((name) => !(name in arrays));
  const unknown = Object.keys(arrays).filter((name) => !wanted.has(name));
  if (unfed.length || unknown.length) {
    throw new Error(`the manifest does not fit the graph: inputs ${unfed.join(", ") || "none"} unfed, `
      + `noise ${unknown.join(", ") || "none"} not in the graph`);
  }
  return arrays;
}

// {name: {data, dims}} of every output of the graph for one frame: `states` (T * hidden numbers),
// `hyper` (name -> value), S samples, `seed` (a Number or a BigInt below 2**63).
export async function runFrame(ort, session, manifest, frame) {
  const arrays = frameFeeds(session, manifest, frame);
  const feeds = {};
  for (const [name, { data, dims }] of Object.entries(arrays)) feeds[name] = new ort.Tensor("float32", data, dims);
  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) out[name] = { data: results[name].data, dims: [...results[name].dims] };
  return out;
}
