// The payload a chart view shows, of those served as files (views/components.py). Each URL is fetched
// once. Its bytes are applied only while it is still the latest asked for, or while nothing is drawn
// yet; a rerun's new `meta` (captions, the server's slider values) is applied only to the bytes of its
// own URL, never to an older payload's (a new sentence's captions over the last sentence's charts);
// and a failed fetch of the latest is tried again, later each time: a busy server may drop one, and a
// page must not stay on the last sentence's charts until the next payload. Pure: tests/js/latest.test.mjs.

export const RETRIES = 4;
export const RETRY_MS = 500;

export class LatestPayload {
  // fetchBytes(url) -> Promise of a Uint8Array; apply(bytes, meta) draws them.
  constructor(fetchBytes, apply, { retries = RETRIES, retryMs = RETRY_MS, later = setTimeout } = {}) {
    Object.assign(this, { fetchBytes, apply, retries, retryMs, later });
    this.url = null;            // the latest asked for
    this.meta = {};
    this.bytes = null;          // what is drawn, and the URL they came from
    this.bytesUrl = null;
  }

  ask(url, meta) {
    this.meta = meta && typeof meta === "object" ? meta : {};
    if (url === this.url) {
      if (this.bytes && this.bytesUrl === url) this.apply(this.bytes, this.meta);
      return Promise.resolve();
    }
    this.url = url;
    return this.fetch(url, 0);
  }

  fetch(url, attempt) {
    let answer;
    try { answer = Promise.resolve(this.fetchBytes(url)); } catch (err) { answer = Promise.reject(err); }
    return answer
      .then((bytes) => {
        if (this.url !== url && this.bytes) return;      // a newer one was asked for: it replaces this one
        this.bytes = bytes;
        this.bytesUrl = url;
        this.apply(bytes, this.meta);
      })
      .catch((err) => {
        console.warn("bamviz: could not fetch the payload", url, String(err));
        if (this.url !== url || attempt >= this.retries) return;
        this.later(() => { if (this.url === url) this.fetch(url, attempt + 1); }, this.retryMs * (attempt + 1));
      });
  }
}
