"""The GPU admission ledger: what every judge process on this machine has admitted on one GPU.

Each judge process (a batch runner, the CLI's single judge, a search's pool) has its own memory
admission (admission.py). Free memory alone does not let two of them share a GPU safely: two that
admit at the same moment both see the same free memory, and an out-of-memory retry "alone" would
only keep out its own process's jobs. So every admission writes its jobs here, one file per GPU:

- `<folder>/<gpu key>.ledger.json`: a JSON object whose `entries` list each admitted job of every
  judge process on that GPU (`LedgerEntry`: pid, bytes reserved, exclusive or not, since when), and
  each exclusive job (an OOM retry) that waits for the GPU to drain: its entry already keeps new jobs
  of every process out.
- `<folder>/<gpu key>.ledger.lock`: the `fcntl.flock` that every read and change holds, so "check
  that it fits, then write my entry" is one step across processes. The data file is replaced
  atomically (temporary file, rename); the kernel drops a dead process's lock.
- Entries of processes that are gone (killed, crashed, or a pid reused by another process) are
  pruned on every read. A file that cannot be read as a ledger is rebuilt empty, not a crash (the
  jobs it listed are forgotten: their memory still shows in the GPU's free memory).

The pool keeps its ledgers in the machine-wide GPU lock folder (`pool.machine_ledger`:
gpulock.lock_folder, $KW_LOCK_DIR, else /tmp/kernelwright-locks-<uid>), not in the run's cache
folder: two runs with different caches share the GPU all the same. Stdlib only: the pool never
imports torch.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

LEDGER_VERSION = 1
log = logging.getLogger(__name__)


@dataclass
class LedgerEntry:
    """One job of one judge process on one GPU."""

    owner: str  # the admission that wrote it (one pool: pid + a random part)
    token: str  # this job, unique
    pid: int
    started: int | None  # the process's start time (/proc, clock ticks): a reused pid is another process
    need: int  # bytes reserved
    exclusive: bool
    waiting: bool  # an exclusive job waiting for the GPU to drain
    since: float  # time.time() when admitted, or when it began to wait

    def goes_before(self, other: "LedgerEntry") -> bool:
        """Exclusive jobs take the GPU in the order they began to wait."""
        return (self.since, self.token) < (other.since, other.token)

    @classmethod
    def from_dict(cls, data: dict) -> "LedgerEntry":
        names = {f.name for f in fields(cls)}
        entry = cls(**{k: v for k, v in data.items() if k in names})
        if not isinstance(entry.pid, int) or not isinstance(entry.need, int):
            raise ValueError(f"not a ledger entry: {data!r}")
        return entry


class GpuLedger:
    """The ledger of one GPU (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike, key: str):
        self.folder = Path(folder)
        self.key = key
        self.path = self.folder / f"{key}.ledger.json"
        self.lock_path = self.folder / f"{key}.ledger.lock"

    def entries(self) -> list[LedgerEntry]:
        """Every live entry (dead ones are pruned)."""
        with self._locked() as entries:
            return list(entries)

    def admit_if(self, entry: LedgerEntry, decide: Callable[[list[LedgerEntry]], bool]) -> list[LedgerEntry] | None:
        """Write `entry` (replacing one with its token) if `decide(the other admissions' entries)`
        says yes, in one step under the lock; returns those entries when written, else None."""
        with self._locked() as entries:
            others = [e for e in entries if e.owner != entry.owner]
            if not decide(others):
                return None
            entries[:] = [e for e in entries if e.token != entry.token] + [entry]
            return others

    def put(self, entry: LedgerEntry) -> None:
        self.admit_if(entry, lambda others: True)

    def remove(self, token: str) -> list[LedgerEntry]:
        """Drop the entry `token`; returns the other admissions' running jobs still listed."""
        with self._locked() as entries:
            mine = [e for e in entries if e.token == token]
            entries[:] = [e for e in entries if e.token != token]
            owner = mine[0].owner if mine else None
            return [e for e in entries if e.owner != owner and not e.waiting]

    def stamp(self) -> tuple[int, int] | None:
        """Changes whenever the file is rewritten (a cheap "anything new?" between polls)."""
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_ino, info.st_mtime_ns

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[LedgerEntry]]:
        """The live entries, under the lock; what the caller changes in the list is written back.
        A ledger that cannot be opened (a full or read-only /tmp) lists nothing and keeps nothing:
        admission then sees this process's jobs only, and the evaluation goes on."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            lock = open(self.lock_path, "a+")
        except OSError as exc:
            log.warning("GPU ledger %s cannot be used (%s): other judge processes are not seen", self.lock_path, exc)
            yield []
            return
        with lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                stored, clean = self._read()
                entries = [e for e in stored if process_alive(e.pid, e.started)]
                before = list(entries)
                yield entries
                if entries != before or len(entries) != len(stored) or not clean:
                    self._write(entries)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read(self) -> tuple[list[LedgerEntry], bool]:
        """The stored entries, and whether the file was a well-formed ledger (a missing one is)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return [], True
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("GPU ledger %s unreadable (%s): rebuilt empty", self.path, exc)
            return [], False
        try:
            data = json.loads(text)
            return [LedgerEntry.from_dict(item) for item in data["entries"]], True
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("GPU ledger %s is not a ledger (%s): rebuilt empty", self.path, exc)
            return [], False

    def _write(self, entries: list[LedgerEntry]) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps({"version": LEDGER_VERSION, "entries": [asdict(e) for e in entries]}))
            os.replace(temporary, self.path)
        except OSError as exc:  # the change is lost, not the evaluation: other processes miss this job
            log.warning("GPU ledger %s not written (%s)", self.path, exc)
            with contextlib.suppress(OSError):
                temporary.unlink()


def process_alive(pid: int, started: int | None) -> bool:
    """Whether `pid` is still the process that wrote the entry (not gone, not a zombie, not reused)."""
    stat = _proc_stat(pid)
    if stat is not None:
        state, start = stat
        return state not in ("Z", "X") and (started is None or start == started)
    if Path("/proc/self/stat").exists():
        return False  # /proc works here and has no such process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) from /proc/<pid>/stat, None without it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    rest = text[text.rfind(")") + 2:].split()  # after "pid (comm) ": field 3 (state) onwards
    try:
        return rest[0], int(rest[19])  # field 22: starttime
    except (IndexError, ValueError):
        return None


def new_entry(owner: str, token: str, need: int, exclusive: bool, waiting: bool = False,
              since: float | None = None) -> LedgerEntry:
    pid = os.getpid()
    return LedgerEntry(owner=owner, token=token, pid=pid, started=_own_start(pid), need=need,
                       exclusive=exclusive, waiting=waiting, since=time.time() if since is None else since)


@functools.lru_cache(maxsize=4)
def _own_start(pid: int) -> int | None:
    return process_start(pid)
