"""Background runs, in-process: a `kernelwright optimize` working on a run folder that this server did
not start (a CLI resume in a terminal) is seen, and never gets a second process or a stop."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kernelwright.mcp.runs import RunManager
from kernelwright.mcp.validation import ToolInputError
from kernelwright.mcp.workspace import Workspace


def test_a_run_driven_from_outside_is_neither_resumed_twice_nor_stopped(tmp_path):
    ws = Workspace.open(tmp_path)
    run_dir = ws.runs_dir / "20260101-000000-demo-abcd"
    run_dir.mkdir(parents=True)
    (run_dir / "run.sqlite").write_text("")
    manager = RunManager(ws)
    assert manager._process(run_dir)["state"] == "not running"
    # stands in for `kernelwright optimize --resume RUN_DIR` started in a terminal
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "optimize", "--resume",
                              str(run_dir)])
    try:
        deadline = time.monotonic() + 60  # the child's command line is visible once it has exec'd (late when loaded)
        while manager._process(run_dir)["state"] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        process = manager._process(run_dir)
        assert process["state"] == "running" and process["pid"] == other.pid and process["outside"]
        for action in (lambda: manager.resume(run_dir, None, None), lambda: manager.stop(run_dir)):
            with pytest.raises(ToolInputError) as caught:
                action()
            assert caught.value.code == "conflict"
        assert other.poll() is None  # left alone
    finally:
        other.kill()
        other.wait()
    assert manager._process(run_dir)["state"] == "not running"
