"""Planner: decides the next 1-3 concrete optimisation steps for a candidate.

It sees the reference, the candidate to improve (the parent the search expands, else the best),
its verdict and profile findings, the best candidate when it is another one (as a diff to the
candidate to improve), the Analyst's diagnosis, what was already tried, and retrieved skills; it answers with steps anchored to named code regions so the Coder edits the right place.
"""
from __future__ import annotations

from . import sections
from .base import Agent
from .context import Section
from .plan_parse import parse_plan
from .types import AgentContext, Plan, ParseFailure


def base_and_best(ctx: AgentContext):
    """(the candidate to work from, the best candidate when it is a different one)."""
    base = ctx.parent or ctx.best
    best = ctx.best if ctx.best is not None and base is not None and ctx.best.id != base.id else None
    return base, best


class Planner(Agent):
    name = "planner"
    title = "Planner"
    template = "planner.md.j2"
    default_max_tokens = 2048
    default_temperature = 0.7  # plans are where diversity pays; the Coder stays conservative

    def __init__(self, *args, known_skills=None, max_skills: int = 4, **kwargs) -> None:
        """`known_skills`: the library's skill names; only citations of these become skill tags."""
        super().__init__(*args, max_skills=max_skills, **kwargs)
        self.known_skills = frozenset(known_skills) if known_skills is not None else None

    def sections(self, ctx: AgentContext) -> list[Section]:
        env = self.env
        base, best = base_and_best(ctx)
        chosen = [sections.task(env, ctx), sections.attempt(env, ctx)]
        if base is not None:
            chosen += [sections.candidate_code(env, self.name, base, "base_code", 10),
                       sections.candidate_verdict(env, self.name, base, "base_verdict", 15)]
        chosen += [sections.failure(env, ctx, 11), sections.analysis(env, ctx, 30), sections.tried(env, ctx, 40, in_progress=True)]
        if best is not None:  # what the best candidate already does: a plan must not rebuild it
            chosen += [sections.code_diff(env, self.name, base, best, "best_code", 12),
                       sections.candidate_verdict(env, self.name, best, "best_verdict", 16)]
        chosen += sections.skills(env, ctx.skills, 50, self.max_skills, backend=ctx.backend, only=("When", "Steps"),
                                  brief=("When",), brief_after=2)
        return [s for s in chosen if s is not None]

    def parse(self, text: str) -> Plan | ParseFailure:
        try:
            result = parse_plan(text, self.known_skills)
        except Exception as exc:  # noqa: BLE001 - parse never raises; a parser bug becomes a retry
            result = f"the answer could not be read ({type(exc).__name__}: {exc})"
        return result if isinstance(result, Plan) else self.failure(result)
