"""store/lock.py: the process working on a run holds its lock; a dead process's run reads interrupted."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kernelwright.store import RunBusy, RunLock, is_live, shown_status

HOLD = """
import sys, time
from kernelwright.store import RunLock
lock = RunLock(sys.argv[1]).acquire()  # kept: a dropped lock object releases it
print("held", flush=True)
time.sleep(60)
"""


def test_lock_is_exclusive_and_released(tmp_path):
    assert not is_live(tmp_path) and shown_status("running", tmp_path) == "interrupted"
    with RunLock(tmp_path):
        assert is_live(tmp_path) and shown_status("running", tmp_path) == "running"
        with pytest.raises(RunBusy, match="another process"):
            RunLock(tmp_path).acquire()
    assert not is_live(tmp_path)
    assert shown_status("done", tmp_path) == "done" and shown_status("paused", tmp_path) == "paused"


def test_a_killed_holder_frees_the_run(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert is_live(tmp_path)
        with pytest.raises(RunBusy, match=f"pid {holder.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while is_live(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shown_status("running", tmp_path) == "interrupted"
    RunLock(tmp_path).acquire().release()
