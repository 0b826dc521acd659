// The explorer's frames made in the student's browser: a module Web Worker
// (`new Worker(new URL("./frame_worker.js", import.meta.url), {type: "module"})`) that runs a model's
// frame graph (views.runtime.graph_url) with onnxruntime-web's WASM build (views.runtime.runtime_url),
// one frame at a time, the one the slider is at first. Messages in:
//
//   {type: "load", runtimeUrl, graphUrl, manifest, threads}   the runtime's module (runtime_url() +
//       ENTRY), the graph's file and its manifest (frame.json), the WASM threads wanted
//   {type: "sentence", id, states, T, S, seed, values, current, reduce?, made?}   states: a Float32Array (1,
//       T, hidden); values[i]: frame i's hyperparameters (name -> value); replaces the sentence being made;
//       made: the indices the page has already (frame_queue.js's carried), never made again;
//       reduce: frame.js's frameFromOutputs options with `rules` (what the page draws), else raw outputs
//   {type: "current", id, current}   the slider moved: what is left of sentence `id`, nearest it first
//
// and out:
//
//   {type: "loaded", threads, note, bytes, fetchMs, sessionMs}   note: why fewer threads than asked ("")
//   {type: "frame", id, index, outputs, ms}   outputs: name -> {data: Float32Array, dims}, buffers transferred
//   {type: "frame", id, index, frame, ms, reduceMs}   with `reduce`: frameFromOutputs's frame, reduced here so
//       that the page's main thread, which draws, never does it (160-190 ms at 128 tokens)
//   {type: "done", id}                        every frame of sentence `id` made
//   {type: "error", error, id?, index?}       one line; the sentence (or the graph) is given up
//
// A new sentence or a move takes effect between two frames, never during one. Every failure is posted.
import { createSession, runFrame } from "./engine.js";
import { frameFromOutputs } from "./frame.js";
import { buffersOf, FrameQueue, oneLine, sameOrigin, sentenceProblem, transferable, wasmThreads } from "./frame_queue.js";

let engine = null;        // {ort, session, manifest}: the loaded graph
let unloaded = "no frame graph: send \"load\" before a sentence";     // why engine is null
let work = null;          // {id, frame, values, queue}: the sentence being made
let pumping = false;
let inbox = Promise.resolve();   // messages handled one after another, in the order they came

const post = (message, transfer = []) => self.postMessage(message, transfer);
const failed = (error, more = {}) => post({ type: "error", error, ...more });

// A task's turn for the messages that came during a frame (a promise's `then` would run before them).
function messagesFirst() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

class LoadError extends Error {}          // a load's failure, its message already the line to post
const lineOf = (err) => (err instanceof LoadError ? err.message : oneLine("the frame worker failed", err));

async function load({ runtimeUrl, graphUrl, manifest, threads }) {
  if (!manifest || !Array.isArray(manifest.noise) || !Array.isArray(manifest.hyper)) {
    throw new LoadError("the manifest is not a frame graph's (frame.json): no noise or hyper");
  }
  const here = self.location.href;
  const entry = sameOrigin(runtimeUrl, here, "the runtime");
  const graph = sameOrigin(graphUrl, here, "the frame graph");
  const wanted = wasmThreads(threads, self.crossOriginIsolated === true);
  let ort;
  try {
    ort = await import(entry);
  } catch (err) {
    throw new LoadError(oneLine(`the browser runtime could not be loaded from ${entry}`, err));
  }
  ort.env.wasm.wasmPaths = new URL("./", entry).href;
  ort.env.wasm.numThreads = wanted.threads;
  ort.env.logLevel = "error";
  const fetched = performance.now();
  let bytes;
  try {
    const response = await fetch(graph);
    if (!response.ok) {
      throw new LoadError(`the frame graph could not be fetched from ${graph}: ${response.status} ${response.statusText}`.trim());
    }
    bytes = new Uint8Array(await response.arrayBuffer());
  } catch (err) {
    throw err instanceof LoadError ? err : new LoadError(oneLine(`the frame graph could not be fetched from ${graph}`, err));
  }
  if (Number.isInteger(manifest.graph_bytes) && bytes.length !== manifest.graph_bytes) {
    throw new LoadError(`the frame graph at ${graph} is ${bytes.length} bytes, not the ${manifest.graph_bytes} of its manifest: `
      + "cut short, or another model's");
  }
  const created = performance.now();
  let session;
  try {
    session = await createSession(ort, bytes);
  } catch (err) {
    throw new LoadError(oneLine(`onnxruntime-web cannot load the frame graph at ${graph}`, err));
  }
  engine = { ort, session, manifest };
  // the threads the runtime kept: it takes one itself where it finds no SharedArrayBuffer
  post({ type: "loaded", threads: ort.env.wasm.numThreads, note: wanted.note, bytes: bytes.length,
    fetchMs: created - fetched, sessionMs: performance.now() - created });
}

function sentence({ id, states, T, S, seed, values, current, reduce, made = [] }) {
  work = null;                                          // the last sentence's frames left are given up
  if (!engine) {
    failed(unloaded, { id });
    return;
  }
  const problem = sentenceProblem(engine.manifest, { states, T, S, values });
  if (problem) {
    failed(problem, { id });
    return;
  }
  let queue;
  try {
    queue = new FrameQueue(values.length, current, made);
  } catch (err) {
    failed(oneLine(`sentence ${id} cannot be made`, err), { id });
    return;
  }
  if (queue.finished) {
    post({ type: "done", id });
    return;
  }
  work = { id, frame: { states, T, S, seed }, values, reduce, queue };
  pump();
}

// Make the current sentence's frames one by one until none is left or the sentence is replaced.
async function pump() {
  if (pumping) return;
  pumping = true;
  try {
    for (;;) {
      await messagesFirst();
      const w = work;
      if (!w) return;
      const index = w.queue.next();
      const started = performance.now();
      let outputs;
      try {
        outputs = await runFrame(engine.ort, engine.session, engine.manifest, { ...w.frame, hyper: w.values[index] });
      } catch (err) {
        if (work === w) work = null;
        failed(oneLine(`frame ${index} of sentence ${w.id} failed`, err), { id: w.id, index });
        continue;
      }
      w.queue.done(index);
      const ran = performance.now();
      if (w.reduce) {
        let frame;
        try {
          frame = frameFromOutputs(outputs, w.reduce.rules, w.reduce);
        } catch (err) {
          if (work === w) work = null;
          failed(oneLine(`frame ${index} could not be read`, err), { id: w.id, index });
          continue;
        }
        const reduceMs = performance.now() - ran;
        post({ type: "frame", id: w.id, index, frame, ms: ran - started, reduceMs }, buffersOf(frame));
      } else {
        const sent = transferable(outputs);
        post({ type: "frame", id: w.id, index, outputs: sent.outputs, ms: ran - started }, sent.buffers);
      }
      if (w.queue.finished) {
        if (work === w) work = null;
        post({ type: "done", id: w.id });
      }
    }
  } finally {
    pumping = false;
  }
}

async function handle(message) {
  const type = message && message.type;
  if (type === "load") {
    work = null;
    engine = null;
    try {
      await load(message);
    } catch (err) {
      unloaded = `no frame graph: its load failed (${lineOf(err)})`;
      throw err;
    }
  } else if (type === "sentence") {
    sentence(message);
  } else if (type === "current") {
    if (work && work.id === message.id) work.queue.moveTo(message.current);
  } else {
    throw new TypeError(`a message is "load", "sentence" or "current", not ${JSON.stringify(type)}`);
  }
}

self.onmessage = (event) => {
  const message = event.data;
  const about = message && message.id !== undefined ? { id: message.id } : {};
  inbox = inbox.then(() => handle(message)).catch((err) => {
    failed(lineOf(err), about);
  });
};
self.onunhandledrejection = (event) => failed(oneLine("the frame worker failed", event.reason));
