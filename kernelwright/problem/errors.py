"""One error type for broken user files, worded for a person (and an LLM) to act on."""
from __future__ import annotations

import traceback
from pathlib import Path


class ProblemError(Exception):
    """A problem or candidate file cannot be used. The message is one paragraph naming file and line."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        where = ""
        if self.path:
            where = f"{self.path}" + (f", line {line}" if line else "") + ": "
        super().__init__(where + message)


def line_in_file(exc: BaseException, path: str | Path) -> int | None:
    """The deepest traceback line that lies in `path`: where the user's file went wrong."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return exc.lineno
    frame = deepest_frame_in(exc, path)
    return frame.lineno if frame is not None else None


def deepest_frame_in(exc: BaseException, path: str | Path) -> traceback.FrameSummary | None:
    """The deepest traceback frame that lies in `path` (its function's name and line), or None."""
    target = str(Path(path).resolve())
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            if str(Path(frame.filename).resolve()) == target:
                found = frame
        except OSError:
            continue
    return found


def wrap(exc: BaseException, path: str | Path, what: str) -> ProblemError:
    """Turn any exception raised while running a user file into a ProblemError with its line."""
    line = line_in_file(exc, path)
    detail = f"{type(exc).__name__}: {exc}".strip()
    return ProblemError(f"{what} failed with {detail}", path=path, line=line)
