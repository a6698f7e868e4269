"""The reference store: every trial's reference outputs of one problem, computed once and shared by
every candidate judged with the same settings (`<cache>/references/<key>/`).

Stdlib only: the trusted supervisor (`supervisor`) is the one process that writes the store, and it
never imports torch. The worker side (`refcases`) says what an entry holds and loads it.

- The key is a hash of everything the reference outputs depend on (`key_of`): the problem's source,
  its resolved sizes, the seed, trials and their input variants, the device and its name, the rule
  set and precision switches, the torch/Triton/numpy versions and the judge code that computes them.
  The worker sends these fields before any candidate code exists in its process; the supervisor
  accepts one lookup and one store per evaluation, and none after the baseline seal (`supervisor`).
- An entry is published whole or not at all: the supervisor copies the worker's staged file into a
  temporary folder of the store, hashing as it copies, writes the manifest (sizes and BLAKE2b
  digests) and renames the folder to its key (`publish`). A confined worker cannot write the store.
- Every hit is verified against its manifest (`verify`): a missing, partial, corrupted or tampered
  entry is removed and the reference is computed again, never trusted. A data file whose
  `fingerprint` (inode, size, modification and status-change times) is the one recorded when it was
  published has not been written since and is not read through again (on the H100 the full digest
  of a 384 MiB entry took 0.89 s, more than computing that reference); any other is digested whole.
- A miss is counted per key (`.missed-<key>`, written by the supervisor): references that compute
  fast are stored only once they are asked for again (`missed_before`), so a problem judged once
  does not pay for writing an entry, and one judged by many candidates pays for it once.
- The store is bounded (`evict`): entries above the per-entry cap are never stored (the worker
  computes as before and says so), and the least recently used entries go when the total exceeds
  its cap.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.files import outside_folders

FOLDER = "references"
DATA_FILE = "cases.pt"
MANIFEST = "manifest.json"
FORMAT = 1
MISS_MEMORY_S = 7 * 24 * 3600
MISSED = ".missed-"  # + key: how often a lookup of the key missed (a plain file in the store's folder)
_CHUNK = 1 << 22


class ReferenceStoreError(RuntimeError):
    """A staged entry the store refuses (wrong place, not a plain file, over the cap)."""


@dataclass
class Lookup:
    key: str
    path: Path | None = None  # the verified data file on a hit
    why: str = ""  # why it missed: "absent", or what was wrong with the entry (then removed)
    verify_s: float = 0.0
    missed_before: int = 0  # earlier lookups of the key that missed (their references were not stored)

    def to_reply(self) -> dict[str, Any]:
        return {"key": self.key, "hit": self.path is not None, "path": str(self.path) if self.path else "",
                "why": self.why, "verify_s": round(self.verify_s, 4), "missed_before": self.missed_before}


def key_of(fields: dict[str, Any]) -> str:
    """The entry's name: a hash of the fields, in a canonical JSON form."""
    text = json.dumps({"format": FORMAT, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def root(cache: Path) -> Path:
    return cache / FOLDER


def lookup(cache: Path, key: str) -> Lookup:
    """The verified entry for `key`; a bad entry is removed and reported as a miss."""
    started = time.perf_counter()
    entry = root(cache) / key
    if not entry.is_dir():
        return Lookup(key, why="absent", missed_before=count_miss(cache, key))
    problem = verify(entry)
    if problem:
        shutil.rmtree(entry, ignore_errors=True)
        return Lookup(key, why=f"entry discarded ({problem})", verify_s=time.perf_counter() - started,
                      missed_before=count_miss(cache, key))
    try:
        os.utime(entry / MANIFEST)  # recently used: evicted last
    except OSError:
        pass
    return Lookup(key, path=entry / DATA_FILE, verify_s=time.perf_counter() - started)


def count_miss(cache: Path, key: str) -> int:
    """Count one more miss of `key`; returns how many there were before (0 when unknown). Two
    lookups at the same moment may count once: the count only decides when to store."""
    path = root(cache) / f"{MISSED}{key}"
    try:
        before = int(path.read_text() or 0) if path.is_file() and not path.is_symlink() else 0
    except (OSError, ValueError):
        before = 0
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}")  # a leftover goes with the stale counts
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(str(before + 1))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return before


def verify(entry: Path) -> str:
    """'' when every file of the entry has its manifest's size and digest, else what is wrong."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no readable manifest"
    if manifest.get("format") != FORMAT or manifest.get("key") != entry.name or set(files) != {DATA_FILE}:
        return "manifest of another format or key"
    for name, expected in files.items():
        path = entry / name
        try:
            info = path.lstat()
        except OSError:
            return f"{name} is missing"
        if not stat.S_ISREG(info.st_mode) or info.st_size != expected.get("bytes"):
            return f"{name} has {info.st_size} bytes, the manifest says {expected.get('bytes')}"
        if expected.get("stat") == fingerprint(info):
            continue  # untouched since it was published (see `fingerprint`): no need to read it all
        if digest(path) != expected.get("blake2b"):
            return f"{name} does not match its digest"
    return ""


def fingerprint(info: os.stat_result) -> list[int]:
    """What changes whenever a file is written: inode, size, modification and status-change times
    (ns). The status-change time cannot be set back from user space (setting the modification time
    back changes it), so an unchanged fingerprint means the file was not written since publishing;
    a changed one (a write, a chmod, a copy) sends the entry through the full digest check."""
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def digest(path: Path) -> str:
    sha = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def publish(cache: Path, key: str, staged: Path, allowed: list[Path], entry_cap: int, total_cap: int,
            fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """Copy the worker's staged data file into the store as entry `key` (atomically: a temporary
    folder renamed); `allowed` are the folders the staged file must lie in (the worker's own)."""
    source = _checked_source(staged, allowed, entry_cap)
    store = root(cache)
    store.mkdir(parents=True, exist_ok=True)
    final = store / key
    if final.is_dir() and not verify(final):
        return {"ok": True, "key": key, "stored": False, "why": "another evaluation stored it first"}
    tmp = store / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        size, sha = _copy_hashing(source, tmp / DATA_FILE)
        manifest = {"format": FORMAT, "key": key, "created": time.time(), "fields": fields or {},
                    "files": {DATA_FILE: {"bytes": size, "blake2b": sha,
                                          "stat": fingerprint((tmp / DATA_FILE).lstat())}}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
        if final.exists():  # a bad entry (verify failed above): replace it
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:  # a concurrent evaluation published the same key between the checks
            return {"ok": True, "key": key, "stored": False, "why": "another evaluation stored it first"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (store / f"{MISSED}{key}").unlink(missing_ok=True)
    evicted = evict(cache, total_cap, keep=key)
    return {"ok": True, "key": key, "stored": True, "bytes": size, "evicted": evicted}


def _checked_source(staged: Path, allowed: list[Path], entry_cap: int) -> Path:
    why = outside_folders(staged, allowed)
    if why:
        raise ReferenceStoreError(f"{staged} {why}")
    path = Path(os.path.abspath(staged))
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise ReferenceStoreError(f"{staged} is not a plain file")
    if info.st_size > entry_cap:
        raise ReferenceStoreError(f"{staged} has {info.st_size} bytes, above the cap of {entry_cap}")
    return path


def _copy_hashing(source: Path, target: Path) -> tuple[int, str]:
    sha, size = hashlib.blake2b(digest_size=32), 0
    with open(source, "rb") as src, open(target, "xb") as dst:
        while chunk := src.read(_CHUNK):
            sha.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    os.chmod(target, 0o444)
    return size, sha.hexdigest()


def evict(cache: Path, total_cap: int, keep: str = "") -> list[str]:
    """Remove least recently used entries (and stale temporary folders) until the store's total
    size is within `total_cap`; `keep` is never removed. Returns the keys removed."""
    store = root(cache)
    entries, total, removed = [], 0, []
    for count in store.glob(f"{MISSED}*") if store.is_dir() else []:
        if time.time() - _mtime(count) > MISS_MEMORY_S:  # a problem not asked for in a week starts again
            count.unlink(missing_ok=True)
    for entry in _entries(store):
        if entry.name.startswith(".tmp-"):
            if time.time() - _mtime(entry) > 3600:  # left by a supervisor that died while copying
                shutil.rmtree(entry, ignore_errors=True)
            continue
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        entries.append((_mtime(entry / MANIFEST), entry, size))
        total += size
    for _, entry, size in sorted(entries, key=lambda e: e[0]):
        if total <= total_cap:
            break
        if entry.name == keep:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
        total -= size
    return removed


def _entries(store: Path) -> list[Path]:
    try:
        return [p for p in store.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
