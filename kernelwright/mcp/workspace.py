"""The folders one server may touch: its workspace, plus folders it may only read problems from.

A path from a client is taken relative to the workspace (or as given, when absolute), resolved
with every symbolic link followed, and refused unless the result lies inside the workspace (or,
for reading, inside one of the extra read-only folders). So `../x`, an absolute path elsewhere and
a link inside the workspace that points outside all get the same clear refusal.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .validation import BAD_PATH, NOT_FOUND, TOO_LARGE, Limits, ToolInputError, run_name, text

RUNS_FOLDER = "kw-runs"  # the CLI's default workspace for runs, under the server's workspace
RUN_DB = "run.sqlite"


@dataclass(frozen=True)
class Workspace:
    root: Path  # resolved
    read_roots: tuple[Path, ...] = ()  # resolved; problems may be read from these too
    limits: Limits = Limits()

    @classmethod
    def open(cls, root: str | os.PathLike, read_roots=(), limits: Limits | None = None) -> "Workspace":
        folder = Path(root).expanduser().resolve()
        if not folder.is_dir():
            raise ValueError(f"workspace {folder} is not a folder")
        extra = []
        for entry in read_roots:
            path = Path(entry).expanduser().resolve()
            if not path.is_dir():
                raise ValueError(f"--allow {entry}: {path} is not a folder")
            extra.append(path)
        return cls(folder, tuple(extra), limits or Limits())

    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS_FOLDER

    # ---- paths -------------------------------------------------------------------------------

    def resolve(self, value: str, field: str, *, write: bool = False) -> Path:
        """`value` as a resolved path inside the workspace (or a read-only folder unless `write`)."""
        raw = text(value, field, self.limits.path_chars)
        path = Path(raw.strip())
        resolved = (path if path.is_absolute() else self.root / path).resolve()
        roots = (self.root,) if write else (self.root, *self.read_roots)
        if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
            where = "the workspace" if write else "the workspace or the folders it may read"
            raise ToolInputError(BAD_PATH, f"`{field}` {raw!r} resolves to {resolved}, which is outside {where} "
                                           f"({', '.join(str(r) for r in roots)})", field)
        return resolved

    def problem_file(self, value: str, field: str = "problem") -> Path:
        """A readable problem file (`.py`, at most `limits.problem_bytes`)."""
        path = self.resolve(value, field)
        if not path.is_file():
            raise ToolInputError(BAD_PATH, f"`{field}` {value!r}: no such file ({path})", field)
        if path.suffix != ".py":
            raise ToolInputError(BAD_PATH, f"`{field}` {value!r} is not a Python file", field)
        size = path.stat().st_size
        if size > self.limits.problem_bytes:
            raise ToolInputError(TOO_LARGE, f"`{field}` {value!r} is {size} bytes; at most "
                                            f"{self.limits.problem_bytes}", field)
        return path

    def folder(self, value: str, field: str) -> Path:
        path = self.resolve(value, field)
        if not path.exists():
            raise ToolInputError(BAD_PATH, f"`{field}` {value!r}: not found ({path})", field)
        return path

    def shown(self, path: str | os.PathLike) -> str:
        """A path as a client should see it: relative to the workspace when inside it."""
        path = Path(path)
        try:
            return str(path.resolve().relative_to(self.root))
        except ValueError:
            return str(path)

    # ---- runs --------------------------------------------------------------------------------

    def run_dir(self, run: str, field: str = "run", markers: tuple[str, ...] = (RUN_DB,)) -> Path:
        """A run folder (holding one of `markers`): a name under the runs folder, or a folder path
        inside the workspace."""
        value = text(run, field, self.limits.path_chars).strip()
        target = value
        if "/" not in value and os.sep not in value:
            target = str(self.runs_dir / run_name(value, field))
        path = self.resolve(target, field, write=True)
        if not any((path / marker).is_file() for marker in markers):
            raise ToolInputError(NOT_FOUND, f"no run {value!r}: {self.shown(path)} holds no {RUN_DB} (start one "
                                            "with optimize_start, or list runs with the kernelwright://runs "
                                            "resource)", field)
        return path

    def new_run_dir(self, name: str) -> Path:
        """The folder for a new run under the runs folder (which must itself be in the workspace)."""
        path = self.resolve(str(self.runs_dir / run_name(name)), "run", write=True)
        if path.exists():
            raise ToolInputError(BAD_PATH, f"{self.shown(path)} exists already", "run")
        return path

    def run_folders(self) -> list[Path]:
        """Run folders under the runs folder, oldest first."""
        if not self.runs_dir.is_dir():
            return []
        found = [p.parent for p in self.runs_dir.glob(f"*/{RUN_DB}")]
        return sorted(found, key=lambda p: (p / RUN_DB).stat().st_mtime)
