// Runs one frame of an exported graph in onnxruntime-web's WASM backend, for tests/test_frame_graph.py:
//   node tests/js/tools/run_frame.mjs DIR [THREADS]
// DIR holds frame.onnx, frame.json (the manifest), case.json ({T, S, seed, hyper}) and states.f32
// (the (1, T, hidden) states, little-endian float32); each output is written to DIR/out_<name>.f32 and
// their dims to DIR/out.json. The frame goes through views/live/engine.js, as in the page.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import * as ort from "onnxruntime-web";

import { createSession, runFrame } from "../../../views/live/engine.js";

const [dir, threads = "1"] = process.argv.slice(2);
ort.env.wasm.numThreads = Number(threads);
const read = (name) => readFileSync(join(dir, name));
const manifest = JSON.parse(read("frame.json").toString("utf8"));
const frame = JSON.parse(read("case.json").toString("utf8"));
const raw = read("states.f32");
frame.states = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
frame.seed = BigInt(frame.seed);
const session = await createSession(ort, read("frame.onnx"));
const started = performance.now();
const out = await runFrame(ort, session, manifest, frame);
const ms = performance.now() - started;
const dims = {};
for (const [name, { data, dims: d }] of Object.entries(out)) {
  writeFileSync(join(dir, `out_${name}.f32`), Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  dims[name] = d;
}
writeFileSync(join(dir, "out.json"), JSON.stringify({ dims, ms }));
await session.release();
