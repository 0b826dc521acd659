import assert from "node:assert/strict";
import { test } from "node:test";

import { LatestPayload } from "../../views/live/latest.js";

// A server whose answers the test releases one by one, in any order, or fails.
function server() {
  const pending = new Map();
  const asked = [];
  const fetchBytes = (url) => new Promise((resolve, reject) => {
    asked.push(url);
    pending.set(url, { resolve, reject });
  });
  const answer = async (url, ok = true) => {
    const p = pending.get(url);
    pending.delete(url);
    if (ok) p.resolve(new TextEncoder().encode(url)); else p.reject(new Error("404 Not Found"));
    await new Promise((r) => setTimeout(r, 0));
  };
  return { fetchBytes, answer, asked };
}

function view(s, options = {}) {
  const drawn = [];
  const timers = [];
  const later = (fn, ms) => timers.push({ fn, ms });
  const latest = new LatestPayload(s.fetchBytes, (bytes, meta) => drawn.push([new TextDecoder().decode(bytes), meta]),
    { later, ...options });
  return { latest, drawn, timers };
}

test("each URL is fetched once, and a rerun's meta is applied to its bytes", async () => {
  const s = server();
  const { latest, drawn } = view(s);
  latest.ask("a", { m: 1 });
  latest.ask("a", { m: 2 });                            // still on its way: nothing to apply it to
  assert.deepEqual(s.asked, ["a"]);
  assert.deepEqual(drawn, []);
  await s.answer("a");
  assert.deepEqual(drawn, [["a", { m: 2 }]]);
  latest.ask("a", { m: 3 });
  assert.deepEqual(drawn.at(-1), ["a", { m: 3 }]);
  assert.deepEqual(s.asked, ["a"]);
});

test("a new payload's meta never goes on the last payload's bytes", async () => {
  const s = server();
  const { latest, drawn } = view(s);
  latest.ask("old", { sentence: "old" });
  await s.answer("old");
  latest.ask("new", { sentence: "new" });               // a new sentence: its file on the way
  latest.ask("new", { sentence: "new", caption: 2 });   // a poll before it arrives
  assert.deepEqual(drawn, [["old", { sentence: "old" }]]);
  await s.answer("new");
  assert.deepEqual(drawn.at(-1), ["new", { sentence: "new", caption: 2 }]);
});

test("an older answer arriving late is dropped once something is drawn, and drawn when nothing is", async () => {
  const s = server();
  const { latest, drawn } = view(s);
  latest.ask("1", {});
  latest.ask("2", {});
  await s.answer("1");                                  // nothing drawn yet: better than an empty panel
  await s.answer("2");
  assert.deepEqual(drawn.map(([b]) => b), ["1", "2"]);
  latest.ask("3", {});
  latest.ask("4", {});
  await s.answer("4");
  await s.answer("3");                                  // late, and superseded
  assert.deepEqual(drawn.map(([b]) => b), ["1", "2", "4"]);
});

test("a failed fetch of the latest is tried again, later each time, and given up after RETRIES", async () => {
  const s = server();
  const { latest, drawn, timers } = view(s, { retries: 2, retryMs: 100 });
  latest.ask("x", { m: 1 });
  await s.answer("x", false);
  assert.deepEqual(timers.map((t) => t.ms), [100]);
  timers.shift().fn();
  await s.answer("x", false);
  assert.deepEqual(timers.map((t) => t.ms), [200]);
  timers.shift().fn();
  await s.answer("x", true);
  assert.deepEqual(drawn, [["x", { m: 1 }]]);
  assert.deepEqual(s.asked, ["x", "x", "x"]);

  latest.ask("y", {});
  for (let k = 0; k < 3; k++) {
    await s.answer("y", false);
    if (timers.length) timers.shift().fn();
  }
  assert.equal(timers.length, 0);                       // two retries, then it waits for the next payload
  assert.deepEqual(s.asked.filter((u) => u === "y").length, 3);
});

test("a failure of a payload no longer the latest is not tried again", async () => {
  const s = server();
  const { latest, timers } = view(s);
  latest.ask("a", {});
  latest.ask("b", {});
  await s.answer("a", false);
  assert.equal(timers.length, 0);
  await s.answer("b", false);
  assert.equal(timers.length, 1);
  latest.ask("c", {});                                  // asked for meanwhile: the retry of b does nothing
  timers.shift().fn();
  assert.deepEqual(s.asked, ["a", "b", "c"]);
});
