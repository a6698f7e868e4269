"""The request format: what the judge is asked to evaluate (a problem and a candidate, as files or
text) and what travels to the supervisor and checker as JSON. Its own module so that every process
of the judge reads it without importing the judge's entry point (`api`), which starts them."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .config import JudgeConfig


@dataclass
class SourceText:
    """A problem or candidate given as text rather than a file; `name` names it in messages."""

    text: str
    name: str = "candidate"


def text_of(item: "SourceText | str | os.PathLike") -> str:
    """The source of a problem or candidate given as text or as a file; "" when the file cannot be read."""
    if isinstance(item, SourceText):
        return item.text
    try:
        return Path(item).read_text()
    except (OSError, UnicodeDecodeError):
        return ""


@dataclass
class JudgeRequest:
    """What the worker process is asked to do; travels as JSON."""

    config: dict[str, Any]
    result_path: str
    progress_path: str
    phase: str = "evaluate"  # or "compile"
    problem_path: str | None = None
    problem_source: str | None = None
    problem_name: str = "problem"
    candidate_path: str | None = None
    candidate_source: str | None = None
    candidate_name: str = "candidate"
    # a sweep (judge/sweep.py): instances of one template, [{"params": {...}, "source": "..."}, ...],
    # benchmarked in this one evaluation; the candidate is then the first instance
    sweep: list[dict[str, Any]] | None = None

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "JudgeRequest":
        return cls(**json.loads(Path(path).read_text()))

    @property
    def problem_label(self) -> str:
        return self.problem_path or self.problem_name

    @property
    def candidate_label(self) -> str:
        return self.candidate_path or self.candidate_name


def default_cache_dir(config: JudgeConfig) -> Path:
    return Path(config.cache_dir or os.environ.get("KW_CACHE_DIR") or Path.home() / ".cache" / "kernelwright")


def make_request(problem, candidate, config: JudgeConfig, scratch: Path, phase: str = "evaluate") -> JudgeRequest:
    settings = config.to_dict()
    # resolved here: inside the sandbox HOME is the scratch folder, so "~/.cache" would not persist
    settings["cache_dir"] = str(default_cache_dir(config).expanduser().resolve())
    out = scratch / "out"  # the worker's files; the scratch folder itself stays read-only to it
    out.mkdir(parents=True, exist_ok=True)
    request = JudgeRequest(config=settings, result_path=str(out / "result.json"),
                           progress_path=str(out / "progress"), phase=phase)
    if isinstance(problem, SourceText):
        request.problem_source, request.problem_name = problem.text, problem.name
    elif problem is not None:
        request.problem_path = str(Path(problem).resolve())
    if isinstance(candidate, SourceText):
        request.candidate_source, request.candidate_name = candidate.text, candidate.name
    else:
        request.candidate_path = str(Path(candidate).resolve())
    return request


def source_filename(name: str) -> str:
    """The file name given source text gets in the worker's folder (and in its messages)."""
    stem = "".join(c if c.isalnum() or c in "_-" else "_" for c in Path(name).stem) or "source"
    return f"{stem}.py"
