"""Processes as /proc shows them, for tests that kill Ray workers and drivers (no psutil needed)."""
from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """Every process below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat_fields(entry.name)[1]), []).append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def judge_workers(pid: int) -> list[int]:
    """The sandboxed judge processes running below `pid`: workers (`python -m kernelwright.judge.worker`)
    and the supervisors that fork them (`python -m kernelwright.judge.supervisor`), started cold or
    forked from a fork server (they keep its command line: a forkserver process whose parent is one)."""
    found = []
    for child in descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"kernelwright.judge.worker" in cmdline or b"kernelwright.judge.supervisor" in cmdline:
                found.append(child)
            elif b"kernelwright.judge.scheduling.forkserver" in cmdline and _forked_from_server(child):
                found.append(child)
        except OSError:
            continue
    return found


def _forked_from_server(pid: int) -> bool:
    parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    return b"kernelwright.judge.scheduling.forkserver" in Path(f"/proc/{parent}/cmdline").read_bytes()


def alive(pid: int) -> bool:
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False
