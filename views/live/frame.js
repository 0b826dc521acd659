// A frame made in the browser: the outputs of a frame graph (bam_viz/inference/graph.py, run by
// engine.js's runFrame) reduced to what bam_viz/live/frames.py's make_frame reduces an explain() result
// to, and packed into the arrays bam_viz/live/payloads.py sends (_summary_arrays, and the frame's part of
// inside_payload). The definitions are Python's, each named where it is followed; tests/js/frame.test.mjs
// holds the two equal on numbers Python wrote (tests/js/fixtures/frame.json). Pure functions, no DOM;
// arrays are typed and row-major. Statistics in float64, from the graph's float32.
//
// Python's facts come in `rules`, bam_viz.live.frames.frame_rules() as the server sends it: `stats` (the
// columns of a frame's stats, in their order), `map_samples` (sampled maps kept), `map_kinds` (the maps
// a frame keeps before them), `map_panels` (the inside maps' panels before the samples),
// `mi_rounding`, `float32_limit`, `quantiles` and `samples_needed` (each Monte Carlo error's, by estimator).

// What this file reads of `rules`, each checked present: a missing number would not throw, it would
// compare false and quietly keep an error the server calls not estimable.
const RULES = ["stats", "map_samples", "map_kinds", "map_panels", "mi_rounding", "float32_limit", "quantiles",
  "samples_needed"];
const ERRORS = ["p_target", "gap", "gap_softmax", "mutual_information"];     // in samples_needed

function checkRules(rules) {
  const missing = RULES.filter((k) => !rules || rules[k] === undefined || rules[k] === null);
  const needed = (rules && rules.samples_needed) || {};
  missing.push(...ERRORS.filter((q) => !Number.isInteger(needed[q])).map((q) => `samples_needed.${q}`));
  if (missing.length) throw new RangeError(`the frame rules lack ${missing.join(", ")}`);
}

const product = (dims) => dims.reduce((n, d) => n * d, 1);

function checkDims(output, want, name) {
  if (!output || !Array.isArray(output.dims) || output.dims.length !== want.length
      || output.dims.some((d, k) => want[k] !== undefined && d !== want[k]) || output.data.length !== product(output.dims)) {
    throw new RangeError(`the graph's ${name} is ${output ? JSON.stringify(output.dims) : "missing"}, not ${JSON.stringify(want)}`);
  }
  return output.dims;
}

// ---- the predictive distribution's numbers (bam_viz.core.metrics) ---------------------------------

// -sum p log p over `n` numbers of `p` from `start`, 0 log 0 = 0 (metrics.entropy).
function entropy(p, start, n) {
  let h = 0;
  for (let c = 0; c < n; c++) {
    const v = p[start + c];
    if (v > 0) h -= v * Math.log(v);
  }
  return h;
}

// {plugIn, replicates}: metrics._mi_replicates of (S, C) samples `p` (float64); replicates null under
// the jackknife's samples.
function miReplicates(p, S, C, rules) {
  const rounded = (mi) => (mi < rules.mi_rounding ? 0 : mi);
  const mean = new Float64Array(C);
  const sum = new Float64Array(C);
  const h = new Float64Array(S);
  let hSum = 0;
  for (let s = 0; s < S; s++) {
    for (let c = 0; c < C; c++) sum[c] += p[s * C + c];
    h[s] = entropy(p, s * C, C);
    hSum += h[s];
  }
  for (let c = 0; c < C; c++) mean[c] = sum[c] / S;
  const plugIn = rounded(entropy(mean, 0, C) - hSum / S);
  if (S < rules.samples_needed.mutual_information) return { plugIn, replicates: null };
  const replicates = new Float64Array(S);
  const without = new Float64Array(C);
  for (let s = 0; s < S; s++) {
    for (let c = 0; c < C; c++) without[c] = (sum[c] - p[s * C + c]) / (S - 1);
    replicates[s] = rounded(entropy(without, 0, C) - (hSum - h[s]) / (S - 1));
  }
  return { plugIn, replicates };
}

const meanOf = (x) => x.reduce((a, v) => a + v, 0) / x.length;

// sqrt((n - 1) / n sum (x - mean x)^2): the jackknife's SE of replicates x (Efron & Tibshirani 1993, ch. 11).
function jackknifeSe(x) {
  const m = meanOf(x);
  let ss = 0;
  for (const v of x) ss += (v - m) ** 2;
  return Math.sqrt(((x.length - 1) / x.length) * ss);
}

// {plugIn, mi, se, lo, hi}: the plug-in MI, metrics.mutual_information_jackknife and mutual_information_interval at multiplier z.
function mutualInformation(p, S, C, z, rules) {
  const { plugIn, replicates } = miReplicates(p, S, C, rules);
  if (!replicates) return { plugIn, mi: plugIn, se: NaN, lo: NaN, hi: NaN };
  const mi = S * plugIn - (S - 1) * meanOf(replicates);
  const se = jackknifeSe(replicates);
  // The log scale where every replicate and the estimate are positive, else the plain one.
  if (!(mi > 0 && replicates.every((r) => r > 0))) return { plugIn, mi, se, lo: mi - z * se, hi: mi + z * se };
  const seLog = jackknifeSe(replicates.map(Math.log));
  return { plugIn, mi, se, lo: mi * Math.exp(-z * seLog), hi: mi * Math.exp(z * seLog) };
}

// Sample sd (ddof 1) / sqrt(n) of n values (metrics.mean_se).
function meanSe(x) {
  const m = meanOf(x);
  let ss = 0;
  for (const v of x) ss += (v - m) ** 2;
  return Math.sqrt(ss / (x.length - 1)) / Math.sqrt(x.length);
}

// The Deng gap's SE from each sample's f(z_s) and f at the mean weights without it (metrics.jackknife_gap_se):
// the gap without sample s is (sum p - p_s) / (S - 1) - loo_s.
function jackknifeGapSe(p, loo) {
  const S = p.length;
  const sum = p.reduce((a, v) => a + v, 0);
  return jackknifeSe(p.map((v, s) => (sum - v) / (S - 1) - loo[s]));
}

// No Monte Carlo error at all (result._exact): a model with no random layer, or S identical samples (two
// or more: one sample is not a sample's repeat).
function exact(p, S, C, stochastic) {
  if (!stochastic) return true;
  if (S < 2) return false;
  for (let k = C; k < S * C; k++) if (p[k] !== p[k % C]) return false;
  return true;
}

const column = (x, S, C, c) => Float64Array.from({ length: S }, (_, s) => x[s * C + c]);

// (C * rules.stats.length) bam_viz.live.frames.class_stats: row c the headline with class c as the target.
// `p` (S, C) f(z_s); `mean` (C,) f(E[w]); `loo` (S, C) f at each leave-one-out mean, or null where no
// attention is drawn (then f(E[w]) is the deterministic pass `soft` and Deng's gap is the softmax gap).
function classStats({ p, S, C, mean, loo, soft, stochastic, intervalZ }, rules) {
  const n = rules.stats.length;
  const needed = rules.samples_needed;
  const out = new Float64Array(C * n);
  const isExact = exact(p, S, C, stochastic);
  const mi = mutualInformation(p, S, C, intervalZ, rules);
  const mc = new Float64Array(C);                   // E[f(z)]
  let expected = 0;                                  // E_z H[p(y|x,z)]
  for (let s = 0; s < S; s++) {
    for (let c = 0; c < C; c++) mc[c] += p[s * C + c];
    expected += entropy(p, s * C, C);
  }
  mc.forEach((v, c) => { mc[c] = v / S; });
  expected /= S;
  // result._mi_error and ExplainResult.mutual_information_interval: exact is 0, too few samples NaN
  const miSe = isExact ? 0 : S >= needed.mutual_information ? mi.se : NaN;
  let [miLo, miHi] = stochastic ? [mi.lo, mi.hi] : [0, 0];
  if (!(Number.isFinite(miLo) && Number.isFinite(miHi))) [miLo, miHi] = [NaN, NaN];
  for (let c = 0; c < C; c++) {
    const pc = column(p, S, C, c);
    // result.class_standard_errors: 0 where exact, NaN under the samples each error needs
    const error = (estimator, se) => (isExact ? 0 : S < needed[estimator] ? NaN : se());
    const paired = () => meanSe(pc.map((v) => v - soft[c]));
    const row = {
      p_mc: mc[c], p_se: error("p_target", () => meanSe(pc)), p_mean_attention: mean[c], gap: mc[c] - mean[c],
      gap_se: error("gap", () => (loo ? jackknifeGapSe(pc, column(loo, S, C, c)) : paired())),
      p_softmax: soft[c], gap_softmax: mc[c] - soft[c], gap_softmax_se: error("gap_softmax", paired),
      mi: mi.mi, mi_se: miSe, mi_lo: miLo, mi_hi: miHi,
      predictive_entropy: entropy(mc, 0, C), expected_entropy: expected, mi_plugin: mi.plugIn,
    };
    rules.stats.forEach((name, k) => {
      if (!(name in row)) throw new RangeError(`the frame rules' stats name ${name}, which frame.js does not make`);
      out[c * n + k] = row[name];
    });
  }
  return out;
}

// ---- the sampled weights ----------------------------------------------------------------------------

// (cells) each cell's sum over the S samples of (w - mean)^2, of weights `w` (S, cells): two passes, in
// the order of memory.
function squaredDeviations(w, S, cells) {
  const mean = new Float64Array(cells);
  for (let s = 0; s < S; s++) for (let k = 0; k < cells; k++) mean[k] += w[s * cells + k];
  for (let k = 0; k < cells; k++) mean[k] /= S;
  const squares = new Float64Array(cells);
  for (let s = 0; s < S; s++) {
    const start = s * cells;
    for (let k = 0; k < cells; k++) {
      const d = w[start + k] - mean[k];
      squares[k] += d * d;
    }
  }
  return squares;
}

// (H) ExplainResult.spread of one layer: the mean over queries and keys of the weights' sd (ddof 1).
function layerSpread(w, S, H, T) {
  const cells = H * T * T;
  const squares = squaredDeviations(w, S, cells);
  const out = new Float64Array(H);
  for (let k = 0; k < cells; k++) out[Math.floor(k / (T * T))] += Math.sqrt(squares[k] / (S - 1));
  return out.map((v) => v / (T * T));
}

// numpy's x.std(ddof=1) of the numbers x, 0 for one number (as window_maps and rows.map_summary have it).
function sd(x) {
  const n = x.length;
  if (n < 2) return 0;
  let sum = 0;
  for (const v of x) sum += v;
  const mean = sum / n;
  let squares = 0;
  for (const v of x) squares += (v - mean) * (v - mean);
  return Math.sqrt(squares / (n - 1));
}

// frames.quantiles: the q quantile of sorted numbers, linear between its neighbours as torch.quantile.
function torchQuantile(sorted, q) {
  const n = sorted.length;
  const pos = q * (n - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, n - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

// (H * (kinds + k) * W * W) one layer's maps in the token `window` (frames.window_maps): the rules'
// map_kinds, E[w], sd (ddof 1, 0 for one sample) and the rules' two quantiles, then the first
// k = min(map_samples, S) samples.
function windowMaps(w, S, H, T, window, rules) {
  const W = window.length;
  const kinds = rules.map_kinds.length;
  const k = Math.min(rules.map_samples, S);
  const panels = kinds + k;
  const size = W * W;
  const out = new Float32Array(H * panels * size);
  const drawn = new Float64Array(S);
  const sorted = new Float64Array(S);
  for (let h = 0; h < H; h++) {
    for (let a = 0; a < W; a++) {
      for (let b = 0; b < W; b++) {
        const cell = (h * T + window[a]) * T + window[b];
        let sum = 0;
        for (let s = 0; s < S; s++) {
          drawn[s] = w[s * H * T * T + cell];
          sum += drawn[s];
        }
        sorted.set(drawn);
        sorted.sort();
        const at = (h * panels * W + a) * W + b;                // panel 0 of this cell; panel m is m * size on
        out[at] = sum / S;
        out[at + size] = sd(drawn);
        out[at + 2 * size] = torchQuantile(sorted, rules.quantiles[0]);
        out[at + 3 * size] = torchQuantile(sorted, rules.quantiles[1]);
        for (let m = 0; m < k; m++) out[at + (kinds + m) * size] = drawn[m];
      }
    }
  }
  return out;
}

// rows.finite of one number: NaN 0, inf the float32 maximum, -inf 0.
const FLOAT32_MAX = 3.4028234663852886e38;
const finite = (v) => (Number.isNaN(v) ? 0 : v === Infinity ? FLOAT32_MAX : v === -Infinity ? 0 : v);

// (H * T * T) finite(ExplainResult._layer_mean) of one layer's weights `w` (S, H, T, T): the float64 mean
// over the samples rounded to float32.
function layerMean(w, S, cells) {
  const sum = new Float64Array(cells);
  for (let s = 0; s < S; s++) for (let k = 0; k < cells; k++) sum[k] += w[s * cells + k];
  return sum.map((v) => finite(Math.fround(v / S)));
}

// caption_rows(rows.row_summary(mean, w, window)) of one layer, each (H * T) row-major (head, query) over
// every query: E[w]'s first largest key among all T (`top`), E[w] there, the SE (sd / sqrt S, 0 for one
// sample) and the rules' quantiles (numpy's) of that key's finite draws, and the row's E[w] summed over the
// window's keys (`share`). `mean` is layerMean's.
function rowSummary(mean, w, S, H, T, window, rules) {
  const rows = H * T;
  const out = { top: new Int16Array(rows) };
  for (const name of ["mean", "se", "lo", "hi", "share"]) out[name] = new Float32Array(rows);
  const drawn = new Float64Array(S);
  for (let r = 0; r < rows; r++) {
    const start = r * T;
    let top = 0;
    for (let k = 1; k < T; k++) if (mean[start + k] > mean[start + top]) top = k;
    for (let s = 0; s < S; s++) drawn[s] = finite(w[s * rows * T + start + top]);
    out.top[r] = top;
    out.mean[r] = mean[start + top];
    out.se[r] = sd(drawn) / Math.sqrt(S);
    drawn.sort();
    out.lo[r] = numpyQuantile(drawn, rules.quantiles[0]);
    out.hi[r] = numpyQuantile(drawn, rules.quantiles[1]);
    out.share[r] = window.reduce((sum, t) => sum + mean[start + t], 0);
  }
  return out;
}

// rows.map_summary(mean, w, window) of one layer, each (H): over the window's block (queries and keys) the
// sd (ddof 1, 0 for one sample) of each cell's finite draws, the token indices (`query`, `key`) of its first
// largest in (query, key) order, that sd (`stdMax`) and the mean over the W * W cells (`stdMean`); and E[w]'s
// mean over the window's queries of the row's sum over the window's keys (`mapShare`, MapSummary.share).
function mapSummary(mean, w, S, H, T, window) {
  const W = window.length;
  const out = { query: new Int32Array(H), key: new Int32Array(H), stdMax: new Float64Array(H),
    stdMean: new Float64Array(H), mapShare: new Float64Array(H) };
  const drawn = new Float64Array(S);
  for (let h = 0; h < H; h++) {
    let [max, best, sum, share] = [-Infinity, 0, 0, 0];
    for (let a = 0; a < W; a++) {
      let row = 0;
      for (let b = 0; b < W; b++) {
        const cell = (h * T + window[a]) * T + window[b];
        for (let s = 0; s < S; s++) drawn[s] = finite(w[s * H * T * T + cell]);
        const std = sd(drawn);
        if (std > max) [max, best] = [std, a * W + b];
        sum += std;
        row += mean[cell];
      }
      share += row;
    }
    out.query[h] = window[Math.floor(best / W)];
    out.key[h] = window[best % W];
    out.stdMax[h] = max;
    out.stdMean[h] = sum / (W * W);
    out.mapShare[h] = share / W;
  }
  return out;
}

// [{layer, data, T}]: the graph's sampled weights, `weights_<layer>` (S, H, T, T), in layer order.
function sampledLayers(outputs, S, layers, heads) {
  const found = [];
  for (const name of Object.keys(outputs)) {
    const match = /^weights_(\d+)$/.exec(name);
    if (!match) continue;
    const layer = Number(match[1]);
    if (layer >= layers) throw new RangeError(`the graph's ${name} is past the model's ${layers} layers`);
    const dims = checkDims(outputs[name], [S, heads, undefined, undefined], name);
    if (dims[2] !== dims[3]) throw new RangeError(`the graph's ${name} is ${JSON.stringify(dims)}, not (S, H, T, T)`);
    found.push({ layer, data: outputs[name].data, T: dims[2] });
  }
  return found.sort((x, y) => x.layer - y.layer);
}

// A frame from one run of a frame graph (engine.js's runFrame: {name: {data, dims}}), as make_frame has it
// by `rules` (frame_rules()): {stats (C * rules.stats.length, float64, row c class c), pSamples (S * C),
// spread (layers * heads), maps {layer: (heads * (kinds + k) * W * W) float32}, rows {layer: {top, mean, se,
// lo, hi, share (heads * T): caption_rows(row_summary); query, key, stdMax, stdMean, mapShare (heads):
// map_summary}}}. `softmaxProbs` (C) f(softmax), the deterministic pass the server sends; `window` the token
// indices the maps and rows show; `stochastic` whether the model has a random layer (false: every error is
// exact, 0); `intervalZ` the MI interval's multiplier at S, the server's metrics.interval_multiplier(S).
// Layers the graph gives no weights of are deterministic: spread 0, no maps or rows.
export function frameFromOutputs(outputs, rules, { softmaxProbs, window, stochastic, intervalZ, layers, heads }) {
  checkRules(rules);
  const [S, C] = checkDims(outputs.sample_probs, [undefined, undefined], "sample_probs");
  if (!S) throw new RangeError("a frame needs one sample or more");
  if (!softmaxProbs || softmaxProbs.length !== C) throw new RangeError(`softmaxProbs holds ${softmaxProbs ? softmaxProbs.length : 0} classes, not ${C}`);
  const p = Float64Array.from(outputs.sample_probs.data);
  const drawn = "loo_probs" in outputs;
  if (drawn) {
    checkDims(outputs.mean_probs, [C], "mean_probs");
    checkDims(outputs.loo_probs, [S, C], "loo_probs");
  }
  const soft = Float64Array.from(softmaxProbs);
  const stats = classStats({
    p, S, C, soft, stochastic: Boolean(stochastic), intervalZ: typeof intervalZ === "number" ? intervalZ : NaN,
    mean: drawn ? Float64Array.from(outputs.mean_probs.data) : soft,
    loo: drawn ? Float64Array.from(outputs.loo_probs.data) : null,
  }, rules);
  const spread = new Float64Array(layers * heads);
  const maps = {};
  const rows = {};
  for (const { layer, data, T } of sampledLayers(outputs, S, layers, heads)) {
    if (!window.every((t) => Number.isInteger(t) && t >= 0 && t < T)) throw new RangeError(`the window ${window} is not in 0 .. ${T - 1}`);
    if (S > 1) spread.set(layerSpread(data, S, heads, T), layer * heads);   // one sample: 0, as Python
    maps[layer] = windowMaps(data, S, heads, T, window, rules);
    const mean = layerMean(data, S, heads * T * T);
    rows[layer] = { ...rowSummary(mean, data, S, heads, T, window, rules), ...mapSummary(mean, data, S, heads, T, window) };
  }
  return { stats, pSamples: Float32Array.from(outputs.sample_probs.data), spread, maps, rows };
}

// ---- the payloads' arrays ---------------------------------------------------------------------------

// wire.finite32: float32 with NaN kept and anything past the rules' float32_limit clipped to it.
const finite32 = (x, limit) => Float32Array.from(x, (v) => Math.min(limit, Math.max(-limit, v)));

// An array as payload.js's readArrays gives one: what the page's charts read.
const array = (data, shape) => ({ data, shape, scale: 1 });

// numpy.quantile's default ("linear", Hyndman & Fan's 7) of sorted numbers, with its lerp from the
// nearer end.
function numpyQuantile(sorted, q) {
  const n = sorted.length;
  const virtual = (n - 1) * q;
  if (virtual >= n - 1) return sorted[n - 1];
  const lo = Math.floor(virtual);
  const t = virtual - lo;
  const a = sorted[lo];
  const b = sorted[lo + 1];
  return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

const samplesOf = (frame, C) => frame.pSamples.length / C;

// payloads._summary_arrays for class `target`: {stats (G, rules.stats), p_samples (G, S), class_probs (G,
// 4, C): E[f(z)], the samples' quantiles (the rules') and f(softmax) of every class}, float32; a frame not
// made (null) is a row of NaN, and a frame of fewer samples than S ends its p_samples row in NaN.
export function summaryArrays(frames, rules, target, G, S, C) {
  checkRules(rules);
  if (!Number.isInteger(target) || target < 0 || target >= C) throw new RangeError(`the target is a class 0 .. ${C - 1}, not ${target}`);
  const n = rules.stats.length;
  const [mc, soft] = [rules.stats.indexOf("p_mc"), rules.stats.indexOf("p_softmax")];
  const stats = new Float64Array(G * n).fill(NaN);
  const p = new Float64Array(G * S).fill(NaN);
  const classes = new Float64Array(G * 4 * C).fill(NaN);
  frames.slice(0, G).forEach((f, i) => {
    if (!f) return;
    const drawn = samplesOf(f, C);
    stats.set(f.stats.subarray(target * n, (target + 1) * n), i * n);
    for (let s = 0; s < Math.min(drawn, S); s++) p[i * S + s] = f.pSamples[s * C + target];
    for (let c = 0; c < C; c++) {
      const sorted = Float64Array.from({ length: drawn }, (_, s) => f.pSamples[s * C + c]).sort();
      const at = (row) => (i * 4 + row) * C + c;
      classes[at(0)] = f.stats[c * n + mc];
      classes[at(1)] = numpyQuantile(sorted, rules.quantiles[0]);
      classes[at(2)] = numpyQuantile(sorted, rules.quantiles[1]);
      classes[at(3)] = f.stats[c * n + soft];
    }
  });
  const limit = rules.float32_limit;
  return { stats: array(finite32(stats, limit), [G, n]), p_samples: array(finite32(p, limit), [G, S]),
    class_probs: array(finite32(classes, limit), [G, 4, C]) };
}

// (4 * W) grid.posterior_row: E[w], its 5% and 95% quantiles and softmax(psi) over the window's keys for
// `query`, from the frame's maps of the layer (their row of the window's first query where `query` is not
// in the window, as Python has it), softmax(psi) four times where the frame has none.
function posteriorRow(frame, layer, head, query, window, softmaxRow, panels) {
  const W = window.length;
  const out = new Float64Array(4 * W);
  const m = frame && frame.maps[layer];
  const row = Math.max(0, window.indexOf(query));
  const rows = m ? [0, 2, 3].map((kind) => ((head * panels + kind) * W + row) * W) : null;
  for (let b = 0; b < W; b++) {
    for (let r = 0; r < 3; r++) out[r * W + b] = m ? m[rows[r] + b] : softmaxRow[b];
    out[3 * W + b] = softmaxRow[b];
  }
  return out;
}

// The frame-dependent arrays of payloads.inside_payload for one layer, head and query, by `rules`: {maps
// (G, map_panels + k, W, W): E[w], softmax(psi), sd and k = min(map_samples, nSamples) samples, post_row
// (G, 4, W), spread (G, layers, heads)}, float32. `softmax` (T * T) is the head's softmax(psi), which the
// server sends. A frame not made has zero maps beside softmax(psi) and NaN rows; a layer a frame drew no
// weights in shows softmax(psi) as its mean and samples, sd 0.
export function insideArrays(frames, rules, { layer, head, query, window, softmax, layers, heads, nSamples }) {
  checkRules(rules);
  const G = frames.length;
  const W = window.length;
  const T = Math.round(Math.sqrt(softmax.length));
  if (T * T !== softmax.length || !window.every((t) => t >= 0 && t < T)) throw new RangeError(`softmax is not (T, T) over the window ${window}`);
  const kinds = rules.map_kinds.length;
  const first = rules.map_panels;                 // the panels before the samples
  const k = Math.min(rules.map_samples, nSamples);
  const panels = first + k;
  const size = W * W;
  const softmaxMap = Float32Array.from({ length: size }, (_, j) => softmax[window[Math.floor(j / W)] * T + window[j % W]]);
  const softmaxRow = Float64Array.from(window, (t) => softmax[query * T + t]);
  const maps = new Float32Array(G * panels * size);
  const postRow = new Float64Array(G * 4 * W).fill(NaN);
  const spread = new Float64Array(G * layers * heads).fill(NaN);
  const at = (i, panel) => (i * panels + panel) * size;
  frames.forEach((f, i) => {
    maps.set(softmaxMap, at(i, 1));
    if (!f) return;
    spread.set(f.spread, i * layers * heads);
    const m = f.maps[layer];
    const framePanels = m ? m.length / (heads * size) : 0;
    postRow.set(posteriorRow(f, layer, head, query, window, softmaxRow, framePanels), i * 4 * W);
    if (!m) {
      maps.set(softmaxMap, at(i, 0));
      for (let s = 0; s < k; s++) maps.set(softmaxMap, at(i, first + s));
      return;
    }
    const panel = (kind) => m.subarray((head * framePanels + kind) * size, (head * framePanels + kind + 1) * size);
    maps.set(panel(0), at(i, 0));
    maps.set(panel(1), at(i, 2));
    for (let s = 0; s < Math.min(k, framePanels - kinds); s++) maps.set(panel(kinds + s), at(i, first + s));
  });
  const limit = rules.float32_limit;
  return { maps: array(maps, [G, panels, W, W]), post_row: array(finite32(postRow, limit), [G, 4, W]),
    spread: array(finite32(spread, limit), [G, layers, heads]) };
}
