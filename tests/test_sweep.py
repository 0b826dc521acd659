"""bam_viz.inference.sweep: each swept value is exactly what explain() gives at that value."""

from __future__ import annotations

import numpy as np
import pytest

import bam_viz
from bam_viz.inference.sweep import sweep, sweep_values

TEXT = "The acting is superb, but the plot is a tedious mess."


@pytest.fixture(scope="module")
def model():
    return bam_viz.load("bam-wc")


def test_each_value_is_what_explain_gives_there(model):
    s = sweep(model, TEXT, "shape_k", values=[0.3, 1.0, 3.0], n_samples=8, seed=4, target="positive", beta=0.5)
    assert list(s.values) == [0.3, 1.0, 3.0] and s.trained == 3.0 and s.scale == "log"
    assert s.classes == model.classes and s.target == 1 and s.target_name == "positive"
    for i, k in enumerate(s.values):
        r = model.explain(TEXT, n_samples=8, seed=4, shape_k=float(k), beta=0.5)
        assert s.p_mc[i] == pytest.approx(float(r.mc_probs[1]), abs=1e-6)
        assert s.p_mean_attention[i] == pytest.approx(float(r.mean_attention_probs[1]), abs=1e-6)
        assert s.p_softmax[i] == pytest.approx(float(r.softmax_probs[1]), abs=1e-6)
        assert s.mutual_information[i] == pytest.approx(r.mutual_information, abs=1e-6)
        p = r.sample_probs[:, 1].double().numpy()
        assert s.p_mc_se[i] == pytest.approx(p.std(ddof=1) / np.sqrt(8), abs=1e-6)
    assert s.mutual_information[0] > s.mutual_information[2]      # less random attention, less doubt
    negative = sweep(model, TEXT, "shape_k", values=[0.3, 1.0, 3.0], n_samples=8, seed=4, target=0, beta=0.5)
    np.testing.assert_allclose(negative.p_mc, 1 - s.p_mc, atol=1e-6)           # the other column, same passes
    np.testing.assert_allclose(negative.mutual_information, s.mutual_information, rtol=0, atol=0)


@pytest.mark.parametrize("which", ["three_classes", "fifty_classes"])
def test_a_k_class_sweep_follows_one_class_named_by_name_by_index_or_by_default(which, request):
    model = request.getfixturevalue(which)
    values, K = [0.3, 3.0, 30.0], model.n_classes
    default = sweep(model, TEXT, "shape_k", values=values, n_samples=4, seed=1)
    results = [model.explain(TEXT, n_samples=4, seed=1, shape_k=k) for k in values]
    assert default.target == int(results[1].mc_probs.argmax()) and default.classes == model.classes   # at k = 3
    for target, t in (("c1", 1), (K - 1, K - 1), (None, default.target)):
        s = default if target is None else sweep(model, TEXT, "shape_k", values=values, n_samples=4, seed=1,
                                                  target=target)
        assert s.target == t and s.target_name == f"c{t}"
        for i, result in enumerate(results):
            r = result.for_target(t)
            assert s.p_mc[i] == pytest.approx(float(r.mc_probs[t]), abs=1e-6)
            assert s.p_mc[i] - s.p_mean_attention[i] == pytest.approx(r.gap, abs=1e-6)
            assert s.p_mc_se[i] == pytest.approx(r.se.p_target, abs=1e-9)
    with pytest.raises(ValueError, match="no class 'positive'"):
        sweep(model, TEXT, "shape_k", values=values, target="positive")


def test_the_default_grid_spans_the_slider_and_holds_the_trained_value(model):
    values = sweep_values(model, "shape_k")
    spec = model.attention_family.spec("shape_k")
    assert values[0] == spec.low and values[-1] == spec.high and 3.0 in values
    assert values == sorted(values) and 10 <= len(values) <= 25


def test_bad_requests_are_refused(model):
    with pytest.raises(ValueError, match="at least 2 samples"):
        sweep(model, TEXT, "shape_k", n_samples=1)
    with pytest.raises(ValueError, match="swept hyperparameter"):
        sweep(model, TEXT, "shape_k", shape_k=2.0)
    with pytest.raises(ValueError, match="weibull attention has no hyperparameter 'sigma'"):
        sweep(model, TEXT, "sigma")
