"""Where the judge keeps its caches (builds, baselines, references, peaks, tool versions).

The lowest layer of the judge's GPU side: stdlib only, imported by `toolchain`, `env`, `compile`
and the stores, so none of them needs another to find the folder.
"""
from __future__ import annotations

import os
from pathlib import Path

_DEFAULT_ROOT: list[str] = []  # set by a worker for its own process (use_cache_root)


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """`cache_dir` if given, else the folder this process was told (`use_cache_root`: a worker,
    whose environment names no cache), else $KW_CACHE_DIR, else ~/.cache/kernelwright."""
    chosen = cache_dir or (_DEFAULT_ROOT[0] if _DEFAULT_ROOT else None) or os.environ.get("KW_CACHE_DIR") \
        or Path.home() / ".cache" / "kernelwright"
    return Path(chosen).expanduser()


def use_cache_root(cache_dir: str | os.PathLike | None) -> None:
    """The default of `cache_root()` in this process (the worker reads it from its request)."""
    _DEFAULT_ROOT[:] = [str(cache_dir)] if cache_dir else []
