import assert from "node:assert/strict";
import { test } from "node:test";

import { RouteClient, routeQuery } from "../../views/live/route.js";

// A route whose answers the test releases one by one, in any order, or fails.
function route() {
  const pending = new Map();
  const asked = [];
  const fetchJson = (url) => new Promise((resolve, reject) => {
    asked.push(url);
    pending.set(url, { resolve, reject });
  });
  const answer = async (url, body = { summary: `s:${url}` }, ok = true) => {
    const p = pending.get(url);
    pending.delete(url);
    if (ok) p.resolve(body); else p.reject(new Error("404 Not Found"));
    await new Promise((r) => setTimeout(r, 0));
  };
  return { fetchJson, answer, asked };
}

test("the query names the token's route and the sliders' values, finite numbers only", () => {
  assert.equal(routeQuery("/_bamviz/live?t=abc", { shape_k: 4.43, beta: 1 }), "/_bamviz/live?t=abc&shape_k=4.43&beta=1");
  assert.equal(routeQuery("/b/_bamviz/live?t=x", { sigma: 0.1, k: NaN, s: "3", z: null }), "/b/_bamviz/live?t=x&sigma=0.1");
  assert.equal(routeQuery("/_bamviz/live?t=x", { "a&b": 1 }), "/_bamviz/live?t=x&a%26b=1");
});

test("an answer is applied while no later release was asked for", async () => {
  const r = route();
  const client = new RouteClient(r.fetchJson);
  const applied = [];
  const done = client.ask("/r?t=a", { k: 4, beta: 1 }, (a) => applied.push(a.summary));
  await r.answer("/r?t=a&k=4&beta=1");
  assert.equal(await done, true);
  assert.deepEqual(applied, ["s:/r?t=a&k=4&beta=1"]);
  assert.equal(client.answers, 1);
});

test("a later release supersedes an answer still on its way, whichever comes back first", async () => {
  const r = route();
  const client = new RouteClient(r.fetchJson);
  const applied = [];
  const first = client.ask("/r?t=a", { k: 4, beta: 0 }, (a) => applied.push(a.summary));
  const second = client.ask("/r?t=a", { k: 5, beta: 0 }, (a) => applied.push(a.summary));
  await r.answer("/r?t=a&k=5&beta=0");
  await r.answer("/r?t=a&k=4&beta=0");                   // the older one, late: dropped
  assert.equal(await second, true);
  assert.equal(await first, false);
  assert.deepEqual(applied, ["s:/r?t=a&k=5&beta=0"]);
});

test("a failed route rejects, so that the page asks for a run instead; an answer without a summary too", async () => {
  const r = route();
  const client = new RouteClient(r.fetchJson);
  const failed = assert.rejects(client.ask("/r?t=gone", { k: 1, beta: 0 }, () => assert.fail("applied")), /404/);
  await r.answer("/r?t=gone&k=1&beta=0", null, false);
  await failed;
  const odd = assert.rejects(client.ask("/r?t=a", { k: 2, beta: 0 }, () => assert.fail("applied")), /names no summary/);
  await r.answer("/r?t=a&k=2&beta=0", { error: "no summary" });
  await odd;
  const thrown = new RouteClient(() => { throw new Error("offline"); }).ask("/r?t=a", { k: 0, beta: 0 }, () => {});
  await assert.rejects(thrown, /offline/);
  assert.equal(client.answers, 0);
});
