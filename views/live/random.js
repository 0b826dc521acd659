// The counter-based uniforms the library makes, bit for bit: the definition, and why it is what it
// is, lives in bam_viz/core/portable_random.py; tests/js/random.test.mjs holds the two equal on
// numbers Python wrote (tests/js/fixtures/random.json). Element n of draw `site` of a pass seeded
// with `seed` depends only on (seed, site, n), so a frame's noise is made here without a server.
// Uint32 arithmetic is Math.imul and `>>> 0`: every intermediate stays a 32-bit integer.

const GOLDEN = 0x9e3779b9;
const SITE = 0x85ebca6b;
const STREAM = 2 ** 32;                 // numbers in one draw
const SEEDS = 2n ** 63n;                // seeds are 0 <= seed < 2**63

// Wellons' lowbias32 hash of a uint32 (portable_random.mix32).
export function mix32(x) {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

// [lo, hi]: the seed's low and high 32 bits, from a Number (a safe integer) or a BigInt.
function seedWords(seed) {
  if (typeof seed === "bigint") {
    if (seed < 0n || seed >= SEEDS) throw new RangeError(`a seed is 0 <= seed < 2**63, not ${seed}`);
    return [Number(seed & 0xffffffffn), Number(seed >> 32n)];
  }
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`a seed is a whole number >= 0, not ${seed}`);
  return [seed % STREAM, Math.floor(seed / STREAM)];
}

// The 32-bit key of draw `site` in a pass seeded with `seed` (portable_random.stream_key).
export function streamKey(seed, site) {
  const [lo, hi] = seedWords(seed);
  return mix32(mix32(lo ^ mix32((hi + GOLDEN) >>> 0)) ^ mix32((site + SITE) >>> 0));
}

// Elements start .. start + count - 1 of draw `site`'s stream: float32 in (0, 1), never 0 or 1.
export function uniforms(seed, site, count, start = 0) {
  if (!Number.isSafeInteger(site) || site < 0) throw new RangeError(`a site is a whole number >= 0, not ${site}`);
  if (!Number.isSafeInteger(count) || !Number.isSafeInteger(start) || count < 0 || start < 0
      || start + count > STREAM) {
    throw new RangeError(`a draw holds numbers 0 .. 2**32 - 1, not ${start} .. ${start + count - 1}`);
  }
  const key = streamKey(seed, site);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    const h = mix32((mix32((start + i) ^ key) + key) >>> 0);
    out[i] = ((h >>> 9) + 0.5) * 1.1920928955078125e-7;  // 2**-23: exact in float32, in [2**-24, 1 - 2**-24]
  }
  return out;
}
