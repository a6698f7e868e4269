"""A batch folder's files: `NAME.request.json` written by a search, `NAME.verdict.json` written back by
the runner (judge/scheduling/batch.py), and how each is read. Its own module so that the runner and
its profile pass (batch_profile.py) share the format without importing each other.

A request (JSON object):
    name              optional; defaults to NAME from the file name
    problem_path      path of the problem file (relative paths are relative to DIR), or
    problem_source    the problem's source text, with problem_name naming it
    candidate_source  the candidate's source text; candidate_name names it (default NAME)
    config            JudgeConfig fields to override (see kernelwright/judge/config.py)
    profile           optional; true: profile the candidate too when it passes (budget permitting)
    priority          optional number; lower is judged first (a suite puts every problem's first
                      evaluation before anyone's second), then by name
    sweep             optional; instances of one template, [{"params": {...}, "source": "..."}]:
                      benchmarked in this one evaluation (judge/sweep.py), the candidate being the
                      first; the verdict carries the sweep's record (`sweep`)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..config import JudgeConfig
from ..request import SourceText
from ..sweep import parse_instances
from ..verdict import Verdict
from .pool import JudgeJob

REQUEST_SUFFIX = ".request.json"
VERDICT_SUFFIX = ".verdict.json"
REQUEST_SCHEMA = 1


class BatchError(Exception):
    """A request file that cannot be turned into a job; becomes an error verdict."""


def write_request(folder: str | Path, name: str, problem: str | Path | SourceText, candidate_source: str,
                  config: JudgeConfig | dict[str, Any] | None = None, profile: bool = False,
                  priority: float | None = None, sweep: list[dict[str, Any]] | None = None) -> Path:
    """Write NAME.request.json into `folder` (atomically); `problem` is a path or a SourceText;
    `profile` asks for a profile when the candidate passes; `priority` orders the runner's work
    (lower first); `sweep` makes it a sweep of those instances (see the module docstring)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"schema": REQUEST_SCHEMA, "name": name, "candidate_source": candidate_source,
                            "candidate_name": name}
    if isinstance(problem, SourceText):
        data.update(problem_source=problem.text, problem_name=problem.name)
    else:
        data["problem_path"] = str(problem)
    if isinstance(config, JudgeConfig):
        data["config"] = config.to_dict()
    else:
        data["config"] = dict(config or {})
    if profile:
        data["profile"] = True
    if priority is not None:
        data["priority"] = priority
    if sweep:
        data["sweep"] = [{"params": dict(i["params"]), "source": i["source"]} for i in sweep]
    path = folder / f"{name}{REQUEST_SUFFIX}"
    atomic_write(path, json.dumps(data, indent=1))
    return path


def request_name(path: Path) -> str:
    return path.name[: -len(REQUEST_SUFFIX)]


def verdict_path(request: Path) -> Path:
    return request.with_name(request_name(request) + VERDICT_SUFFIX)


def request_priority(path: Path) -> float:
    """A request's `priority` (0 when absent or unreadable: a bad request is answered at once anyway)."""
    try:
        value = json.loads(path.read_text()).get("priority", 0)
        return float(value) if isinstance(value, (int, float)) else 0.0
    except (OSError, ValueError, AttributeError):
        return 0.0


def read_verdicts(folder: str | Path) -> dict[str, Verdict]:
    """NAME -> Verdict for every verdict file in `folder` (unreadable ones are skipped)."""
    verdicts = {}
    for path in sorted(Path(folder).glob(f"*{VERDICT_SUFFIX}")):
        try:
            verdicts[path.name[: -len(VERDICT_SUFFIX)]] = Verdict.from_json(path.read_text())
        except (OSError, ValueError, TypeError):
            continue
    return verdicts


def read_request(path: Path, base: JudgeConfig | None = None) -> JudgeJob:
    """The job a request file describes; BatchError says what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BatchError(f"{path.name}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BatchError(f"{path.name}: a request must be a JSON object")
    name = str(data.get("name") or request_name(path))
    if not isinstance(data.get("candidate_source"), str):
        raise BatchError(f"{path.name}: candidate_source (the candidate's code as text) is missing")
    if data.get("problem_path"):
        problem: Path | SourceText = Path(path.parent, data["problem_path"])  # absolute paths stay absolute
    elif isinstance(data.get("problem_source"), str):
        problem = SourceText(data["problem_source"], str(data.get("problem_name") or "problem"))
    else:
        raise BatchError(f"{path.name}: give problem_path or problem_source")
    try:
        config = JudgeConfig.from_dict({**(base.to_dict() if base else {}), **(data.get("config") or {})})
    except (TypeError, ValueError) as exc:
        raise BatchError(f"{path.name}: bad config: {exc}") from None
    candidate = SourceText(data["candidate_source"], str(data.get("candidate_name") or name))
    sweep = None
    if data.get("sweep") is not None:
        try:
            sweep = [{"params": i.params, "source": i.source} for i in parse_instances(data["sweep"])]
        except ValueError as exc:
            raise BatchError(f"{path.name}: bad sweep: {exc}") from None
    return JudgeJob(problem, candidate, config, name=name, sweep=sweep)
