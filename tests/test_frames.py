"""A live grid's frame (bam_viz.live.frames): every class's headline from one result; who makes the
frames ($BAM_VIZ_FRAMES, bam_viz.live.scheduler); a zoo model says where another process loads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bam_viz import zoo
from bam_viz.live import frames
from bam_viz.live import grid as live
from bam_viz.live import scheduler as scheduling


@pytest.fixture(scope="module")
def model():
    return zoo.load("bam-wc")


def test_a_zoo_model_knows_where_another_process_loads_it(model):
    name, root = model.origin
    assert name == "bam-wc" and Path(root) == zoo.PRETRAINED.resolve()


def test_the_mode_is_read_from_the_environment_once(monkeypatch):
    monkeypatch.setenv(live.FRAMES_ENV, "browser")
    scheduler = scheduling.FrameScheduler()
    assert scheduler.in_browser
    monkeypatch.setenv(live.FRAMES_ENV, "server")
    assert scheduler.in_browser                      # read once
    scheduler.use("server")
    assert not scheduler.in_browser and scheduling.FrameScheduler().mode == "server"
    monkeypatch.delenv(live.FRAMES_ENV)
    assert scheduling.FrameScheduler().mode == "server"          # the library's default
    monkeypatch.setenv(live.FRAMES_ENV, "process")
    with pytest.raises(ValueError, match="BAM_VIZ_FRAMES is one of server, browser, not 'process'"):
        _ = scheduling.FrameScheduler().mode
    with pytest.raises(ValueError, match="one of server, browser"):
        scheduler.use("threads")


@pytest.mark.parametrize("n_classes", [2, 3, 50])
def test_a_frame_holds_every_class_and_row_t_is_the_result_for_target_t(n_classes):
    """`class_stats`: what the page shows for class t, whichever t it is asked for, from one result."""
    from fake_result import make_fake_result

    r = make_fake_result("weibull", S=6, n_classes=n_classes)
    stats = frames.class_stats(r)
    assert stats.shape == (n_classes, len(frames.STATS))
    for t in {0, n_classes - 1, r.predicted}:
        v = r.for_target(t)
        row = dict(zip(frames.STATS, stats[t], strict=True))
        mc, mean = r.sample_probs.double().mean(0), r.mean_attention_probs.double()
        assert row["gap"] == pytest.approx(float(mc[t] - mean[t]), abs=1e-6) == pytest.approx(v.gap, abs=1e-6)
        assert (row["p_se"], row["gap_se"], row["gap_softmax_se"]) == pytest.approx(
            (v.se.p_target, v.se.gap, v.se.gap_softmax), rel=1e-12)
        assert (row["mi"], row["mi_se"], row["expected_entropy"]) == pytest.approx(
            (v.mutual_information, v.se.mutual_information, v.expected_entropy), rel=1e-12)
    one = frames.class_stats(make_fake_result("weibull", S=1, n_classes=n_classes))
    assert np.isnan(one[:, frames.STATS.index("p_se")]).all() and np.isfinite(one[:, 0]).all()
