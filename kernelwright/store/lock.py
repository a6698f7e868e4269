"""Who is working on a run right now: an advisory lock file in the run folder.

A process that starts or resumes a run holds `RUN_DIR/run.lock` (fcntl.flock, exclusive) until it
ends. The kernel drops the lock when the process dies however it dies (Ctrl-C, `kill -9`, a power
cut), so "status running, lock free" means the process stopped without saying: the run was
interrupted. A second process that tries to work on a held run is refused instead of mixing two
searches in one database.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "run.lock"


class RunBusy(RuntimeError):
    """Another live process holds the run."""


class RunLock:
    """`with RunLock(run_dir):` holds the run for this process; `RunBusy` when another holds it."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self._handle = None

    def acquire(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise RunBusy(f"{self.path.parent} is being worked on by another process "
                          f"({_holder(self.path)}); wait for it, or stop it first") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def is_live(run_dir: str | Path) -> bool:
    """Whether some process holds the run now (never blocks)."""
    path = Path(run_dir) / LOCK_NAME
    if not path.is_file():
        return False
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def shown_status(status: str, run_dir: str | Path) -> str:
    """The status to show for a stored run: a `running` run whose process is gone was interrupted."""
    if status == "running" and not is_live(run_dir):
        return "interrupted"
    return status


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown process"
    except OSError:
        return "unknown process"
