"""Find and kill every process below a given one, whatever session or process group it moved to.

The judge's supervisor is a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process the candidate
starts and orphans (double fork, `setsid`) is re-parented to the supervisor instead of init, so it
stays in the supervisor's tree and `kill_tree` finds it. Processes are stopped (SIGSTOP) before
they are killed, so one that forks in a loop cannot outrun the scan.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time
from pathlib import Path
from typing import Iterable

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux 3.4+); False where refused."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_map() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process, from /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "(comm)": state, ppid, ...
        if fields and fields[0] not in ("Z", "X"):
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(root: int, parents: dict[int, int] | None = None) -> set[int]:
    parents = parent_map() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = set(), [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def kill_tree(root: int, spare: Iterable[int] = (), rounds: int = 50) -> set[int]:
    """SIGSTOP then SIGKILL every descendant of `root` (not `root`, not `spare` nor theirs) and
    reap those that are this process's children. Returns the pids killed."""
    spared = set(spare)
    killed: set[int] = set()
    for _ in range(rounds):
        parents = parent_map()
        protected = spared | {d for s in spared for d in descendants(s, parents)}
        found = descendants(root, parents) - protected
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        for pid in found | (descendants(root) - protected):
            _signal(pid, signal.SIGKILL)
        killed |= found
        reap(killed)
        time.sleep(0.01)
    reap(killed)
    return killed


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap(pids: Iterable[int]) -> None:
    """Collect those of `pids` that are children of this process and have ended (no waiting)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def no_new_privs(pid: int) -> bool | None:
    """Whether `pid` carries no_new_privs (every process of a candidate does); None: it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NoNewPrivs:"):
                return line.split()[1] == "1"
    except (OSError, IndexError):
        return None
    return None
