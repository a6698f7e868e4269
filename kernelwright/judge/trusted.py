"""The judge's trusted files, checked around every evaluation: its own package and the cache
records verdicts depend on.

Confinement (`confine`) makes these read-only to candidate code; this check is the second line,
and the only one where no confinement mechanism exists. Around each evaluation the judging process
takes a `snapshot` (size, modification and change times and inode of every file: a rewrite that
restores the modification time still moves the change time) of

- the kernelwright package the worker imports (every file, compiled bytecode included: a planted
  `.pyc` runs as surely as a `.py`; `compile_package` writes all of it first, so no trusted
  process adds any later);
- the baseline records (`<cache>/baselines/*.json`) and the build cache's markers and libraries
  (`<cache>/torch_extensions/*/kw_build.json`, `*.so`).

`changes(before, after)` lists package files added, changed or removed, and cache records that
existed before and were changed or removed (trusted processes add new records all the time; they
never rewrite a valid one, and `note_trusted` lists those they did). The judge then
(`api.check_trusted_files`) invalidates the changed cache entries, fails the candidate that ran
unconfined while they changed, and refuses to judge further when its own package changed under an
unconfined candidate.
"""
from __future__ import annotations

import compileall
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

Stat = tuple[int, int, int, int]

_LOCK = threading.Lock()
_COMPILED: set[str] = set()
_TRUSTED_WRITES: dict[str, Stat] = {}  # cache records trusted processes rewrote in this process
_COMPROMISED: list[str] = []  # why this process judges no more


@dataclass
class Changes:
    package: list[str] = field(default_factory=list)
    caches: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.package or self.caches)

    def describe(self, limit: int = 6) -> str:
        parts = []
        if self.package:
            parts.append(f"the judge's package ({', '.join(self.package[:limit])})")
        if self.caches:
            parts.append(f"cache records ({', '.join(self.caches[:limit])})")
        return " and ".join(parts)


@dataclass
class TrustedFiles:
    package: Path  # the kernelwright folder the worker imports
    cache: Path

    def snapshot(self) -> dict[str, Stat]:
        found: dict[str, Stat] = {}
        _walk(self.package, found)
        stat_matches(self.cache / "baselines", ("*.json",), found)
        for build in _subfolders(self.cache / "torch_extensions"):
            stat_matches(build, ("kw_build.json", "*.so"), found)
        return found

    def changes(self, before: dict[str, Stat], after: dict[str, Stat]) -> Changes:
        inside = str(self.package) + os.sep
        result = Changes()
        for path in sorted(set(before) | set(after)):
            old, new = before.get(path), after.get(path)
            if old == new:
                continue
            if path.startswith(inside):
                if not (old is None and f"{os.sep}__pycache__{os.sep}" in path):  # another interpreter's bytecode
                    result.package.append(path)
            elif old is not None and not _trusted_write(path, new):
                result.caches.append(path)
        return result


def _stat(path: str) -> Stat | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino


def _walk(folder: Path, found: dict[str, Stat]) -> None:
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            stat = _stat(path)
            if stat is not None:
                found[path] = stat


def stat_matches(folder: Path, patterns: tuple[str, ...], found: dict[str, Stat]) -> None:
    for pattern in patterns:
        for path in folder.glob(pattern):
            stat = _stat(str(path))
            if stat is not None:
                found[str(path)] = stat


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


def package_of(pythonpath: str | None, default: Path) -> Path:
    """The kernelwright folder a process with this PYTHONPATH imports (the first that has one)."""
    for entry in (pythonpath or "").split(os.pathsep):
        candidate = Path(entry) / "kernelwright"
        if entry and (candidate / "__init__.py").is_file():
            return candidate.resolve()
    return default.resolve()


def compile_package(package: Path) -> None:
    """Write every module's bytecode once per process, before the first snapshot: afterwards no
    trusted process (the supervisor, the judge itself) adds any while candidates run."""
    with _LOCK:
        if str(package) in _COMPILED:
            return
        _COMPILED.add(str(package))
    compileall.compile_dir(str(package), quiet=2, workers=1)


def note_trusted(paths: dict[str, Stat]) -> None:
    """Cache records a trusted process rewrote (the supervisor reports them)."""
    with _LOCK:
        _TRUSTED_WRITES.update({p: tuple(s) for p, s in paths.items()})


def _trusted_write(path: str, stat: Stat | None) -> bool:
    with _LOCK:
        return stat is not None and _TRUSTED_WRITES.get(path) == tuple(stat)


def invalidate(paths: list[str], cache: Path) -> list[str]:
    """Remove the cache entries these files belong to (a baseline record; a whole build folder)."""
    removed = []
    builds = cache / "torch_extensions"
    for path in map(Path, paths):
        target = path.parent if path.parent.parent == builds else path
        try:
            shutil.rmtree(target) if target.is_dir() else target.unlink()
            removed.append(str(target))
        except FileNotFoundError:
            pass
        except OSError:
            continue
    return removed


def compromise(reason: str) -> None:
    with _LOCK:
        if reason not in _COMPROMISED:
            _COMPROMISED.append(reason)


def compromised() -> str:
    """Why this process refuses to judge ("" when it still judges)."""
    with _LOCK:
        return "; ".join(_COMPROMISED)
