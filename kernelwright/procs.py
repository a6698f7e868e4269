"""Ending a process together with the process group it leads (the judge's workers, the profiler's
ncu, the fork server's evaluations). Stdlib only; every folder may import it, the judge too."""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def kill_group(target: "int | subprocess.Popen | Any", sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process group `target` leads: a pid, or a process object with `.pid` (a
    Popen, the fork server's warm process) started with its own session. A group that is gone is
    fine; where the group cannot be signalled, a Popen's own process is still killed so its
    caller's wait ends."""
    pid = int(getattr(target, "pid", target))
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        if isinstance(target, subprocess.Popen) and target.poll() is None:
            try:
                target.kill()
            except ProcessLookupError:
                pass
