"""One device, many judge processes: correctness may overlap, timing may not.

Several workers evaluate candidates on one GPU at once (the pool's `per_gpu` lanes): running the
reference and the trials needs no exclusivity, but a timing taken while another process launches
kernels on the same device is wrong. So every process that uses a device takes this lock:

- `shared()` around correctness work on the device (reference outputs, building ModelNew, the
  trials and guards): any number of holders at once;
- `exclusive()` around timing (`timing.measure`, the energy window, each baseline measurement)
  and profiling: no other holder of either kind.

It is a readers-writer lock across processes made of two `fcntl.flock` files per device (the kernel
drops a dead process's locks, so a killed worker never leaves the device locked): `<key>.lock`
itself (shared / exclusive), and a turnstile `<key>.turnstile` that a writer holds while it waits,
so a stream of readers cannot starve it. A reader passes the turnstile before taking its shared
lock; a waiting writer holds the turnstile, so no new reader starts until the writer is done.

The key names the physical device (the GPU's UUID, so CUDA_VISIBLE_DEVICES renumbering cannot
split one GPU into two locks). GPU locks live in one folder per machine and user
(`$KW_LOCK_DIR`, else `/tmp/kernelwright-locks-<uid>`), whatever cache folder a run uses: the GPU
is the machine's, so two runs with different caches still take turns. CPU runs lock "cpu" in
`<cache>/locks`, which keeps CPU wall timings of one run's concurrent workers apart. Locks are not
re-entrant across kinds: a process holding `shared()` must release it before asking for
`exclusive()` (the worker does), or it would wait for itself.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from .cachedir import cache_root

LOCK_FOLDER = "locks"


def device_key(device: str) -> str:
    """A name for the physical device behind `device` ("cuda", "cuda:1", "cpu")."""
    if not str(device).startswith("cuda"):
        return "cpu"
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # noqa: BLE001 - older torch: fall back to what CUDA_VISIBLE_DEVICES names
        uuid = ""
    if uuid:
        return "gpu-" + "".join(c for c in uuid if c.isalnum() or c == "-")
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return f"gpu-{visible[index] if index < len(visible) else index}"


class DeviceLock:
    """Readers-writer lock on one device; `waited_s` adds up the time spent waiting for it."""

    def __init__(self, key: str, folder: str | os.PathLike):
        self.key = key
        self.folder = Path(folder)
        self.waited_s = 0.0
        self._shared = None  # the lock file's handle while this process holds it shared and has not let go

    @classmethod
    def for_device(cls, device: str, cache_dir: str | os.PathLike | None = None) -> "DeviceLock":
        return cls(device_key(device), lock_folder(device, cache_dir))

    def _open(self, suffix: str):
        path = self.folder / f"{self.key}.{suffix}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            return open(path, "a+")
        except PermissionError:  # a confined worker: its supervisor made the files; flock needs no write
            return open(path, "r")

    def _take(self, handle, mode: int) -> None:
        started = time.perf_counter()
        fcntl.flock(handle.fileno(), mode)
        self.waited_s += time.perf_counter() - started

    def _pass_turnstile(self) -> None:
        """Wait behind a writer that is already waiting (it holds the turnstile), then go on."""
        with self._open("turnstile") as turnstile:
            self._take(turnstile, fcntl.LOCK_EX)
            fcntl.flock(turnstile.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self._pass_turnstile()
        with self._open("lock") as lock:
            self._take(lock, fcntl.LOCK_SH)
            self._shared = lock
            try:
                yield
            finally:
                self._shared = None
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def let_go(self) -> bool:
        """Inside `shared()`: give the hold up for a while (work that does not touch the device);
        False when there is no hold to give up. `take_again` must follow before the hold ends."""
        if self._shared is None:
            return False
        fcntl.flock(self._shared.fileno(), fcntl.LOCK_UN)
        return True

    def take_again(self) -> None:
        """After `let_go`: the shared hold again, behind any writer that waits meanwhile."""
        self._pass_turnstile()
        self._take(self._shared, fcntl.LOCK_SH)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._open("turnstile") as turnstile, self._open("lock") as lock:
            self._take(turnstile, fcntl.LOCK_EX)
            try:
                self._take(lock, fcntl.LOCK_EX)
            finally:
                fcntl.flock(turnstile.fileno(), fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def lock_folder(device: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Machine-wide for GPUs ($KW_LOCK_DIR, else /tmp/kernelwright-locks-<uid>); the run's cache
    folder for CPU runs."""
    if os.environ.get("KW_LOCK_DIR"):
        return Path(os.environ["KW_LOCK_DIR"])
    if str(device).startswith("cuda"):
        return Path(f"/tmp/kernelwright-locks-{os.getuid()}")

    return cache_root(cache_dir) / LOCK_FOLDER


class NoLock:
    """Stands in where no lock can be had (the lock folder is not writable): says so, locks nothing."""

    waited_s = 0.0

    def __init__(self, why: str):
        self.why = why

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    def let_go(self) -> bool:
        return False

    def take_again(self) -> None:
        pass


def lock_for(device: str, cache_dir: str | os.PathLike | None = None):
    """The device's lock, or a NoLock saying why there is none (never raises)."""
    try:
        lock = DeviceLock.for_device(device, cache_dir)
        lock.folder.mkdir(parents=True, exist_ok=True)
        return lock
    except Exception as exc:  # noqa: BLE001 - a judge without a lock still judges; the note says so
        return NoLock(f"no device lock ({type(exc).__name__}: {exc}): timings may overlap other workers")
