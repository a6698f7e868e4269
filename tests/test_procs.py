"""kernelwright/procs.py: ending a process with the process group it leads."""
from __future__ import annotations

import subprocess
import sys
import time

from kernelwright.procs import kill_group

LEADER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
         "print('ready', flush=True); time.sleep(60)"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_the_leader_and_its_children_end_together():
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert leader.stdout.readline().strip() == "ready"
    children = [int(p) for p in open(f"/proc/{leader.pid}/task/{leader.pid}/children").read().split()]
    assert children
    kill_group(leader)
    assert leader.wait(10) != 0
    deadline = time.monotonic() + 10
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(c) for c in children)


def test_a_group_that_is_gone_is_fine():
    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    done.wait(10)
    kill_group(done)  # no group left: nothing to do, no error
    kill_group(done.pid)


def test_a_process_outside_its_own_group_is_still_killed():
    """Not a group leader (no new session): the group cannot be signalled by its pid, the process can."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    kill_group(proc)
    assert proc.wait(10) != 0
