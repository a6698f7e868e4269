"""What agents read (AgentContext, CandidateView) and what their parsers return.

Plain dataclasses: the search engine builds contexts from its own state and stores the results,
so nothing here may depend on the engine, the judge or a provider SDK.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("triton", "cuda")


@dataclass
class VerdictView:
    """A judged candidate's evidence as prompts show it, built by the engine from the verdict.

    Times are milliseconds per call; `baselines` and `speedups` are keyed by baseline name
    ("eager", "compile_default"); `floor` holds floor_ms, pct_of_floor, bound, peak_source;
    `kernels` the judge's per-kernel split (name, share, us_per_call, launches_per_call);
    `profile` the profiler's class, hot kernels and notices. Missing numbers are None or empty.
    Built per prompt from the engine's EvalResult (why both exist: docs/architecture.md, "One
    verdict, three readers").
    """

    status: str
    outcome: str = ""
    stage: str = ""
    on_gpu: bool = True
    trials_passed: int = 0
    trials_total: int = 0
    margin: float | None = None
    median_ms: float | None = None
    iqr_ms: float | None = None
    timed_calls: int | None = None
    timing_method: str = ""
    timing_note: str = ""
    l2_flushed: bool = False
    baselines: dict[str, float] = field(default_factory=dict)
    speedups: dict[str, float] = field(default_factory=dict)
    floor: dict[str, Any] = field(default_factory=dict)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    kernels_note: str = ""
    profile: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    error: str = ""
    fault: dict[str, str] = field(default_factory=dict)  # a located CUDA fault: tool, kernel, where, report

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass
class CandidateView:
    """One candidate as an agent sees it: the code plus a compact account of its verdict.

    `summary` is already condensed by the engine (trials, errors, timing, flags); `findings` are
    the profiler's plain-language sentences. Agents never read a Verdict directly, so the judge's
    schema can change without touching a prompt.
    """

    id: str
    code: str
    status: str = "unknown"
    speedup: float | None = None
    summary: str = ""
    findings: list[str] = field(default_factory=list)
    verdict: VerdictView | None = None  # the numbers; without it prompts show `summary` and `findings`
    tuned: str = ""  # "parameters tuned: ..." when the tuning step searched this candidate's parameters
    approach: str = ""  # the label of the approach that made it (the planner's words)
    made_from: str = ""  # the candidate its expansion started from ("" for a first version)
    dead_end: str = ""  # when its approach is a dead end of this run: why (time and cause), else ""


@dataclass
class Plan:
    """The Planner's answer: 1-3 steps, each anchored to a named code region.

    `approach_key` is the planner's own label of the idea, whole (the `approach` field; without
    one, the first step): trajectory memory groups attempts by it, ignoring case and punctuation.
    `skill_tags` are the skill names the steps cite (with a known library, only real skills).
    """

    steps: list[str]
    approach_key: str = "unspecified"
    skill_tags: list[str] = field(default_factory=list)
    rationale: str = ""

    def to_markdown(self) -> str:
        """The plan as the Coder and Repairer read it."""
        lines = [f"{i}. {step}" for i, step in enumerate(self.steps, start=1)]
        if self.rationale.strip():
            lines = [f"Why: {self.rationale.strip()}", ""] + lines
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()


@dataclass
class Code:
    """A candidate's full source. `warnings` are soft findings of the answer check (the judge has
    the authoritative say); an engine may show them to the model or ignore them."""

    source: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    """The Analyst's reading of a verdict and its profile, written for the Planner."""

    text: str
    bottleneck: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class ParseFailure:
    """An answer that could not be used. `feedback` is a ready-to-send user message that tells
    the model what was wrong and how to answer, so the engine can ask again without knowing why."""

    agent: str
    reason: str
    feedback: str


@dataclass
class Attempt:
    """One of several expansions started from the same node at the same time (they all see the same
    evidence, so without a direction they would write the same thing). `index` is the expansion's
    number from that node (1-based; it picks the direction from prompts/attempt_directions.md),
    `concurrent` how many expansions of the node were in progress when it started (itself included,
    at least 2), `taken` the approaches the other ones already chose (one line each)."""

    index: int
    concurrent: int
    taken: list[str] = field(default_factory=list)
    draft: bool = False  # started from the reference (a first version), not from a candidate


@dataclass
class AgentContext:
    """Everything an agent may be shown; the agent decides what fits its token budget.

    `failure` is the trimmed compile log, failed-trial report or judge flags of the candidate at
    hand; `tried_digest` is memory.Trajectory.digest(); `skills` are memory Skill objects (read
    generically through .name/.title/.body, so any object with those attributes works).
    """

    problem_name: str
    problem_source: str
    backend: str = "triton"
    device: str = ""
    op_kinds: list[str] = field(default_factory=list)
    bottleneck: str | None = None
    best: CandidateView | None = None
    parent: CandidateView | None = None
    failure: str | None = None
    tried_digest: str = ""
    skills: list[Any] = field(default_factory=list)
    plan: Plan | str | None = None
    analysis: str | None = None
    token_budget: int = 12000
    extra: dict[str, Any] = field(default_factory=dict)
    rules: str = "kernelbench"  # the rule set the judge applies (kernelwright.rules); the system prompt states it
    # the evaluation device: an object with the fields of kernelwright.judge.target.Target (kind,
    # name, arch, sm_count, l2_bytes, smem_per_block, ..., peaks, software, interpreter), read
    # generically like `skills`; None when unknown
    target: Any = None
    in_progress: list[str] = field(default_factory=list)  # what other workers are planning now
    attempt: Attempt | None = None  # set when sibling expansions of the same node run at once

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"AgentContext.backend must be one of {BACKENDS}, got {self.backend!r}")
        if not isinstance(self.problem_source, str) or not self.problem_source.strip():
            raise ValueError("AgentContext.problem_source must be the reference program's text")
        if not isinstance(self.token_budget, int) or self.token_budget <= 0:
            raise ValueError(f"AgentContext.token_budget must be a positive int, got {self.token_budget!r}")
        for name in ("best", "parent"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, CandidateView):
                raise TypeError(f"AgentContext.{name} must be a CandidateView or None, got {type(value).__name__}")

    def plan_text(self) -> str:
        """The plan as Markdown whatever form it was given in ('' when there is none)."""
        if self.plan is None:
            return ""
        return self.plan.to_markdown() if isinstance(self.plan, Plan) else str(self.plan).strip()
