"""bam_viz.core.budgets: one size for sampled attention and one parser for every memory budget in the
environment, each bad value a ValueError that names its variable."""

from __future__ import annotations

import pytest

import bam_viz
from bam_viz.core import budgets, cache, inputs

BUDGETS = (inputs.BUDGET_ENV, cache.BUDGET_ENV, cache.WORK_ENV, "BAM_VIZ_APP_ATTENTION_MB")


def test_attention_bytes_is_float32_weights_of_every_sample_layer_head_and_cell():
    assert budgets.attention_bytes(6, 12, 128) == 4 * 6 * 12 * 128 * 128
    assert budgets.attention_bytes(6, 12, 128, n_samples=64) == 64 * budgets.attention_bytes(6, 12, 128)
    assert cache.explain_bytes(8, 6, 3, 12, 24) == budgets.attention_bytes(6 + 3 * 3, 12, 24, 8)


@pytest.mark.parametrize("name", BUDGETS)
def test_every_budget_reads_megabytes_and_names_itself_when_it_cannot(monkeypatch, name):
    monkeypatch.delenv(name, raising=False)
    assert budgets.env_megabytes(name, 128) == 128.0
    monkeypatch.setenv(name, " ")
    assert budgets.env_megabytes(name, 128) == 128.0                  # blank is unset
    monkeypatch.setenv(name, "0.5")
    assert budgets.env_megabytes(name, 128) == 0.5 and budgets.env_bytes(name, 128) == 2**19
    for bad in ("lots", "-1", "inf", "nan"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=rf"\${name} must be a (finite )?number of megabytes"):
            budgets.env_megabytes(name, 128)


def test_the_explorers_budget_goes_through_the_same_parser(monkeypatch):
    from views import state

    model = bam_viz.load("bam-wc")
    long_text = " ".join(["a slow and tender film about a family that never knows what it wants"] * 12)
    assert state.samples_that_fit(model, long_text, 64)[0] == 28      # 128 MB at 128 tokens
    monkeypatch.setenv(state.APP_ATTENTION_ENV, "256")
    assert state.samples_that_fit(model, long_text, 64)[0] == 56
    monkeypatch.setenv(state.APP_ATTENTION_ENV, "lots")
    with pytest.raises(ValueError, match=r"\$BAM_VIZ_APP_ATTENTION_MB must be a number of megabytes"):
        state.samples_that_fit(model, long_text, 64)
