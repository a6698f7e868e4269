"""Measurements cached per (template hash, parameters, device, sizes, context), in SQLite.

Tuning the same template twice (a resumed run, another strategy, the CLI after the autopilot)
must not compile and time the same configuration again. `context` holds whatever else changes a
result: the judge settings or the timing method. The cache lives under
~/.cache/kernelwright/tune unless told otherwise (KW_TUNE_CACHE overrides the folder).
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from .template import config_key

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    key TEXT PRIMARY KEY,
    template TEXT NOT NULL,
    params TEXT NOT NULL,
    device TEXT NOT NULL,
    sizes TEXT NOT NULL,
    context TEXT NOT NULL,
    record TEXT NOT NULL,
    created REAL DEFAULT (julianday('now'))
)
"""


def default_cache_dir() -> Path:
    env = os.environ.get("KW_TUNE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kernelwright" / "tune"


def run_cache(run_dir: str | Path) -> "TuneCache":
    """The tuning cache a run folder carries (`<run_dir>/tune_cache.sqlite`): a driver that resumes
    the run finds every instance it measured there, whatever the user's cache holds."""
    return TuneCache(Path(run_dir) / "tune_cache.sqlite")


def digest(obj: Any) -> str:
    """A short stable hash of a JSON-able object (judge settings, sizes)."""
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TuneCache:
    """A small key-value store of measurement records (dicts); safe to share between threads."""

    def __init__(self, path: str | Path | None = None):
        path = Path(path) if path else default_cache_dir() / "measurements.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute(_SCHEMA)

    @staticmethod
    def key(template_hash: str, params: dict, device: str, sizes: Any, context: str = "") -> str:
        text = "|".join([template_hash, config_key(params), device, digest(sizes), context])
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, template_hash: str, params: dict, device: str, sizes: Any, context: str = "") -> dict | None:
        key = self.key(template_hash, params, device, sizes, context)
        with self._lock:
            row = self._db.execute("SELECT record FROM measurements WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, template_hash: str, params: dict, device: str, sizes: Any, record: dict,
            context: str = "") -> None:
        key = self.key(template_hash, params, device, sizes, context)
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO measurements (key, template, params, device, sizes, context, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, template_hash, config_key(params), device, digest(sizes), context,
                 json.dumps(record, default=str)),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
