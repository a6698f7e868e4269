"""Compact results the engine reasons about.

`EvalResult` is what the search needs from a judge `Verdict` (status, speedups, a failure text an
agent can act on, profiler findings); the full verdict stays in the store. Keeping the engine on
this small record means a verdict schema change touches one function, not the strategies. It is
also the replay log's record of an evaluation; prompts see it as agents.types.VerdictView, made per
prompt (docs/architecture.md, "One verdict, three readers").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelwright.tune.cost import verdict_seconds

from .verdict_facts import verdict_facts

if TYPE_CHECKING:  # the judge's sweep record, imported when one is read: the engine's import stays free of the judge
    from kernelwright.judge.sweep import SweepResult

FAILURE_CHARS = 3000  # a failure text longer than this is cut (head and tail kept)


@dataclass
class AskFailure:
    """An ask that could not be answered for good (provider error, cassette miss, judge crash).

    `kind` is the exception's class name; the engine treats it like an unusable answer.
    """

    kind: str
    message: str


@dataclass
class EvalResult:
    status: str  # "pass" | "fail" | "error" (the verdict's status)
    stage: str = "load"
    outcome: str = "crash"  # trajectory outcome: faster, slower, pass, compile_error, wrong, ...
    speedup: dict[str, float] = field(default_factory=dict)  # "eager", "compile_default", ...
    median_ms: float | None = None
    baseline_ms: dict[str, float] = field(default_factory=dict)
    trials_passed: int = 0
    trials_total: int = 0
    error: str = ""  # what went wrong, ready for a Repairer prompt ('' when it passed)
    findings: list[str] = field(default_factory=list)
    bottleneck: str | None = None
    device: str = "cpu"
    timing_method: str = ""
    iqr_ms: float | None = None
    timed_calls: int | None = None
    timing_note: str = ""  # e.g. "CPU wall time: not GPU performance"
    l2_flushed: bool = False
    floor: dict[str, Any] = field(default_factory=dict)  # judge Floor fields (floor_ms, pct_of_floor, bound, ...)
    kernels: dict[str, Any] = field(default_factory=dict)  # judge/kernel_times.py record
    profile: dict[str, Any] = field(default_factory=dict)  # profile_facts(): class, hot kernels, notices
    margin: float | None = None  # worst measured error / allowed error over the trials (1.0 = at the limit)
    shrunk: bool = False  # judged at the CPU's shrunk sizes
    # what the compiler reported per kernel (tune.prune.KernelResources dicts: registers, spills,
    # shared memory), read by the tuning step's resource pruning; empty when the judge reports none
    resources: list[dict[str, Any]] = field(default_factory=list)
    device_s: float = 0.0  # seconds in the stages that ran kernels (tune.cost.verdict_seconds)
    judge_s: float = 0.0  # wall seconds of the judging process
    # where an asynchronous CUDA fault happened, when the judge reran the failing trial to locate it
    # (`Verdict.fault`: tool, kernel, where, report); empty when it did not
    fault: dict[str, Any] = field(default_factory=dict)
    # the eager reference's kernels by share of its GPU time (`Baselines.kernels`), when measured
    reference_kernels: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def speedup_for(self, objective: str) -> float | None:
        """Speedup against `objective` (e.g. "eager"); falls back to eager when that baseline is
        missing (torch.compile may be unavailable on a CPU machine)."""
        value = self.speedup.get(objective)
        return value if value is not None else self.speedup.get("eager")

    def summary(self, objective: str = "eager") -> str:
        """One line for tables and logs (prompts show the whole evidence: search/context.verdict_view)."""
        trials = f"{self.trials_passed}/{self.trials_total} trials" if self.trials_total else "no trials"
        if self.passed:
            speed = self.speedup_for(objective)
            timed = f"{speed:.2f}x vs {objective}" if speed is not None else "not timed"
            return f"correct ({trials}), {timed}"
        first = self.error.strip().splitlines()[0] if self.error.strip() else "no detail"
        return f"{self.outcome} at stage {self.stage}: {first[:200]}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalResult":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_verdict(cls, verdict) -> "EvalResult":
        """Condense a judge Verdict (kernelwright.judge.verdict.Verdict)."""
        passed_trials = sum(1 for t in verdict.trials if t.ok)
        baselines = {}
        if verdict.baselines is not None:
            for name in ("eager", "compile_default", "compile_max_autotune"):
                stats = getattr(verdict.baselines, name, None)
                if stats is not None:
                    baselines[name] = stats.median_ms
        from kernelwright.tune.evaluate import verdict_resources  # noqa: PLC0415 -- it loads judge code and sqlite3 (the tuning cache), which the engine's process does not (tests/search/test_engine.py)

        profile = verdict.profile if isinstance(verdict.profile, dict) else {}
        device_s, judge_s = verdict_seconds(verdict)
        return cls(
            status=verdict.status, stage=verdict.stage, outcome=_outcome(verdict),
            speedup={k: float(v) for k, v in (verdict.speedup or {}).items() if v is not None},
            median_ms=verdict.timing.median_ms if verdict.timing else None,
            baseline_ms=baselines, trials_passed=passed_trials, trials_total=len(verdict.trials),
            error="" if verdict.passed else failure_text(verdict),
            findings=_findings(profile), bottleneck=_bottleneck(verdict, profile),
            device=verdict.device, timing_method=verdict.timing.method if verdict.timing else "",
            resources=[r.to_dict() for r in verdict_resources(verdict)],
            device_s=round(device_s, 3), judge_s=round(judge_s, 3), **verdict_facts(verdict, profile),
            fault={k: str(v) for k, v in (getattr(verdict, "fault", None) or {}).items() if v},
            reference_kernels=list(((getattr(verdict.baselines, "kernels", None) or {}).get("kernels") or [])),
        )


@dataclass
class SweepOutcome:
    """What a sweep ask found: the judge's record (`judge.sweep.SweepResult`: per configuration its
    params, status, time and reason, in the order asked) and what the evaluation cost. The record
    ranks configurations; it is no verdict (the winner is judged in full by an ask of its own)."""

    record: "SweepResult"
    device: str = "cpu"
    device_s: float = 0.0
    judge_s: float = 0.0
    error: str = ""  # the evaluation's own error, when the sweep did not run to its end

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record.to_dict(), "device": self.device, "device_s": self.device_s,
                "judge_s": self.judge_s, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepOutcome":
        from kernelwright.judge.sweep import SweepResult  # noqa: PLC0415 -- the engine's process loads no judge code (tests/search/test_engine.py): loaded where the search meets the judge's results

        return cls(SweepResult.from_dict(data.get("record") or {}), device=data.get("device", "cpu"),
                   device_s=float(data.get("device_s") or 0.0), judge_s=float(data.get("judge_s") or 0.0),
                   error=data.get("error", ""))

    @classmethod
    def from_verdict(cls, record: "SweepResult", verdict) -> "SweepOutcome":
        device_s, judge_s = verdict_seconds(verdict)
        return cls(record, device=verdict.device, device_s=round(device_s, 3), judge_s=round(judge_s, 3),
                   error=record.ended_early and (verdict.error or "") or "")


@dataclass
class SeedsResult:
    """The seed cache's configurations for a template, best first ([] when it holds none)."""

    configs: list[dict[str, Any]] = field(default_factory=list)


def _outcome(verdict) -> str:
    """The trajectory outcome word for a verdict (memory.trajectory.OUTCOMES)."""
    if verdict.passed:
        speed = (verdict.speedup or {}).get("eager")
        if speed is None:
            return "pass"
        return "faster" if speed > 1.0 else "slower"
    if verdict.process is not None and verdict.process.timed_out:
        return "timeout"
    if verdict.reject_flags():
        return "rejected"
    if verdict.compile is not None and not verdict.compile.ok:
        return "compile_error"
    if verdict.stage in ("load", "compile"):
        return "compile_error" if verdict.stage == "compile" else "crash"
    if verdict.trials and not all(t.ok for t in verdict.trials):
        return "wrong"
    return "crash"


def failure_text(verdict) -> str:
    """What a Repairer needs: the judge's paragraph, compiler errors, failed trials, reject flags."""
    parts = []
    if verdict.error:
        parts.append(verdict.error.strip())
    if verdict.compile is not None and not verdict.compile.ok:
        if verdict.compile.errors:
            parts.append("Compiler errors:\n" + "\n".join(verdict.compile.errors[:5]))
        elif verdict.compile.log:
            parts.append("Compiler output:\n" + verdict.compile.log.strip())
    failed = [t for t in verdict.trials if not t.ok]
    for trial in failed[:3]:
        errs = ", ".join(f"{name}={value:.3g}" for name, value in (
            ("max_abs_err", trial.max_abs_err), ("max_rel_err", trial.max_rel_err),
            ("rel_l2_err", trial.rel_l2_err)) if value is not None)
        message = trial.message if trial.message and trial.message not in (verdict.error or "") else ""
        detail = "; ".join(x for x in (message, errs, "" if trial.shape_ok else "wrong shape",
                                          "" if trial.dtype_ok else "wrong dtype",
                                          "non-finite values" if trial.nonfinite else "") if x)
        parts.append(f"Trial {trial.trial} (inputs: {trial.variant}) failed: {detail}")
    for flag in verdict.reject_flags():
        parts.append(f"Rejected ({flag.code}): {flag.message}")
    if verdict.process is not None and verdict.process.timed_out:
        parts.append(f"The candidate's process timed out after {verdict.process.wall_s:.0f} s.")
    if not parts and verdict.process is not None and verdict.process.stderr_tail:
        parts.append("stderr:\n" + verdict.process.stderr_tail.strip())
    return _cut("\n\n".join(parts) or f"the judge reported status {verdict.status} at stage {verdict.stage}")


def _cut(text: str, limit: int = FAILURE_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    return text[:head] + "\n… [cut] …\n" + text[-(limit - head):]


def _findings(profile: dict) -> list[str]:
    """The profiler's sentences (profile.report.Finding dicts), with their skill tags cited."""
    out = []
    for item in profile.get("findings") or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and item.get("text") and item.get("kind") != "notice":  # notices: profile_facts
            tags = "".join(f"[{t}]" for t in item.get("tags") or [])
            out.append(f"{item['text']} {tags}".strip())
    return out[:8]


def _bottleneck(verdict, profile: dict) -> str | None:
    value = profile.get("bottleneck")
    if isinstance(value, dict):
        value = value.get("kind") or value.get("name")
    if isinstance(value, str) and value and value != "unknown":
        return value
    if verdict.floor is not None and verdict.floor.bound:
        return verdict.floor.bound
    return None
