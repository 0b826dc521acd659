"""The Ray engine of corpus scoring: on a local Ray cluster of two workers it gives exactly the local
engine's rows, in the same order, whether collected on the driver or written by the workers as
partitioned Parquet, for the zoo and for a K-class model folder, and it shuts down a cluster it
started and only that."""

from __future__ import annotations

import pandas as pd
import pytest
import ray  # a test dependency (requirements-test.txt): missing, this file fails rather than skips

from bam_viz import cli, zoo
from bam_viz.evaluation.score import scorer as score
from bam_viz.evaluation.score.ray_engine import RAY_BATCH, start_ray

# Ray Data's own deprecations (its context copies deprecated fields): not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")


def test_a_cluster_the_engine_starts_is_shut_down():
    assert not ray.is_initialized()
    frame = pd.DataFrame({"text": ["A fine film.", "A dull film.", "It runs two hours."]})
    out = score.score_frame(frame, ["vader"], text_column="text", engine="ray", num_workers=2)
    assert not ray.is_initialized()
    pd.testing.assert_frame_equal(out, score.score_frame(frame, ["vader"], text_column="text"), check_exact=True)


def test_the_ray_engine_takes_only_models_loaded_from_a_folder_and_a_reachable_cluster(monkeypatch):
    class Custom:
        name = "my-model"

    frame = pd.DataFrame({"text": ["A fine film."]})
    with pytest.raises(score.ScoreInputError, match=r"'my-model' was not loaded from one \(zoo.load\); score it "
                                                    "with the local engine"):
        score.score_frame(frame, [Custom()], text_column="text", engine="ray")
    assert not ray.is_initialized()                              # refused before a cluster starts

    def unreachable(address, **_):
        # What ray.init raises when nothing answers there (after minutes of retries: not waited for here).
        raise ConnectionError(f"Could not find any running Ray instance at {address}.\nPlease start one.")

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    monkeypatch.setattr(ray, "init", unreachable)
    with pytest.raises(score.ScoreInputError, match="cannot join the Ray cluster at '10.0.0.9:6379' "
                                                    r"\(Could not find any running Ray instance at 10.0.0.9:6379.\)"):
        score.score_frame(frame, ["vader"], text_column="text", engine="ray")
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module; the engine joins it and leaves it running."""
    assert start_ray(num_workers=2)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_rows_equal_the_local_engines(cluster):
    inputs = score.corpus_inputs("all", "test").iloc[::7].groupby("corpus", sort=False).head(30)
    assert len(inputs) == 120 and inputs["corpus"].nunique() == 4
    local = score.score_inputs(inputs, ["bam-wc"], n_samples=4, seed=0)
    progress = []
    remote = score.score_inputs(inputs, ["bam-wc"], n_samples=4, seed=0, engine="ray", num_workers=2,
                                progress=lambda done, total: progress.append((done, total)))
    pd.testing.assert_frame_equal(remote, local, check_exact=True)
    assert progress[-1] == (120, 120) and len(progress) >= 120 // RAY_BATCH
    assert ray.is_initialized()                                  # not the engine's to shut down


@pytest.mark.slow
def test_the_command_on_ray_writes_one_file_or_a_partitioned_folder(cluster, tmp_path):
    snippets = score.corpus_inputs(["tweets"], "test").iloc[:40]
    path = tmp_path / "in.csv"
    snippets[["id", "text", "label"]].to_csv(path, index=False)
    local = score.score_frame(snippets, ["softmax", "vader"], text_column="text", label_column="label",
                              id_column="id", n_samples=4, seed=1)
    base = ["score", "--model", "softmax", "--model", "vader", "--input", str(path), "--samples", "4", "--seed", "1",
            "--engine", "ray", "--num-workers", "2"]
    assert cli.main([*base, "--out", str(tmp_path / "one.parquet")]) == 0
    pd.testing.assert_frame_equal(score.finish(pd.read_parquet(tmp_path / "one.parquet")), local, check_exact=True)

    assert cli.main([*base, "--out", str(tmp_path / "parts")]) == 0
    files = sorted((tmp_path / "parts").glob("*.parquet"))
    assert len(files) > 1                                        # written by the workers, block by block
    parts = score.finish(pd.read_parquet(tmp_path / "parts"))
    key = ["model", "id"]
    pd.testing.assert_frame_equal(parts.sort_values(key, ignore_index=True), local.sort_values(key, ignore_index=True),
                                  check_exact=True)



@pytest.mark.slow
def test_a_k_class_model_folder_scores_on_ray_as_locally(cluster, tmp_path):
    """The workers load the model again from its folder (`model.origin`), wherever it lies."""
    from k_class_models import k_class_folder

    from bam_viz.evaluation.score.ray_engine import write_ray_parquet

    model = zoo.load(path=k_class_folder(tmp_path / "models"))
    inputs = score.corpus_inputs(["tweets"], "test").iloc[:24].assign(
        label=[("sports", "politics", "science", None)[i % 4] for i in range(24)])
    local = score.score_inputs(inputs, [model], n_samples=3, seed=2)
    assert score.classes_of(local) == model.classes
    remote = score.score_inputs(inputs, [model], n_samples=3, seed=2, engine="ray", num_workers=2)
    pd.testing.assert_frame_equal(remote, local, check_exact=True)
    folder = write_ray_parquet(inputs, [model], tmp_path / "parts", n_samples=3, seed=2, num_workers=2)
    parts = score.finish(pd.read_parquet(folder))
    key = ["model", "id"]
    pd.testing.assert_frame_equal(parts.sort_values(key, ignore_index=True), local.sort_values(key, ignore_index=True),
                                  check_exact=True)


@pytest.mark.slow
def test_the_scoring_bench_reports_every_engine(cluster):
    from bam_viz.bench import library as bench

    args = cli.build_parser().parse_args(["bench", "--scoring", "--sentences", "20", "--samples", "2",
                                          "--scoring-repeats", "1"])
    r = bench.run_bench(args)
    assert (r["sentences"], r["n_samples"], r["repeats"], r["torch_threads"]) == (20, 2, 1, 1)
    assert r["ray_equals_local"] is True
    for key in ("local_sent_per_s", "local_batched32_sent_per_s", "ray_1w_sent_per_s", "ray_2w_sent_per_s",
                "ray_1w_steady_sent_per_s", "ray_2w_steady_sent_per_s"):
        assert r[key] > 0, key
    # The first block waits for the actors to start: the steady rate after it is the higher one.
    assert r["ray_1w_first_batch_s"] > 0 and r["ray_1w_steady_sent_per_s"] > r["ray_1w_sent_per_s"]
    assert ray.is_initialized()                                  # the module's cluster, left running
