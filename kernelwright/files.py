"""Writing a file so that a reader (another process polling a folder) never sees half of it, one
writer at a time per file across processes, and telling whether a path a less trusted process
named lies in its own folders.

Stdlib only; every folder may import it, the judge too.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path


def atomic_write(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to a temporary file beside `path` and rename it over `path`; on any
    failure the temporary file is removed and the error raised."""
    path = Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked_beside(path: str | Path):
    """Hold an exclusive `flock` on `<path minus suffix>.lock` (its folder made first): one process
    at a time computes and writes `path`; the kernel drops a dead holder's lock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def outside_folders(path: str | Path, folders: list[Path]) -> str:
    """Why `path` (made absolute) is not a path inside one of `folders` reached without links: "" when
    it is, else "is not in the evaluation's own folders" or "is reached through a link"."""
    path = Path(os.path.abspath(path))
    if not any(path.is_relative_to(Path(folder).resolve()) for folder in folders):
        return "is not in the evaluation's own folders"
    if path.resolve() != path:
        return "is reached through a link"
    return ""
