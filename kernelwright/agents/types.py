"""What agents read (AgentContext, CandidateView) and what their parsers return.

Plain dataclasses: the search engine builds contexts from its own state and stores the results,
so nothing here may depend on the engine, the judge or a provider SDK.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("triton", "cuda")


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


@dataclass
class Plan:
    """The Planner's answer: 1-3 steps, each anchored to a named code region.

    `approach_key` is short and normalised so that rephrasings of one idea collide in trajectory
    memory; `skill_tags` are the skill names the steps cite.
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
