"""Killing a process tree whose members moved to other sessions, as the supervisor does."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SUBREAPER = r"""
import os, subprocess, sys, time
from kernelwright.judge import proctree

assert proctree.become_subreaper()
worker = os.fork()
if worker == 0:
    # the "candidate": a setsid child, and a daemon whose middle process exits
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    os.waitpid(middle, 0)
    os._exit(0)
os.waitpid(worker, 0)
time.sleep(0.3)
left = sorted(proctree.descendants(os.getpid()))
killed = sorted(proctree.kill_tree(os.getpid()))
print(" ".join(map(str, left)), "|", " ".join(map(str, killed)), flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_orphans_in_other_sessions_stay_in_the_subreapers_tree_and_are_killed():
    done = subprocess.run([sys.executable, "-c", _SUBREAPER], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    left, killed = (part.split() for part in done.stdout.split("|"))
    assert len(left) == 2 and sorted(left) == sorted(killed)
    deadline = time.monotonic() + 5
    while any(_alive(int(pid)) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in killed if _alive(int(pid))]


_SPARE = r"""
import subprocess, sys, os
from kernelwright.judge import proctree
keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
drop = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
killed = proctree.kill_tree(os.getpid(), spare=[keep.pid])
try:
    os.kill(drop.pid, 0)
    gone = False
except ProcessLookupError:
    gone = True  # killed and reaped
print(killed == {drop.pid}, keep.poll() is None, gone)
keep.kill()
"""


def test_spared_processes_survive():
    done = subprocess.run([sys.executable, "-c", _SPARE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.split() == ["True", "True", "True"], done.stderr
