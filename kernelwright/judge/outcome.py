"""Whose fault a verdict is: the one place that tells a candidate's failure from the judge's own.

    outcome(verdict) -> Outcome(kind, reason, detail)

- `correct`: the verdict passed.
- `incorrect`: the candidate's fault: a wrong result, a check that rejected it, a compile or load
  error of its code, a crash or a timeout in the stages that run it (check, time, profile), or out
  of GPU memory with the GPU to itself (`admission.OOM_ALONE`).
- `not judged`: the system's fault, never held against the candidate: an internal judge error, a
  machine that lacks a tool (`preflight.environment_error`), out of GPU memory while the GPU may
  have been shared (no `OOM_ALONE` flag: other evaluations or processes held memory, see
  judge/scheduling/admission.py), or an error outside the candidate's stages (the problem's reference could
  not run, the worker died while loading, the judge refused the request).

A `not judged` verdict says nothing about the candidate: judge it again (`kernelwright judge --batch
DIR --retry-errors`). `verdict` is a `Verdict` or its JSON dict (as a verdict file or a run's store
holds it). Stdlib only: the report reads it too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .scheduling.admission import OOM_ALONE, is_oom, oom_line
from .preflight import environment_error
from .verdict import ERROR, FAIL, PASS, REJECT, CompileResult, Flag, ProcessInfo, TrialResult, Verdict

CORRECT, INCORRECT, NOT_JUDGED = "correct", "incorrect", "not judged"
KINDS = (CORRECT, INCORRECT, NOT_JUDGED)
CANDIDATE_STAGES = ("compile", "check", "time", "profile")  # where an error is the candidate's
INTERNAL = "internal judge error"


@dataclass(frozen=True)
class Outcome:
    kind: str  # CORRECT | INCORRECT | NOT_JUDGED
    reason: str  # a few words: "wrong result", "compile error", "out of GPU memory on a shared GPU", ...
    detail: str = ""  # the line of the verdict's error that says why (at most 300 characters)

    @property
    def system_error(self) -> bool:
        return self.kind == NOT_JUDGED

    def text(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


def outcome(verdict: Verdict | dict[str, Any]) -> Outcome:
    """Correct, incorrect (the candidate's fault) or not judged (the system's), and why."""
    v = _as_verdict(verdict)
    if v.status == PASS:
        return Outcome(CORRECT, "pass")
    detail = error_line(v.error or "")
    if is_oom(v):
        oom = oom_line(v) or detail
        if any(f.code == OOM_ALONE for f in v.flags):
            return Outcome(INCORRECT, "out of GPU memory with the GPU to itself", oom)
        return Outcome(NOT_JUDGED, "out of GPU memory on a GPU that may have been shared", oom)
    machine = environment_error(v)
    if machine:
        return Outcome(NOT_JUDGED, "the machine cannot judge it", machine)
    if (v.error or "").startswith(INTERNAL):
        return Outcome(NOT_JUDGED, INTERNAL, error_line((v.error or "")[len(INTERNAL):].lstrip(": ")))
    if v.status == FAIL:
        return Outcome(INCORRECT, _failure(v), detail)
    if v.status == ERROR and v.stage in CANDIDATE_STAGES:
        timed_out = bool(v.process and v.process.timed_out)
        return Outcome(INCORRECT, f"{v.stage} timeout" if timed_out else f"{v.stage} error", detail)
    return Outcome(NOT_JUDGED, f"judge error in the {v.stage} stage", detail)


def _failure(v: Verdict) -> str:
    process = v.process
    if process is not None and process.timed_out:
        return "timeout"
    if process is not None and (process.signal or process.exit_code not in (None, 0)):
        return "crash"
    if any(f.severity == REJECT for f in v.flags):
        return "rejected by a check"
    return "wrong result"


def error_line(text: str, limit: int = 300) -> str:
    """The line of an error that says why: a traceback's last line, else the first line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if "Traceback (most recent call last)" in text else lines[0]
    return line[:limit]


def _as_verdict(data: Verdict | dict[str, Any]) -> Verdict:
    """The verdict, or from its dict; a dict of another schema or an incomplete one (a hand-written
    fixture) keeps the fields that decide: status, stage, error, flags, process, trials' messages."""
    if isinstance(data, Verdict):
        return data
    try:
        return Verdict.from_dict(data)
    except (TypeError, ValueError, KeyError):
        pass
    process = data.get("process") if isinstance(data.get("process"), dict) else None
    return Verdict(
        problem=str(data.get("problem") or ""), candidate=str(data.get("candidate") or ""),
        status=str(data.get("status") or ERROR), stage=str(data.get("stage") or "load"), error=data.get("error"),
        flags=[Flag(str(f.get("code") or ""), str(f.get("severity") or ""), str(f.get("message") or ""))
               for f in data.get("flags") or [] if isinstance(f, dict)],
        trials=[TrialResult(0, 0, "", bool(t.get("ok")), message=str(t.get("message") or ""))
                for t in data.get("trials") or [] if isinstance(t, dict)],
        process=ProcessInfo(exit_code=process.get("exit_code"), signal=process.get("signal"),
                            timed_out=bool(process.get("timed_out")), stderr_tail=str(process.get("stderr_tail") or ""))
        if process else None,
        compile=CompileResult(ok=False, log=str((data.get("compile") or {}).get("log") or ""))
        if isinstance(data.get("compile"), dict) else None)
