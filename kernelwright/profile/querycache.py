"""The counters an ncu lists for a device (`ncu --query-metrics`), asked once and kept.

Before collecting, counters the device does not list are dropped (ncu 2025.3 prints `(!) n/a` for
an unknown one instead of failing). Listing them costs an ncu start (1.2 s on the H100), which every
profile used to pay, since each judged candidate profiles in a fresh process. The list is kept in
this process and, when `ProfileConfig.cache_dir` is set, on disk, keyed by the ncu binary (its
resolved path, size and modification time: another version is another file) and the device's name.
A list too short to be a real one (an output we misread) filters nothing and is not kept.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .context import ProfileRun
from .ncu import parse_query_metrics, query_metrics_command

MIN_LISTED_METRICS = 100
LISTED: dict[str, set[str]] = {}  # key -> base metric names, in this process


def key(ncu: str, device: str) -> str:
    """Names the list: the ncu binary (path, size, mtime) and the device it was asked about."""
    path = Path(ncu)
    try:
        stat = path.resolve().stat()
        binary = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        binary = str(ncu)
    return hashlib.sha256(f"{binary}|{device}".encode()).hexdigest()[:32]


def _file(cache_dir: str, name: str) -> Path:
    return Path(cache_dir) / "ncu_query_metrics" / f"{name}.json"


def load(cache_dir: str | None, name: str) -> set[str] | None:
    if not cache_dir:
        return None
    try:
        names = json.loads(_file(cache_dir, name).read_text())
    except (OSError, ValueError):
        return None
    return set(names) if isinstance(names, list) and len(names) >= MIN_LISTED_METRICS else None


def store(cache_dir: str | None, name: str, names: set[str]) -> None:
    """Best effort: a folder the profile may not write only means asking again next time."""
    if not cache_dir or len(names) < MIN_LISTED_METRICS:
        return
    path = _file(cache_dir, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(sorted(names)))
        partial.replace(path)
    except OSError:
        pass


def available_metrics(run: ProfileRun, ncu: str) -> set[str]:
    """The base names ncu lists for this device (empty: unknown, filter nothing)."""
    name = key(ncu, run.report.device)
    if name in LISTED:
        return LISTED[name]
    names = load(run.config.cache_dir, name)
    if names is None:
        result = run.executor.ncu(ncu, query_metrics_command(ncu)[1:], min(60.0, run.timeout()))
        run.spend("ncu_query", result.seconds)
        listed = parse_query_metrics(result.output) if result.ok else set()
        names = listed if len(listed) >= MIN_LISTED_METRICS else set()
        store(run.config.cache_dir, name, names)
    LISTED[name] = names
    return names
