// A release, or a poll for new frames, answered by the server's live route (views/live_route.py)
// without a run of the page: the summary's header names the route (`route`), and its answer names the
// summary's and the inside panel's payloads at the sliders' values, which the two views fetch as they
// fetch a run's (latest.js). Only the latest request's answer is applied: a student's next release
// supersedes the one still on its way. Pure: tests/js/route.test.mjs.

// The route's URL with the sliders' values (name -> number; the server takes the nearest on its grids).
export function routeQuery(url, values) {
  const finite = Object.entries(values || {}).filter(([, v]) => typeof v === "number" && Number.isFinite(v));
  return `${url}&${new URLSearchParams(finite.map(([k, v]) => [k, String(v)]))}`;
}

export class RouteClient {
  // fetchJson(url) -> Promise of the parsed answer; it rejects on a status other than 200.
  constructor(fetchJson) {
    this.fetchJson = fetchJson;
    this.seq = 0;
    this.answers = 0;           // answers applied (tests and benchmarks)
  }

  // Ask `url` for the charts at `values` and hand the answer to apply(answer) if no later request was made since.
  // Resolves true when applied, false when superseded; rejects when the route failed (the caller then
  // asks Streamlit for a run, as before the route).
  ask(url, values, apply) {
    const seq = ++this.seq;
    let answer;
    try { answer = Promise.resolve(this.fetchJson(routeQuery(url, values))); } catch (err) { answer = Promise.reject(err); }
    return answer.then((a) => {
      if (seq !== this.seq) return false;
      if (!a || typeof a.summary !== "string") throw new Error("the live route's answer names no summary");
      this.answers += 1;
      apply(a);
      return true;
    });
  }
}
