// The payload's wire format (bam_viz/live/wire.py): a little-endian uint32 header length N, N bytes
// of JSON, then the arrays (the blob at 4 + N), each float32 ("f4") or a value in [0, 1] times 65535
// ("u2"). Pure functions: tests/js/payload.test.mjs.

export function toBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

export function readHeader(bytes) {
  if (!bytes || bytes.byteLength < 4) throw new Error("payload too short");
  const n = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
  if (4 + n > bytes.byteLength) throw new Error("payload header runs past its end");
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
  if (!header || typeof header !== "object") throw new Error("payload header is not an object");
  return { header, blobStart: 4 + n };
}

// Typed views on an aligned copy of the bytes: {name: {data, shape, scale}}; value = data[k] * scale.
export function readArrays(bytes, header, blobStart) {
  const copy = bytes.slice();                 // aligned (byteOffset 0), and ours to keep
  const out = {};
  const specs = header.arrays && typeof header.arrays === "object" ? header.arrays : {};
  for (const [name, spec] of Object.entries(specs)) {
    try {
      const shape = Array.isArray(spec.shape) ? spec.shape.map((d) => Math.max(0, d | 0)) : [];
      const count = shape.reduce((a, b) => a * b, 1);
      const u2 = spec.dtype === "u2";
      const size = u2 ? 2 : 4;
      const start = blobStart + (spec.offset | 0);
      if (start < 0 || start + count * size > copy.byteLength) continue;
      const data = start % size === 0
        ? new (u2 ? Uint16Array : Float32Array)(copy.buffer, start, count)
        : new (u2 ? Uint16Array : Float32Array)(copy.slice(start, start + count * size).buffer);
      out[name] = { data, shape, scale: u2 ? 1 / 65535 : 1 };
    } catch (err) {
      console.warn(`bamviz: array ${name} unreadable`, err);
    }
  }
  return out;
}

// Flat offset of arr[i0][i1]..., or -1 when out of range / wrong rank prefix.
export function offsetOf(arr, ...index) {
  if (!arr) return -1;
  let off = 0;
  for (let d = 0; d < arr.shape.length; d++) {
    const i = d < index.length ? index[d] : 0;
    if (!(i >= 0 && i < arr.shape[d])) return -1;
    off = off * arr.shape[d] + i;
  }
  return off;
}

// The values arr[index...][0..n-1] (last axis) as a plain array, NaN-padded; NaN when missing.
export function row(arr, n, ...index) {
  const out = new Array(n).fill(NaN);
  const off = offsetOf(arr, ...index, 0);
  if (off < 0) return out;
  const m = Math.min(n, arr.shape[arr.shape.length - 1]);
  for (let k = 0; k < m; k++) out[k] = arr.data[off + k] * arr.scale;
  return out;
}
