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


NICENESS = r"""
import json, os, sys, threading
from pathlib import Path
from bam_viz.live import priority

def nice(tid):           # field 19 of /proc/.../stat: the thread's niceness
    return int(Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[16])

ready, done = threading.Event(), threading.Event()
def before():            # a thread already running when the server lowers itself
    ready.set(); done.wait()
old = threading.Thread(target=before); old.start(); ready.wait()
base = nice(threading.get_native_id())   # inherited: a test run that ran app.py in-process is at 5 already
out = {"base": base, "set": priority.server_priority(), "again": priority.server_priority(),
       "switch": sys.getswitchinterval()}
out["main"], out["old"] = nice(threading.get_native_id()), nice(old.native_id)
def later(key, frame):   # threads started afterwards: a script run, a frame a request waits for, a background one
    if frame is not None:
        priority.frame_priority(background=frame)
    out[key] = nice(threading.get_native_id())
for key, frame in (("new", None), ("now", False), ("frame", True)):
    t = threading.Thread(target=later, args=(key, frame)); t.start(); t.join()
done.set(); old.join()
print(json.dumps(out))
"""


def _niceness(env_value):
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "BAM_VIZ_SERVER_NICE"}
    if env_value is not None:
        env["BAM_VIZ_SERVER_NICE"] = env_value
    done = subprocess.run([sys.executable, "-c", NICENESS], env=env, capture_output=True, text=True, timeout=120,
                          cwd=CONFIG.parents[1], check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_servers_runs_go_first_then_the_frames_a_request_waits_for_then_the_background():
    """`server_priority` (called by app.py) leaves the server's runs at the machine's default priority
    and hands the GIL on every SWITCH_S; frames go to nice 5 (a browser on the machine gets three
    times their share of a busy core) and background frames to 15. `$BAM_VIZ_SERVER_NICE` lowers every
    thread of the server, those already running and those started later (frames never above it), and
    a bad value is said in the log, the default kept."""
    from bam_viz.live import priority

    # A process can only raise its niceness: the child starts at this test run's (`base`), so its threads
    # end at max(base, the setting).
    out, _ = _niceness(None)
    b = out.pop("base")
    assert abs(out.pop("switch") - priority.SWITCH_S) < 1e-9       # the GIL handed on every 1 ms, not 5
    assert out == {"set": 0, "again": 0, "main": b, "old": b, "new": b, "now": max(b, 5), "frame": max(b, 15)}
    out, _ = _niceness("0")
    out.pop("switch")
    assert out == {"base": b, "set": 0, "again": 0, "main": b, "old": b, "new": b, "now": max(b, 5),
                   "frame": max(b, 15)}
    out, _ = _niceness("12")
    out.pop("switch")
    assert out["main"] == out["old"] == out["new"] == out["now"] == 12 and out["frame"] == 19
    out, log = _niceness("fast")
    assert out["main"] == b and "BAM_VIZ_SERVER_NICE" in log and "'fast'" in log
