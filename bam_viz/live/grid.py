"""The live explorer's data: one sentence at every value of its sliders, reduced to what the page
draws and packed as bytes, so that the browser moves the sliders without asking the server.

A `LiveGrid` holds one sentence, model, S and seed at every value of the posterior's slider (for
Weibull, `shape_k`: `POSTERIOR_PER_DECADE` values a decade) and of the prior-only slider (`beta`:
`PRIOR_PER_DECADE` a decade). Each posterior value is one `explain()` call, so a frame is exactly what
`explain()` gives at that value, reduced to a `Frame` (the headline's estimates and errors, the
per-sample predictions, spread, every stochastic head's maps in the token window, and the KL at
every prior value). In the app each page makes the frames itself (`FRAMES.in_browser`); the server makes
one only when asked (`frame`), and the payloads carry what the page's frame graph needs instead. Else
(the library's default) frames are made nearest to the current value first, in the background
(`bam_viz.live.scheduler`), while the page already draws the ones made.

What depends on the prior-only slider alone is cheap and made when the payload is packed: the
prior's draws for the selected query, its density, and the KL, which is closed form in the
deterministic pass. That pass does not read the hyperparameters (Mode.MEAN uses softmax(psi) in
every layer, whatever k), so one pass serves every (posterior, prior) pair. The prior's bars here
use that pass's prior, where `explain()` draws the prior of each sample's keys above the first
stochastic layer (for the first, the two agree).

A frame holds every class (`frames.class_stats`): the summary's class is picked when a payload is packed
(`bam_viz.live.payloads`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
import time

import numpy as np
import torch

from bam_viz.core.grids import with_value
from bam_viz.core.inputs import check_n_samples, check_seed, check_text
from bam_viz.core.metrics import interval_multiplier
from bam_viz.core.task import resolve_target
from bam_viz.families.base import Marginal
from bam_viz.families.sampling import masked_log_softmax
from bam_viz.inference.explain import PriorDraws, deterministic_pass, lower_states, pass_weights, result_notes
from bam_viz.inference.result import log10_density, log10_ranges
from bam_viz.live.frames import (
    FRAME_TIMEOUT_S,
    MAP_PANELS,  # noqa: F401  (read as live.*)
    MAP_SAMPLES,  # noqa: F401  (read as live.*)
    QUANTILES,
    STATS,
    Frame,
    FrameParts,
    frame_rules,
    make_frame,
    quantiles,
    samples_drawn,
)
from bam_viz.live.payloads import inside_payload, page_style, summary_payload  # noqa: F401  (live.*)
from bam_viz.live.result import FrameResult  # noqa: F401  (read as live.*)
from bam_viz.live.scheduler import FRAMES, FRAMES_ENV, POLL_MAX_S, WORKERS, wait_idle  # noqa: F401
from bam_viz.live.wire import FLOAT32_LIMIT, finite32, pack, unpack  # noqa: F401

POSTERIOR_PER_DECADE = 12       # the posterior's log slider: ~21% steps (46 values for shape_k, with the trained 3)
PRIOR_PER_DECADE = 4            # the prior-only log slider: ~78% steps (33 values for beta)
LINEAR_POINTS = {"posterior": 61, "prior": 31}
DENSITY_POINTS = 160
IDLE_S = 15.0                   # a grid nobody asked about for this long stops making frames (> POLL_MAX_S)


def slider_values(spec, trained: float | None, side: str = "posterior", exact: float | None = None) -> list[float]:
    """The values a slider offers: a log (or linear) grid over the spec's range, plus the trained value and
    `exact` (a value the user set between two of the grid's). The grid index nearest to a value is
    `bam_viz.core.grids.nearest_index`'s."""
    per_decade = POSTERIOR_PER_DECADE if side == "posterior" else PRIOR_PER_DECADE
    values = with_value(spec.grid(per_decade, LINEAR_POINTS[side]), trained, spec.low, spec.high)
    return with_value(values, exact, spec.low, spec.high)


@functools.lru_cache(maxsize=16384)
def _hyper(base, post: tuple[str, float] | None, prior: tuple[str, float] | None):
    """`base` with a slider's value (name, value) or two: validated once for every grid of the model (a
    sentence's grid asks for 46 x 33 of them; validating each again was 6% of a class's server time)."""
    return base.replace(**dict(x for x in (post, prior) if x is not None))


def nearest_first(n: int, start: int, step: int = 1) -> list[int]:
    """0..n-1 ordered by distance from `start`, the side of `step` (+1: right, -1: left) first at each
    distance: start, start+step, start-step, ..."""
    step = -1 if step < 0 else 1
    order = [start]
    for d in range(1, n):
        order += [i for i in (start + step * d, start - step * d) if 0 <= i < n]
    return order


class LiveGrid:
    """One sentence at every slider value; frames are made on demand or by `start()` in the background.

    `window`: the token indices the maps show (all tokens of a short sentence). `target`: the class
    its summary shows unless a payload asks for another (a name or an index of the model's classes;
    None or "predicted": the class predicted at the payload's slider value). `others`: hyperparameters
    that no slider moves, and a slider's value off its grid, which the grid then holds as well (a user
    typed it). Thread-safe: the app's sessions share grids, and the workers fill them."""

    def __init__(self, model, text: str, n_samples: int, seed: int, window: list[int] | None = None,
                 target: int | str | None = None, **others: float):
        check_text(text)
        n_samples, seed = check_n_samples(n_samples), check_seed(seed)
        self.model, self.text, self.n_samples, self.seed = model, text, n_samples, seed
        self.classes = tuple(model.classes)
        if target is not None and target != "predicted":
            target = resolve_target(self.classes, target)
        self.target = target
        self.others = tuple(sorted(others.items()))
        family = model.attention_family
        self.family = family
        specs = model.slider_specs
        posterior = [s for s in specs if not s.prior_only]
        prior = [s for s in specs if s.prior_only]
        if len(posterior) > 1 or len(prior) > 1:
            raise ValueError(f"{family.name}: the live explorer draws one posterior and one prior slider, "
                             f"not {[s.name for s in specs]}")
        self.posterior_spec = posterior[0] if posterior else None
        self.prior_spec = prior[0] if prior else None
        trained = model.trained_hyper
        self.base = model.hyper(**{k: v for k, v in others.items()
                                   if k not in {s.name for s in specs}})
        self.values = (slider_values(self.posterior_spec, trained.get(self.posterior_spec.name),
                                     exact=others.get(self.posterior_spec.name)) if self.posterior_spec else [None])
        self.prior_values = (slider_values(self.prior_spec, trained.get(self.prior_spec.name), "prior",
                                           exact=others.get(self.prior_spec.name)) if self.prior_spec else [None])
        lower = lower_states(model, text)
        self.tokens, self.T = lower.tokens, len(lower.tokens)
        self.encoded, self.truncated, self.notes = lower.text, lower.truncated, result_notes(model, lower)
        self.window = list(range(self.T)) if window is None else [int(i) for i in window]
        self.frames: list[Frame | None] = [None] * len(self.values)
        # Each page computes this grid's frames (FRAMES.in_browser): the server makes one only when asked
        # (`frame`: explain's draws are the page's), which the page draws until it has made its own.
        self.in_browser = FRAMES.in_browser and n_samples >= 2      # a frame graph draws 2 samples or more
        self.sentence_key = hashlib.sha256(repr((model.name, id(model), text, n_samples, seed, self.window,
                                                 self.others)).encode()).hexdigest()[:16]
        # the same without the sliders' values off their grids: grids of one base draw the same frame at
        # the same value (the page keeps its frames when a typed value makes a new grid)
        fixed = tuple((k, v) for k, v in self.others if k not in {s.name for s in specs})
        self.base_key = hashlib.sha256(repr((model.name, id(model), text, n_samples, seed, self.window,
                                             fixed)).encode()).hexdigest()[:16]
        self.states = lower.x
        self._lock = threading.Lock()
        self._making: set[int] = set()                    # frames a background thread is making
        self._asked: dict[int, threading.Event] = {}      # frames a request is making: set when made
        self._memo: dict[str, dict] = {}
        self._kl_at = None               # the KL at any (posterior, prior) values: `kl_table`
        self.touched = time.monotonic()
        self.started = False
        self._around: int | None = None  # the slider value the background frames are ordered around
        self.version = 0                 # counts what was added (frames, payloads kept): the cache measures again
        self.measured = -1               # the version the cache last measured (`views.state.get_grid`)
        self._softmax_pass(lower)

    # ---- the one deterministic pass --------------------------------------------------------------
    @torch.inference_mode()
    def _softmax_pass(self, lower) -> None:
        model = self.model
        logits, traces = deterministic_pass(model, lower, self.base)      # explain()'s own, kept per sentence
        self.softmax_probs = logits.softmax(-1)[0].double().cpu().numpy()               # (C,) f(softmax)
        # the deterministic pass's softmax weights and the prior's pi, (L, H, T, T) each, as explain() has them:
        # no hyperparameter moves them
        self.softmax_weights = pass_weights(lower.traces, traces, "softmax_weights", self.family)
        self.prior_weights = pass_weights(lower.traces, traces, "prior_weights", self.family)
        first = len(lower.traces)
        self.stochastic_layers = [i for i in model.config.stochastic_layers] if model.stochastic else []
        self.scored = [i for i in range(first, first + len(traces))
                       if i in self.stochastic_layers and self.family.stochastic]
        # log softmax(psi) and log pi of every stochastic layer: (Ls, H, T, T) and (Ls, H, 1, T)
        rows = {i: traces[i - first] for i in self.scored}
        if self.scored:
            self.log_p = torch.stack([masked_log_softmax(rows[i].scores[0], None) for i in self.scored])
            pi = torch.stack([rows[i].prior_weights[0, :, :1, :] for i in self.scored])
            self.log_pi = pi.clamp_min(torch.finfo(pi.dtype).tiny).log()

    def hyper_at(self, i: int, j: int | None = None):
        """The hyperparameters of posterior value i and prior value j (the base's where None)."""
        post = (self.posterior_spec.name, self.values[i]) if self.posterior_spec is not None else None
        prior = (self.prior_spec.name, self.prior_values[j]) if self.prior_spec is not None and j is not None else None
        return _hyper(self.base, post, prior)

    def kl_table(self, i: int) -> np.ndarray:
        """(B, L, H) KL(q || prior) summed over queries and keys, at posterior value i and every
        prior value; zeros in layers without a learned prior's KL."""
        return self.kl_tables()[i]

    def _kl_tables(self) -> np.ndarray:
        G, B, L, H = len(self.values), len(self.prior_values), self.model.n_layers, self.model.n_heads
        out = np.zeros((G, B, L, H))
        if not self.scored or not self.family.learned_prior:
            return out
        hypers = [self.hyper_at(i, j) for i in range(G) for j in range(B)]
        with torch.inference_mode():
            if self._kl_at is None:        # what no slider moves, once per sentence (`kl_terms`)
                valid = torch.ones_like(self.log_p, dtype=torch.bool)
                self._kl_at = self.family.kl_terms(self.log_p, self.log_pi, valid)
            sums = self._kl_at(hypers)                                                   # (G B, Ls, H)
        out[:, :, self.scored] = sums.cpu().numpy().reshape(G, B, len(self.scored), H)
        return out

    def target_at(self, current: int, target: int | str | None = None) -> int:
        """The index of the class a payload at posterior value `current` shows: `target`, else the
        grid's own, and for None or "predicted" the argmax of E[f(z)] at `current` (at the nearest
        value made while it is not, and f(softmax) before any frame is)."""
        target = self.target if target is None else target
        if target is not None and target != "predicted":
            return resolve_target(self.classes, target)
        made = [i for i, f in enumerate(self.frames) if f is not None]
        if not made:
            return resolve_target(self.classes, None, self.softmax_probs)
        nearest = min(made, key=lambda i: (abs(i - current), i))
        return resolve_target(self.classes, None, self.frames[nearest].stats[:, STATS.index("p_mc")])

    # ---- frames ----------------------------------------------------------------------------------
    def frame(self, i: int) -> Frame:
        """Frame i, made now in this thread if nobody has made it."""
        hit = self.frames[i]
        if hit is not None:
            return hit
        with self._lock:
            if self.frames[i] is not None:
                return self.frames[i]
            other = self._asked.get(i)
            if other is None:
                self._asked[i] = mine = threading.Event()
        if other is not None:
            # Another request is making it (twenty students releasing on one lesson step): wait for
            # that one. A background frame of the same value is not waited for: it may still be queued.
            other.wait(FRAME_TIMEOUT_S)
            return self.frames[i] if self.frames[i] is not None else self._make(i)
        try:
            return self._make(i)
        finally:
            with self._lock:
                self._asked.pop(i, None)
            mine.set()

    def _make(self, i: int) -> Frame:
        """Frame i, made in this thread."""
        hyper = dict(self.hyper_at(i, None))
        return self._store(i, make_frame(self.model, self.text, self.n_samples, self.seed, hyper, self.window))

    def _store(self, i: int, parts: FrameParts) -> Frame:
        made = Frame(stats=parts.stats, p_samples=parts.p_samples, spread=parts.spread, kl=self.kl_table(i),
                     maps=parts.maps, rows=parts.rows)
        with self._lock:
            if self.final(i):                   # made meanwhile by another thread: keep that one
                return self.frames[i]
            self.frames[i] = made
            self.version += 1
        return made

    def final(self, i: int) -> bool:
        """Whether frame i is made with every sample."""
        f = self.frames[i]
        return f is not None and f.n_samples >= self.n_samples

    def _work(self, i: int) -> None:
        with self._lock:
            if self.final(i) or i in self._making or i in self._asked:
                return
            if self.abandoned():                                # a new sentence came
                return
            self._making.add(i)
        try:
            if not self.final(i):
                self._make(i)
        finally:
            with self._lock:
                self._making.discard(i)

    def abandoned(self) -> bool:
        """Nobody asked about this grid for IDLE_S: it stops making frames (until `touch`)."""
        if time.monotonic() - self.touched > IDLE_S:
            self.started = False
            return True
        return False

    def start(self, current: int) -> None:
        """Make frame `current` now, then the rest in the background, nearest first. The background
        follows the slider: when `current` moved since the last call (a release), the frames still to
        make are ordered again around it, the side it moved to first, and this grid's turn comes next."""
        self.touched = time.monotonic()
        if self.in_browser:                 # the page makes every frame; its captions read the page's (`posted`)
            return
        self.frame(current)
        with self._lock:
            moved = self._around is not None and current != self._around
            step = current - self._around if moved else 1
            self._around = current
        if not moved:
            self._launch(current)
        elif not self.complete:
            with self._lock:
                self.started = True
            FRAMES.add(self, self._todo(current, step), first=True)

    def _todo(self, around: int, step: int = 1) -> list[int]:
        return [i for i in nearest_first(len(self.values), around, step) if not self.final(i)]

    def _launch(self, around: int) -> None:
        with self._lock:
            if self.started:
                return
            self.started = True
        FRAMES.add(self, self._todo(around))

    def touch(self) -> None:
        """Someone still wants this grid: resume it if its workers gave it up as abandoned."""
        self.touched = time.monotonic()
        if not self.started and not self.complete and not self.in_browser:
            made = [i for i, f in enumerate(self.frames) if f is not None]
            if made:
                self._launch(self._around if self._around is not None else made[0])

    def kl_tables(self) -> np.ndarray:
        """(G, B, L, H) `kl_table` at every posterior value, made once, in one pass of the family's
        `kl_terms` (closed form: no frame needed)."""
        return self.memo("kl", (), self._kl_tables)

    def browser_frames(self) -> dict:
        """What a page needs to make this grid's frames with the model's frame graph (views/live/local.js):
        the grid's base (`base_key`: frames of another grid of the same base at the same values are this
        one's), the graph's hyperparameters at each posterior value, the seed (a string: JSON stops at 2**53), S,
        `frame_rules`, f(softmax), the window, the MI interval's multiplier, and the number of tokens and the
        stochastic layers, which the numbers it sends back for the captions hold (`bam_viz.live.posted`);
        the states go as an array."""
        from bam_viz.inference.graph import posterior_names

        names = posterior_names(self.model)
        z = interval_multiplier(self.n_samples)
        values = [{n: float(self.hyper_at(i)[n]) for n in names} for i in range(len(self.values))]
        return {"sentence": self.sentence_key, "base": self.base_key, "values": values,
                "seed": str(self.seed), "n_samples": self.n_samples, "rules": frame_rules(),
                "softmax_probs": [float(p) for p in self.softmax_probs], "window": list(self.window),
                "stochastic": bool(self.stochastic_layers), "interval_z": z if math.isfinite(z) else None,
                "layers": self.model.n_layers, "heads": self.model.n_heads, "tokens": self.T,
                "stochastic_layers": list(self.stochastic_layers)}

    @property
    def ready(self) -> list[bool]:
        """Which frames the page can draw."""
        return [f is not None for f in self.frames]

    @property
    def frame_samples(self) -> list[int]:
        """The samples each frame drew: the grid's, 0 where none is made."""
        return samples_drawn(self.frames)

    @property
    def whole(self) -> list[bool]:
        """Which frames are made with every sample (`final`)."""
        return [self.final(i) for i in range(len(self.frames))]

    @property
    def complete(self) -> bool:
        return all(self.whole)

    def wait(self, timeout: float = 60.0) -> bool:
        """Until every frame is made (tests, the benchmark): True when complete."""
        deadline = time.monotonic() + timeout
        while not self.complete and time.monotonic() < deadline:
            self.touch()
            time.sleep(0.02)
        return self.complete

    # ---- what depends on the selected layer, head, query and key ---------------------------------
    def posterior_row(self, i: int, layer: int, head: int, query: int) -> np.ndarray:
        """(4, W) over the window's keys, for `query`: the Monte Carlo mean of the sampled weights,
        their 5% and 95% quantiles, and the deterministic pass's softmax weights."""
        frame, w = self.frames[i], self.window
        softmax = self.softmax_weights[layer, head, query][w].double().numpy()
        if frame is None or layer not in frame.maps:
            return np.stack([softmax, softmax, softmax, softmax])
        row = w.index(query) if query in w else 0
        m = frame.maps[layer][head].astype(float)
        return np.stack([m[0, row], m[2, row], m[3, row], softmax])

    def prior_rows(self, layer: int, head: int, query: int) -> np.ndarray:
        """(B, 4, W) over the window's keys, at every prior value (the prior is the same for every
        query): the mean of the prior's normalised draws, their 5% and 95% quantiles, and pi; made
        once per selection."""
        return self.memo("prior_rows", (layer, head, query), lambda: self._prior_rows(layer, head, query))

    def _prior_rows(self, layer: int, head: int, query: int) -> np.ndarray:
        w = self.window
        pi = self.prior_weights[layer, head, query][w].double().numpy()
        out = np.tile(np.stack([pi, pi, pi, pi]), (len(self.prior_values), 1, 1))
        if self.draws_prior(layer):
            out[:, :3] = self.prior_draw_stats(layer, head)[:, :, w]
        return out

    def draws_prior(self, layer: int) -> bool:
        """Whether the prior's bars of `layer` are draws (a learned prior, 2 samples or more), not its pi."""
        return layer in self.scored and self.family.learned_prior and self.n_samples >= 2

    def prior_draw_stats(self, layer: int, head: int) -> np.ndarray:
        """(B, 3, T) the mean of the prior's normalised draws, their 5% and 95% quantiles, over every key,
        at every prior value (the same for every query); made once per (layer, head)."""
        return self.memo("prior_draws", (layer, head), lambda: self._prior_draw_stats(layer, head))

    def _prior_draw_stats(self, layer: int, head: int) -> np.ndarray:
        log_pi = self.log_pi[self.scored.index(layer), head]                           # (1, T)
        S, T = self.n_samples, log_pi.shape[-1]
        out = np.zeros((len(self.prior_values), 3, T))
        with torch.inference_mode():
            for j in range(len(self.prior_values)):
                g = torch.Generator(device=log_pi.device).manual_seed(PriorDraws.stream_seed(self.seed, layer, head))
                draws = self.family.sample_prior(log_pi.expand(S, 1, 1, T), self.hyper_at(0, j), None, g)
                drawn = draws[:, 0, 0].double()
                q = quantiles(drawn, QUANTILES)
                out[j, 0], out[j, 1], out[j, 2] = drawn.mean(0).numpy(), q[0].numpy(), q[1].numpy()
        return out

    def densities(self, layer: int, head: int, query: int, key: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Densities of log10 S_ij for one query and key: (G, 2 + P) under q at every posterior
        value and (B, 2 + P) under the prior at every prior value, each row [lo, hi, density at P
        points from lo to hi]; None where the layer has no density. They come from the deterministic pass,
        not from the frames, so they are made once per selection (SciPy's densities hold
        the GIL: the page's polls would otherwise slow the workers down)."""
        if layer not in self.scored or not self.family.has_density:
            return None
        return self.memo("densities", (layer, head, query, key), lambda: self._densities(layer, head, query, key))

    def memo(self, what: str, key: tuple, make, keep: int = 4):
        """`make()`, kept per `what` for the last `keep` keys (a few recent selections per grid)."""
        with self._lock:
            cache = self._memo.setdefault(what, {})
            hit = cache.get(key)
        if hit is None:
            hit = make()
            with self._lock:
                while len(cache) >= keep:
                    cache.pop(next(iter(cache)))
                cache[key] = hit
                self.version += 1
        return hit

    def _densities(self, layer: int, head: int, query: int, key: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.scored.index(layer)
        log_p = self.log_p[s, head, query][None]                                        # (1, T)
        log_pi = self.log_pi[s, head]                                                   # (1, T)
        valid = torch.ones_like(log_p, dtype=torch.bool)

        def curves(n: int, hyper_of, which: int) -> np.ndarray:
            marginals = []
            for i in range(n):
                with torch.inference_mode():
                    st = self.family.statistics(log_p, log_pi, valid, hyper_of(i))
                marginals.append(self.family.key_marginals({k: v[0] for k, v in st.posterior.items()},
                                                           {k: v[0] for k, v in st.prior.items()}, key)[which])
            # All n at once where SciPy can (one call, not 2n: SciPy's per-call cost held the GIL)
            stacked = Marginal.stack(marginals)
            ranges = log10_ranges(stacked) if stacked is not None else np.array([log10_ranges(d) for d in marginals])
            lo, hi = ranges[:, 0], ranges[:, 1]
            bad = ~(np.isfinite(lo) & np.isfinite(hi)) | (hi <= lo)
            lo, hi = np.where(bad, -3.0, lo), np.where(bad, 0.0, hi)
            x = np.linspace(lo, hi, DENSITY_POINTS, axis=1)                                 # (n, P)
            out = np.empty((n, 2 + DENSITY_POINTS))
            out[:, 0], out[:, 1] = lo, hi
            if stacked is not None:
                out[:, 2:] = log10_density(stacked, x)
            else:
                out[:, 2:] = [log10_density(d, row) for d, row in zip(marginals, x, strict=True)]
            return out

        prior_at = 0 if self.prior_spec is None else None
        return (curves(len(self.values), lambda i: self.hyper_at(i, prior_at), 0),
                curves(len(self.prior_values), lambda j: self.hyper_at(0, j), 1))


def sweep_of(grid: LiveGrid, target: int | str | None = None, current: int = 0, made: dict | None = None):
    """The frames made so far as a `bam_viz.inference.sweep.Sweep` over the posterior slider, for the
    class `grid.target_at(current, target)` (its captions and figure read it); None without a
    posterior slider or with fewer than 2 samples. `made`: {index: stats (C, len(STATS))} of the frames
    made elsewhere (`bam_viz.live.posted.Posted.sweep`), else the grid's."""
    from bam_viz.inference.sweep import Sweep

    if grid.posterior_spec is None or grid.n_samples < 2:
        return None
    t = grid.target_at(current, target)
    if made is None:
        made = {i: f.stats for i, f in enumerate(grid.frames) if f is not None}
    if not made:
        return None
    made = dict(sorted(made.items()))
    stats = np.stack([s[t] for s in made.values()])
    col = {name: stats[:, k] for k, name in enumerate(STATS)}
    return Sweep(name=grid.posterior_spec.name, values=np.asarray([grid.values[i] for i in made]),
                 p_mc=col["p_mc"], p_mc_se=col["p_se"], p_mean_attention=col["p_mean_attention"],
                 p_softmax=col["p_softmax"], mutual_information=col["mi"],
                 trained=grid.model.trained_hyper.get(grid.posterior_spec.name), scale=grid.posterior_spec.scale,
                 n_samples=grid.n_samples, seed=grid.seed, classes=grid.classes, target=t)
