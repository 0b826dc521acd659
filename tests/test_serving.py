"""The server's settings for a shared machine, from the repository's .streamlit/config.toml."""

import tomllib
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml"


def test_the_server_is_set_for_a_classroom():
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    assert config["client"]["showErrorDetails"] == "none"           # no traceback reaches a user
    assert config["client"]["toolbarMode"] == "minimal"
    assert config["server"]["address"] == "localhost"               # one machine unless asked
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["enableStaticServing"] is True          # the explorer's payload files
    assert config["runner"]["postScriptGC"] is False                # see docs/performance.md


def test_make_run_serves_this_machine_unless_told():
    makefile = (CONFIG.parents[1] / "Makefile").read_text(encoding="utf-8")
    assert "ADDRESS ?= localhost" in makefile and "--server.address $(ADDRESS)" in makefile
