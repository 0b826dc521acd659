// What frame_worker.js decides between two frames, and the checks it makes before it loads or runs a
// graph: pure functions (tests/js/frame_queue.test.mjs), no DOM, no runtime.

// A frame's noise arrays alone past this many bytes and the sentence is refused before it runs: the
// runtime's WASM memory is 4 GiB at most, and a frame holds its noise, the weights drawn from it and its
// outputs at once (bam-wc at S = 32: 75 MB of noise at 128 tokens, the model's longest; 1.2 GB at 512).
export const MAX_NOISE_BYTES = 512 * 2 ** 20;

// 0..n-1 by distance from `start`, the side of `step` (+1: right, -1: left) first at each distance:
// bam_viz.live.grid.nearest_first's order, the one the server makes a sentence's frames in.
export function nearestFirst(n, start, step = 1) {
  const side = step < 0 ? -1 : 1;
  const order = [start];
  for (let d = 1; d < n; d++) {
    for (const i of [start + side * d, start - side * d]) if (i >= 0 && i < n) order.push(i);
  }
  return order;
}

function index(value, n, what) {
  if (!Number.isInteger(value) || value < 0 || value >= n) {
    throw new RangeError(`${what} is a frame 0 .. ${n - 1}, not ${value}`);
  }
  return value;
}

// The frames of one sentence still to make: the slider's frame first, then outward from it, the side
// it last moved to first. `moveTo` (the slider moved) reorders what is left; a frame is never made twice.
export class FrameQueue {
  constructor(n, current, made = []) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`a sentence has one frame or more, not ${n}`);
    this.n = n;
    this.current = index(current, n, "the current frame");
    this.step = 1;
    this.made = new Set();
    for (const i of made) this.done(i);          // frames the page has already (carried from another grid)
  }

  moveTo(current) {
    const i = index(current, this.n, "the current frame");
    if (i !== this.current) this.step = i > this.current ? 1 : -1;
    this.current = i;
  }

  // The next frame to make, or -1 when every one is made.
  next() {
    if (this.finished) return -1;
    return nearestFirst(this.n, this.current, this.step).find((i) => !this.made.has(i));
  }

  done(i) {
    this.made.add(index(i, this.n, "a made frame"));
  }

  get finished() {
    return this.made.size >= this.n;
  }
}

// `url` resolved against `here` (the worker's own URL), refused unless it is of the same origin: the
// explorer runs no code and reads no graph from elsewhere.
export function sameOrigin(url, here, what) {
  let resolved;
  try {
    resolved = new URL(url, here);
  } catch {
    throw new TypeError(`${what}'s URL ${JSON.stringify(url)} is not a URL`);
  }
  if (resolved.origin !== new URL(here).origin) {
    throw new TypeError(`${what}'s URL ${resolved.href} is not of this page's origin`);
  }
  return resolved.href;
}

// The threads the runtime gets: those asked for, or one where the page is not cross-origin isolated
// (no SharedArrayBuffer, so no WASM threads), with a note saying so.
export function wasmThreads(asked, isolated) {
  if (!Number.isInteger(asked) || asked < 1) throw new RangeError(`threads is a whole number >= 1, not ${asked}`);
  if (asked > 1 && !isolated) {
    const why = "the page is not cross-origin isolated, so the runtime has no shared memory";
    return { threads: 1, note: `one thread, not ${asked}: ${why}` };
  }
  return { threads: asked, note: "" };
}

// The bytes of a frame's noise arrays: the manifest's `noise` dims, "S" and "T" filled in.
export function noiseBytes(manifest, S, T) {
  const sizes = { S, T };
  const size = (dims) => dims.reduce((n, d) => n * (typeof d === "string" ? sizes[d] : d), 1);
  return manifest.noise.reduce((sum, { dims }) => sum + 4 * size(dims), 0);
}

// Why a sentence cannot be made into frames by this graph ("" when it can): its arrays' sizes, its
// samples and its memory, checked before anything runs.
export function sentenceProblem(manifest, { states, T, S, values }, maxNoiseBytes = MAX_NOISE_BYTES) {
  if (!Number.isInteger(T) || T < 1) return `a sentence has one token or more, not ${T}`;
  if (!(states instanceof Float32Array) || states.length !== T * manifest.hidden) {
    return `the states hold ${states && states.length} numbers, not T * hidden = ${T} * ${manifest.hidden}`;
  }
  if (Number.isInteger(manifest.n_samples) && S !== manifest.n_samples) {
    return `the graph draws ${manifest.n_samples} samples a frame, not ${S}`;
  }
  if (!Array.isArray(values) || !values.length) return "a sentence needs the hyperparameters of one frame or more";
  const bytes = noiseBytes(manifest, S, T);
  if (bytes > maxNoiseBytes) {
    const mb = (b) => `${Math.round(b / 2 ** 20)} MB`;
    return `a sentence of ${T} tokens is too long for the browser: its frames' noise alone is ${mb(bytes)}, `
      + `over ${mb(maxNoiseBytes)}`;
  }
  return "";
}

// `what`: the first line of the error's message (the runtime's run over several), else its name.
export function oneLine(what, error) {
  const raw = error instanceof Error ? error.message || error.name : String(error ?? "");
  const text = raw.trim().split("\n")[0].trim();
  return text ? `${what}: ${text}` : what;
}

// A frame's outputs as they can be posted, and the buffers to transfer: an array on shared memory (the
// threaded runtime's heap) or on part of a buffer is copied, since neither can be transferred.
export function transferable(outputs) {
  const posted = {};
  const buffers = [];
  for (const [name, { data, dims }] of Object.entries(outputs)) {
    const own = data.buffer instanceof ArrayBuffer && data.byteOffset === 0
      && data.byteLength === data.buffer.byteLength;
    const array = own && !buffers.includes(data.buffer) ? data : data.slice();
    buffers.push(array.buffer);
    posted[name] = { data: array, dims };
  }
  return { outputs: posted, buffers };
}

// The buffers of the typed arrays anywhere in `value` (a reduced frame: objects of typed arrays), each once:
// what a post transfers rather than copies. An array on shared memory, or on part of a buffer (the
// runtime's heap, which a transfer would take from it), is copied instead.
export function buffersOf(value, found = []) {
  if (ArrayBuffer.isView(value)) {
    const own = value.buffer instanceof ArrayBuffer && value.byteOffset === 0
      && value.byteLength === value.buffer.byteLength;
    if (own && !found.includes(value.buffer)) found.push(value.buffer);
  } else if (value && typeof value === "object") {
    for (const v of Object.values(value)) buffersOf(v, found);
  }
  return found;
}

// A new grid's frames, from the frames of a grid of the same base (bam_viz.live.grid.LiveGrid.base_key: the
// same states and noise) at the same hyperparameters: `values` each grid's frame i's (name -> value), `frames`
// the old grid's (null where not made). A value typed off the grid makes such a grid, of one frame more.
export function carried(oldValues, frames, newValues) {
  const key = (v) => JSON.stringify(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const made = new Map();
  oldValues.forEach((v, i) => { if (frames[i]) made.set(key(v), frames[i]); });
  return newValues.map((v) => made.get(key(v)) || null);
}
