"""bam_viz.live.grid: every frame of a slider grid is what explain() gives at that value, reduced; the KL
table agrees with the layer's own KL at every (k, beta); the packed bytes decode to the same arrays."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

import bam_viz
from bam_viz import families
from bam_viz.core.grids import nearest_index
from bam_viz.core.metrics import interval_multiplier
from bam_viz.inference.explain import lower_states
from bam_viz.live import frames
from bam_viz.live import grid as live
from bam_viz.live import scheduler as scheduling
from bam_viz.nn.attention import Mode, Trace

TEXT = "The acting is superb, but the plot is a tedious mess."


@pytest.fixture(scope="module")
def model():
    return bam_viz.load("bam-wc")


@pytest.fixture(scope="module")
def grid(model):
    g = live.LiveGrid(model, TEXT, 8, 3)
    g.start(nearest_index(g.values, 3.0, True))
    assert g.wait(120), "the grid was not filled in 120 s"
    return g


def test_the_grids_are_the_sliders(model, grid):
    k, beta = model.attention_family.spec("shape_k"), model.attention_family.spec("beta")
    assert grid.values[0] == k.low and grid.values[-1] == k.high and 3.0 in grid.values
    assert grid.values == sorted(set(k.grid(live.POSTERIOR_PER_DECADE)) | {3.0})         # plus the trained k
    assert len(k.grid(live.POSTERIOR_PER_DECADE)) == round(live.POSTERIOR_PER_DECADE * math.log10(k.high / k.low)) + 1
    assert grid.prior_values[0] == beta.low and grid.prior_values[-1] == beta.high and 1.0 in grid.prior_values
    ratios = np.diff(np.log10(grid.values))
    assert ratios.max() <= 1 / live.POSTERIOR_PER_DECADE + 0.01        # no gap in the slider's steps


def test_a_value_typed_off_the_grid_is_a_grid_that_holds_it(model, grid):
    """A slider's value between two of its grid's (typed by a user) comes in `others`: the grid holds it,
    is another grid (its own key) of the same base, and makes the same frame at a value both hold."""
    typed = live.LiveGrid(model, TEXT, 8, 3, shape_k=2.5, beta=0.7)
    assert typed.values == sorted({*grid.values, 2.5}) and typed.prior_values == sorted({*grid.prior_values, 0.7})
    assert typed.base == grid.base                       # a slider's value moves no hyperparameter of the base
    assert typed.sentence_key != grid.sentence_key and typed.base_key == grid.base_key
    assert typed.browser_frames()["base"] == grid.browser_frames()["base"] == grid.base_key
    i, j = typed.values.index(2.5), typed.prior_values.index(0.7)
    assert typed.hyper_at(i, j)["shape_k"] == 2.5 and typed.hyper_at(i, j)["beta"] == 0.7
    same = typed.values.index(3.0)
    np.testing.assert_array_equal(typed.frame(same).stats, grid.frame(grid.values.index(3.0)).stats)
    other = live.LiveGrid(model, TEXT, 8, 4, shape_k=2.5)
    assert other.base_key != grid.base_key               # another seed: other noise


def test_nearest_first_covers_everything_once():
    assert live.nearest_first(5, 2) == [2, 3, 1, 4, 0]
    assert live.nearest_first(4, 0) == [0, 1, 2, 3]
    assert sorted(live.nearest_first(61, 37)) == list(range(61))
    assert live.nearest_first(5, 2, step=-1) == [2, 1, 3, 0, 4]          # the side it moved to first
    assert sorted(live.nearest_first(61, 37, step=-4)) == list(range(61))


def test_the_background_follows_the_slider(model, monkeypatch):
    """A release moves a grid's background around the new value, the way the slider moved first, and
    puts its turn next; a rerun at the same value (a poll) changes nothing."""
    asked = []
    monkeypatch.setattr(live.FRAMES, "add", lambda grid, order, first=False: asked.append((order, first)))
    g = live.LiveGrid(model, "Not bad at all, if a little long.", 2, 0)
    g.start(20)
    g.start(20)
    g.start(23)
    g.start(21)
    assert [first for _, first in asked] == [False, True, True]
    (start, _), (right, _), (left, _) = asked
    assert start[:3] == [21, 19, 22] and 20 not in start
    assert right[:4] == [24, 22, 25, 21] and 23 not in right and 20 not in right     # moved right: right first
    assert left[:4] == [22, 19, 18, 24]                # moved left: 20 and 23 are made, 21 too


@pytest.mark.parametrize("index", [0, 17, -1])
def test_a_frame_is_explain_at_its_value(model, grid, index):
    k = grid.values[index]
    f = grid.frames[index]
    assert f.stats.shape == (2, len(live.STATS)) and f.p_samples.shape == (8, 2)
    for c in (0, 1):                                       # one row per class: each what explain gives for it
        r = model.explain(TEXT, n_samples=8, seed=3, shape_k=k).for_target(c)
        stats = dict(zip(live.STATS, f.stats[c], strict=True))
        assert stats["p_mc"] == pytest.approx(float(r.mc_probs[c]), abs=1e-6)
        assert stats["p_mean_attention"] == pytest.approx(float(r.mean_attention_probs[c]), abs=1e-6)
        assert stats["p_softmax"] == pytest.approx(float(r.softmax_probs[c]), abs=1e-6)
        assert stats["gap"] == pytest.approx(r.gap, abs=1e-6) and stats["gap_se"] == pytest.approx(r.se.gap, abs=1e-9)
        assert stats["gap_softmax"] == pytest.approx(r.gap_softmax, abs=1e-6)
        assert (stats["mi_lo"], stats["mi_hi"]) == pytest.approx(r.mutual_information_interval, abs=1e-9)
        assert stats["mi"] == pytest.approx(r.mutual_information, abs=1e-9)
        assert stats["p_se"] == pytest.approx(r.se.p_target, abs=1e-9)
        assert stats["gap_softmax_se"] == pytest.approx(r.se.gap_softmax, abs=1e-9)
        assert stats["mi_se"] == pytest.approx(r.se.mutual_information, abs=1e-9)
        assert stats["expected_entropy"] == pytest.approx(r.expected_entropy, abs=1e-9)
    np.testing.assert_allclose(f.p_samples, r.sample_probs.double().numpy(), atol=1e-6)
    np.testing.assert_allclose(f.spread, r.spread.double().numpy(), atol=1e-6)
    w = r.sample_weights[:, 5, 2].double().numpy()                                     # (S, T, T)
    maps = f.maps[5][2].astype(np.float64)                                             # float16
    np.testing.assert_allclose(maps[0], w.mean(0), atol=2e-3)
    np.testing.assert_allclose(maps[1], w.std(0, ddof=1), atol=2e-3)
    np.testing.assert_allclose(maps[2], np.quantile(w, 0.05, axis=0), atol=2e-3)
    np.testing.assert_allclose(maps[3], np.quantile(w, 0.95, axis=0), atol=2e-3)
    np.testing.assert_allclose(maps[4:], w[: live.MAP_SAMPLES], atol=2e-3)
    assert set(f.maps) == set(r.stochastic_layers)


def test_the_kl_table_is_the_layers_kl_at_every_beta(model, grid):
    for i, j in ((0, 0), (20, 16), (-1, -1), (40, 5)):
        r = model.explain(TEXT, n_samples=2, seed=0, shape_k=grid.values[i], beta=grid.prior_values[j])
        np.testing.assert_allclose(grid.frames[i].kl[j], r.kl.double().numpy(), rtol=2e-5, atol=1e-3)


def test_weibull_kl_sums_agree_with_statistics_cell_by_cell(model):
    """The separable form against the generic loop over `statistics` (which the other families use),
    on random cells with some keys masked, at the sliders' extremes."""
    family = families.get("weibull")
    g = torch.Generator().manual_seed(0)
    log_p = torch.randn(3, 4, 6, 6, generator=g).log_softmax(-1)
    log_pi = torch.randn(3, 4, 1, 6, generator=g).log_softmax(-1)
    valid = torch.ones(3, 4, 6, 6, dtype=torch.bool)
    valid[..., -2:] = False
    hypers = [family.hyper(shape_k=k, beta=b) for k in (0.2, 3.0, 1000.0) for b in (1e-4, 1.0, 1e4)]
    fast = family.kl_sums(log_p, log_pi, valid, hypers)
    slow = families.AttentionFamily.kl_sums(family, log_p.double(), log_pi.double(), valid, hypers)
    np.testing.assert_allclose(fast.numpy(), slow.numpy(), rtol=1e-9, atol=1e-6)


def test_weibull_kl_terms_keep_what_no_slider_moves_and_answer_any_column_as_kl_sums():
    """One `kl_terms` per sentence, asked column after column as a grid asks (betas seen before, new
    ones, repeated, in any order): each answer equals a fresh `kl_sums` and the generic loop."""
    family = families.get("weibull")
    g = torch.Generator().manual_seed(1)
    log_p = torch.randn(2, 3, 5, 5, generator=g).log_softmax(-1)
    log_pi = torch.randn(2, 3, 1, 5, generator=g).log_softmax(-1)
    valid = torch.ones(2, 3, 5, 5, dtype=torch.bool)
    at = family.kl_terms(log_p, log_pi, valid)
    columns = [[family.hyper(shape_k=k, beta=b) for b in (1e-4, 1.0, 1e4)] for k in (0.2, 3.0)]
    columns += [[family.hyper(shape_k=1000.0, beta=b) for b in (1e4, 7.5, 1e-4, 7.5)]]
    for hypers in columns:
        got = at(hypers)
        assert got.shape == (len(hypers), 2, 3)
        torch.testing.assert_close(got, family.kl_sums(log_p, log_pi, valid, hypers), rtol=0, atol=0)
        slow = families.AttentionFamily.kl_sums(family, log_p.double(), log_pi.double(), valid, hypers)
        np.testing.assert_allclose(got.numpy(), slow.numpy(), rtol=1e-9, atol=1e-6)


def test_a_grid_and_the_frames_made_beside_it_share_one_deterministic_pass(model, monkeypatch):
    """The grid's softmax pass is explain()'s, kept per sentence: a frame made in this process at any
    slider value runs the layers in Mode.MEAN no second time."""
    passes = []
    original = model.upper
    monkeypatch.setattr(model, "upper", lambda *a, **k: (k.get("mode") is Mode.MEAN and k.get("trace") is Trace.STATS
                                                         and passes.append(1)) or original(*a, **k))
    model.clear_caches()
    grid = live.LiveGrid(model, TEXT + " Once.", 4, 0)
    assert len(passes) == 1
    for i in (0, len(grid.values) // 2, len(grid.values) - 1):
        parts = frames.make_frame(model, grid.text, 4, 0, dict(grid.hyper_at(i)), grid.window)
        assert np.array_equal(parts.stats[:, frames.STATS.index("p_softmax")], grid.softmax_probs.astype(np.float32))
    assert len(passes) == 1
    r = model.explain(grid.text, n_samples=2, seed=0)        # the grid's weights are explain()'s, with no frame made
    assert torch.equal(grid.softmax_weights, r.softmax_weights) and torch.equal(grid.prior_weights, r.prior_weights)


def test_the_mean_pass_reads_no_hyperparameter(model):
    """Why one mean-attention pass serves every (k, beta): Mode.MEAN uses softmax weights."""
    lower = lower_states(model, TEXT)
    outs = [model.upper(lower.x, lower.mask, mode=Mode.MEAN, hyper=model.hyper(shape_k=k, beta=b), trace=Trace.STATS)
            for k, b in ((0.2, 1e-4), (1000.0, 1e4))]
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=0, atol=0)
    for a, b in zip(outs[0][1], outs[1][1], strict=True):
        torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=0)
        torch.testing.assert_close(a.prior_weights, b.prior_weights, rtol=0, atol=0)


def test_densities_are_the_results_at_each_value(model, grid):
    post, prior = grid.densities(5, 1, 0, 2)
    for i, j in ((10, 3), (40, 20)):
        r = model.explain(TEXT, n_samples=2, seed=0, shape_k=grid.values[i], beta=grid.prior_values[j])
        d = r.key_densities(5, 1, 0, 2)
        for row, curve in ((post[i], d["posterior"]), (prior[j], d["prior"])):
            x = np.linspace(row[0], row[1], live.DENSITY_POINTS)
            inside = (d["x"] >= row[0]) & (d["x"] <= row[1])
            mine = np.interp(d["x"][inside], x, row[2:])
            assert np.abs(mine - curve[inside]).max() <= 0.02 * curve.max()
    assert grid.densities(0, 1, 0, 2) is None                       # a deterministic layer has none


def test_prior_rows_widen_as_beta_falls(grid):
    rows = grid.prior_rows(5, 0, 0)                                  # (B, 4, W)
    width = (rows[:, 2] - rows[:, 1]).mean(-1)
    assert width[0] > 10 * width[-1] and np.all(rows[:, 1] <= rows[:, 2])
    np.testing.assert_allclose(rows[:, 3], np.broadcast_to(rows[0, 3], rows[:, 3].shape))   # pi, at every beta
    # The bars are the mean of the prior's normalised draws: Dirichlet(beta pi) for a Gamma prior of
    # common rate, so near pi within its Monte Carlo error, and always inside the whiskers.
    assert np.all(rows[:, 1] <= rows[:, 0] + 1e-9) and np.all(rows[:, 0] <= rows[:, 2] + 1e-9)
    pi = rows[0, 3]
    sd = np.sqrt(pi * (1 - pi) / (grid.prior_values[-1] + 1) / grid.n_samples)       # at the largest beta
    assert np.all(np.abs(rows[-1, 0] - pi) <= 5 * sd + 1e-6)


def test_payloads_round_trip(grid):
    data = live.inside_payload(grid, 17, 16, 5, 2, 0, 3, {"relative": True})
    header, arrays = live.unpack(data)
    G, B, W = len(grid.values), len(grid.prior_values), len(grid.tokens)
    assert header["kind"] == "inside" and header["relative"] is True and header["tokens"] == grid.tokens
    assert arrays["maps"].shape == (G, 3 + live.MAP_SAMPLES, W, W) and arrays["kl"].shape == (G, B, 6, 12)
    np.testing.assert_allclose(arrays["maps"][17, 0], grid.frames[17].maps[5][2][0], atol=1e-4)   # E[w]
    np.testing.assert_allclose(arrays["maps"][17, 2], grid.frames[17].maps[5][2][1], atol=1e-4)   # std
    assert len(header["map_titles"]) == len(header["map_scales"]) == arrays["maps"].shape[1]
    np.testing.assert_allclose(arrays["spread"][17], grid.frames[17].spread, rtol=1e-6)
    np.testing.assert_allclose(arrays["kl"][17, 16], grid.frames[17].kl[16], rtol=1e-6)
    assert all(np.isfinite(a).all() for a in arrays.values())
    header, arrays = live.unpack(live.summary_payload(grid, 17))
    assert header["slider"]["name"] == "shape_k" and header["ready"] == [True] * G
    t = header["target"]
    assert t == header["predicted"] == int(np.argmax(grid.frames[17].stats[:, 0]))      # the predicted class
    np.testing.assert_allclose(arrays["stats"][17], grid.frames[17].stats[t], rtol=1e-6)
    np.testing.assert_allclose(arrays["p_samples"][17], grid.frames[17].p_samples[:, t], rtol=1e-6)
    assert arrays["class_probs"].shape == (G, 4, 2)
    np.testing.assert_allclose(arrays["class_probs"][:, 0].sum(-1), 1.0, atol=1e-5)     # E[f(z)] of each class


def test_frames_not_made_are_nan_and_extremes_are_finite(model):
    g = live.LiveGrid(model, TEXT, 4, 0)
    g.frame(0)                                       # k = 0.2 only; nothing started in the background
    header, arrays = live.unpack(live.summary_payload(g, 0))
    assert header["ready"][0] and not any(header["ready"][1:])
    assert np.isfinite(arrays["stats"][0]).all() and np.isnan(arrays["stats"][1:]).all()
    _, inside = live.unpack(live.inside_payload(g, 0, 0, 5, 0, 0, 1))
    assert np.isfinite(inside["prior_row"]).all() and np.isfinite(inside["prior_density"]).all()
    assert np.isfinite(inside["kl"][0]).all() and np.isfinite(inside["post_density"]).all()


@pytest.mark.parametrize("which", ["three_classes", "fifty_classes"])
def test_a_k_class_grid_shows_the_class_asked_for_by_name_by_index_or_by_default(which, request):
    """The summary's numbers for each way of naming the target are explain()'s for that class; the
    gap the page shows is E[f(z)]_t - f(E[w])_t by hand from the samples; one frame serves every class."""
    from bam_viz.core.labels import labels

    model = request.getfixturevalue(which)
    K, text = model.n_classes, "A quietly moving film."
    g = live.LiveGrid(model, text, 4, 0, target="c2")
    i = nearest_index(g.values, 3.0, True)
    g.frame(i)
    g.frame(0)
    assert g.frames[i].stats.shape == (K, len(live.STATS)) and g.frames[i].p_samples.shape == (4, K)
    r = model.explain(text, n_samples=4, seed=0, shape_k=g.values[i])
    mc = r.sample_probs.double().mean(0)
    for target, t in ((None, 2), ("c1", 1), (K - 1, K - 1), ("predicted", int(mc.argmax()))):
        header, arrays = live.unpack(live.summary_payload(g, i, target=target))
        assert header["classes"] == list(model.classes) and header["target"] == t
        assert header["predicted"] == int(mc.argmax()) and header["labels"] == labels(f"c{t}", K)
        stats = dict(zip(header["stats"], arrays["stats"][i].tolist(), strict=True))
        assert stats["p_mc"] == pytest.approx(float(mc[t]), abs=1e-6)
        assert stats["gap"] == pytest.approx(float(mc[t] - r.mean_attention_probs[t]), abs=1e-6)
        assert stats["gap_softmax"] == pytest.approx(float(mc[t] - r.softmax_probs[t]), abs=1e-6)
        assert stats["p_se"] == pytest.approx(r.for_target(t).se.p_target, rel=1e-5)
        assert stats["gap_se"] == pytest.approx(r.for_target(t).se.gap, rel=1e-5)
        np.testing.assert_allclose(arrays["p_samples"][i], r.sample_probs[:, t].numpy(), atol=1e-7)
        classes = arrays["class_probs"][i]                                           # (4, K)
        np.testing.assert_allclose(classes[0], mc.numpy(), atol=1e-6)
        assert np.all(classes[1] <= classes[0] + 1e-6) and np.all(classes[0] <= classes[2] + 1e-6)
        np.testing.assert_allclose(classes[3], r.softmax_probs.numpy(), atol=1e-6)
        assert np.isnan(arrays["stats"][1]).all() and np.isfinite(arrays["stats"][0]).all()
        sweep = live.sweep_of(g, target, current=i)
        assert sweep.target == t and sweep.p_mc[list(sweep.values).index(g.values[i])] == pytest.approx(float(mc[t]),
                                                                                                    abs=1e-6)
    assert header["entropy_bound"] == pytest.approx(math.log(K))
    with pytest.raises(ValueError, match="no class 'positive'"):
        live.LiveGrid(model, text, 4, 0, target="positive")
    with pytest.raises(ValueError, match="no class index"):
        live.summary_payload(g, i, target=K)


@pytest.mark.parametrize("name", ["softmax", "categorical", "mc-dropout", "bam-lc", "dirichlet"])
def test_every_model_packs(name):
    m = bam_viz.load(name)
    g = live.LiveGrid(m, TEXT, 3, 0)
    g.start(0)
    assert g.wait(120)
    layer = m.n_layers - 1
    for data in (live.summary_payload(g, 0), live.inside_payload(g, 0, 0, layer, 0, 0, 1)):
        header, arrays = live.unpack(data)
        assert all(np.isfinite(a).all() for a in arrays.values()), name
    assert len(g.values) == (1 if not m.slider_specs else len(g.values))
    assert ("post_density" in arrays) == (m.attention_family.has_density and layer in g.scored)


def test_an_abandoned_grid_stops_and_resumes(model, monkeypatch):
    """Nobody asked for the grid for IDLE_S: the workers stop making frames; asking again resumes."""
    monkeypatch.setattr(live, "IDLE_S", 0.0)
    g = live.LiveGrid(model, "Not bad at all, if a little long.", 2, 0)
    g.start(30)
    assert live.wait_idle(60)
    assert 1 <= sum(g.ready) < len(g.values) and not g.started
    monkeypatch.setattr(live, "IDLE_S", 60.0)
    g.start(30)
    assert g.wait(120) and live.wait_idle(60)


class _FakeGrid:
    """What the scheduler reads of a grid; `_work` records when each frame was made."""

    def __init__(self, n: int):
        self.frames, self._making, self.touched, self.started, self.made = [None] * n, set(), time.monotonic(), True, []

    def abandoned(self) -> bool:
        return False

    def final(self, i: int) -> bool:
        return self.frames[i] is not None

    def _work(self, i: int) -> None:
        self.made.append((i, time.monotonic()))
        self.frames[i] = object()


def test_frames_of_many_grids_are_made_in_turn(monkeypatch):
    """Twenty sentences at once: each grid gets a frame per round (nearest first within it), so the
    last to arrive does not wait for every other grid to finish; an abandoned grid leaves the rotation."""
    import time as clock

    monkeypatch.setattr(live, "IDLE_S", 5.0)
    made = []

    class Grid(_FakeGrid):
        def __init__(self, name, n):
            super().__init__(n)
            self.name = name

        abandoned = live.LiveGrid.abandoned                # the real grid's rule

        def _work(self, i):
            made.append((self.name, i))
            self.frames[i] = object()

    scheduler = scheduling.FrameScheduler(workers=1)
    scheduler.use("server")
    a, b, c = Grid("a", 3), Grid("b", 3), Grid("c", 3)
    c.touched -= live.IDLE_S + 1                       # nobody has asked about c for a while
    with scheduler._cond:                              # all three in place before the worker starts
        scheduler.add(a, [1, 2, 0])
        scheduler.add(b, [0, 1, 2])
        scheduler.add(c, [0, 1, 2])
    deadline = clock.monotonic() + 10
    while not scheduler.idle and clock.monotonic() < deadline:
        clock.sleep(0.01)
    assert made == [("a", 1), ("b", 0), ("a", 2), ("b", 1), ("a", 0), ("b", 2)]
    assert not c.started and all(f is not None for f in a.frames + b.frames)
    assert all(t.daemon for t in scheduler._threads)          # they never keep a server from exiting

    made.clear()                                       # a grid whose user just moved takes the next turn
    d, e = Grid("d", 2), Grid("e", 2)
    with scheduler._cond:
        scheduler.add(d, [0, 1])
        scheduler.add(e, [0, 1])
        scheduler.add(e, [1, 0], first=True)
    deadline = clock.monotonic() + 10
    while not scheduler.idle and clock.monotonic() < deadline:
        clock.sleep(0.01)
    assert made == [("e", 1), ("d", 0), ("e", 0), ("d", 1)]


def test_background_frames_wait_for_requests_being_answered(monkeypatch):
    """A frame does not start while a page run is in progress, and starts anyway after YIELD_S, so a
    class that never pauses still gets its grids."""
    monkeypatch.setattr(scheduling, "YIELD_S", 0.4)
    scheduler = scheduling.FrameScheduler(workers=1)
    scheduler.use("server")               # the server's own threads, which wait for its runs
    grid = _FakeGrid(3)
    with scheduler.foreground():
        t0 = time.monotonic()
        scheduler.add(grid, [0, 1, 2])
        time.sleep(0.2)
        assert grid.made == []                                   # held back by the run
        deadline = time.monotonic() + 5
        while not grid.made and time.monotonic() < deadline:
            time.sleep(0.01)
        assert grid.made and grid.made[0][1] - t0 >= 0.35         # then made: the wait is bounded
    deadline = time.monotonic() + 5
    while len(grid.made) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [i for i, _ in grid.made] == [0, 1, 2] and scheduler.front == 0


def test_the_class_polls_share_a_bounded_part_of_a_core(monkeypatch):
    """A page alone polls every POLL_S; with n grids being made, each page every n x POLL_COST_S /
    POLL_SHARE (so that n pages poll POLL_SHARE / POLL_COST_S times a second in all) up to POLL_MAX_S,
    which stays below the time a grid is given up after."""
    frames = scheduling.FrameScheduler()
    for n, want in ((0, scheduling.POLL_S), (1, scheduling.POLL_S), (10, 3.2), (20, 6.0), (200, 6.0)):
        monkeypatch.setattr(scheduling.FrameScheduler, "active", property(lambda self, n=n: n))
        assert frames.poll_interval() == pytest.approx(want)
        if n and frames.poll_interval() < scheduling.POLL_MAX_S:
            assert n / frames.poll_interval() <= scheduling.POLL_SHARE / scheduling.POLL_COST_S + 1e-9
    assert scheduling.POLL_MAX_S < live.IDLE_S


def test_a_frame_two_requests_ask_for_at_once_is_made_once(model, monkeypatch):
    """Twenty students releasing on the same value of one lesson step ask for one frame: it is made
    once, and every request gets it."""
    import threading

    made, real = [], live.make_frame

    def slow(*args, **kwargs):
        made.append(args[4])
        time.sleep(0.3)                                # the others arrive while it is being made
        return real(*args, **kwargs)

    monkeypatch.setattr(live, "make_frame", slow)
    grid = live.LiveGrid(model, TEXT, 4, 0)
    got = []
    threads = [threading.Thread(target=lambda: got.append(grid.frame(7))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len(got) == 4 and all(f is got[0] for f in got)
    assert not grid._asked


@pytest.mark.parametrize("name", ["bam-wc", "bam-lc", "dirichlet"])
def test_densities_at_every_value_at_once_are_scipys_one_value_at_a_time(name):
    """The density panel's curves, computed for every slider value in one SciPy call, equal those of
    each value's own distribution (SciPy's scalar path, as `ExplainResult.key_densities` uses)."""
    from bam_viz.inference.result import log10_density, log10_range

    model = bam_viz.load(name)
    g = live.LiveGrid(model, TEXT, 4, 0)
    layer, key = g.scored[-1], 2
    post, prior = g.densities(layer, 1, 0, key)
    s = g.scored.index(layer)
    log_p, log_pi = g.log_p[s, 1, 0][None], g.log_pi[s, 1]
    valid = torch.ones_like(log_p, dtype=torch.bool)
    for out, hyper_of, which in ((post, lambda i: g.hyper_at(i, 0 if g.prior_spec is None else None), 0),
                                 (prior, lambda j: g.hyper_at(0, j), 1)):
        for i in range(len(out)):
            st = g.family.statistics(log_p, log_pi, valid, hyper_of(i))
            d = g.family.key_marginals({k: v[0] for k, v in st.posterior.items()},
                                       {k: v[0] for k, v in st.prior.items()}, key)[which]
            lo, hi = log10_range(d)
            if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
                lo, hi = -3.0, 0.0
            np.testing.assert_allclose(out[i, :2], [lo, hi], rtol=1e-12)
            np.testing.assert_allclose(out[i, 2:], log10_density(d, np.linspace(lo, hi, live.DENSITY_POINTS)),
                                       rtol=1e-9, atol=1e-12)


def test_marginals_stack_only_when_alike():
    from scipy import stats

    from bam_viz.families.base import Marginal

    ms = [Marginal(stats.weibull_min, c=k, scale=s) for k, s in ((0.5, 1.0), (3.0, 0.2), (30.0, 2e-3))]
    stacked = Marginal.stack(ms)
    np.testing.assert_allclose(stacked.ppf([0.001, 0.999]), [m.ppf([0.001, 0.999]) for m in ms], rtol=1e-12)
    assert Marginal.stack([*ms, Marginal(stats.gamma, a=2.0, scale=1.0)]) is None
    assert Marginal.stack([]) is None


def test_a_grid_whose_pages_make_its_frames_sends_what_they_need_and_no_frame(model):
    """$BAM_VIZ_FRAMES=browser: the server makes no frame (the captions read the page's:
    `bam_viz.live.posted`), queues nothing, and its payloads carry no frame but the states, each value's
    hyperparameters, the KL at every value and the head's softmax(psi)."""
    scheduling.FRAMES.use("browser")
    try:
        grid = live.LiveGrid(model, "a quietly moving film", 4, 3)
        grid.start(5)
    finally:
        scheduling.FRAMES.use("server")
    assert grid.in_browser and grid.frames == [None] * len(grid.values)
    assert scheduling.FRAMES.idle
    header, arrays = live.unpack(live.summary_payload(grid, 5))
    none = [False] * len(grid.values)
    assert header["ready"] == none and np.isnan(arrays["stats"]).all()
    np.testing.assert_array_equal(arrays["states"], lower_states(model, grid.text).x[0].numpy())
    here = header["frames_here"]
    assert here["sentence"] == header["sentence"] == grid.sentence_key and here["seed"] == "3"
    assert [v["shape_k"] for v in here["values"]] == pytest.approx(grid.values)
    assert here["rules"] == frames.frame_rules() and here["interval_z"] == pytest.approx(interval_multiplier(4))
    assert here["tokens"] == grid.T and here["stochastic_layers"] == list(model.config.stochastic_layers)
    header, arrays = live.unpack(live.inside_payload(grid, 5, 2, 3, 1, 2, 1))
    assert header["sentence"] == grid.sentence_key and header["ready"] == none
    np.testing.assert_allclose(arrays["kl"], grid.kl_tables(), rtol=1e-6)
    assert np.isfinite(arrays["kl"]).all() and arrays["softmax"].shape == (grid.T, grid.T)
