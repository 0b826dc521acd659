"""Fixtures shared by the test files; the benchmark scripts in bench/ importable as modules
(`import browser_latency as bl`), since several tests drive the app through them."""

import sys
from pathlib import Path

import pytest

from bam_viz.data import data_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

# In this process (the library's tests, AppTest's runs of the pages) the server's threads make every frame,
# the library's default; app.py has each page make its own, which the browser tests (a real server) exercise.
from bam_viz.live.scheduler import FRAMES  # noqa: E402

FRAMES.use("server")


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The human-rated corpora; missing data fails loudly rather than skipping (CI provides it)."""
    found = data_dir()
    if found is None:
        pytest.fail(
            "the VADER ICWSM-2014 corpora are missing: expected ../shared/data/vader-icwsm2014 beside "
            "the repository or $BAM_VIZ_DATA (see bam_viz/data.py); CI provides them"
        )
    return found


@pytest.fixture(scope="session")
def three_classes():
    """A real model with a random three-class head (fake_result.k_class_model), built once a run."""
    from fake_result import k_class_model

    return k_class_model(3)


@pytest.fixture(scope="session")
def fifty_classes():
    from fake_result import k_class_model

    return k_class_model(50, seed=1)


@pytest.fixture
def no_frames_left_behind():
    """After a test every live grid is given up, as a server gives up a grid nobody polls: the frames
    being made finish and no others start, so one test's background work does not run into the next
    (a grid asked about again resumes: `LiveGrid.touch`). AppTest never polls, so during the test no
    grid is given up. For the AppTest files: `pytestmark = pytest.mark.usefixtures(...)`."""
    from bam_viz.live import grid as live

    live.IDLE_S = float("inf")
    yield
    live.IDLE_S = 0.0
    try:
        assert live.wait_idle(420)
    finally:
        live.IDLE_S = float("inf")


@pytest.fixture(scope="module")
def server(request):
    """The app served on loopback for one browser test file (`bench/browser_latency.serve`), its
    output in artifacts/<file>-server.log."""
    import browser_latency as bl

    artifacts = Path(__file__).resolve().parents[1] / "artifacts"
    artifacts.mkdir(exist_ok=True)
    name = Path(request.module.__file__).stem.removeprefix("test_")
    with bl.serve(artifacts.parent / "app.py", log=artifacts / f"{name}-server.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, one for a browser test file (never a downloaded one)."""
    import browser_latency as bl
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = bl.launch_chromium(p)
        try:
            yield launched
        finally:
            launched.close()
