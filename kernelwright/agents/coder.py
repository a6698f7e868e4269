"""Coder: writes the complete ModelNew module that carries out a plan (or a first version).

It sees the reference, the plan, the code it starts from, and the skills the plan cites ahead of
other context (with a plan, not the verdict, diagnosis and digest the Planner weighed: the plan is
their conclusion); it answers with one fenced python block, checked before it costs a judge run.
"""
from __future__ import annotations

from kernelwright.llm.parse import extract_code

from . import sections
from .base import Agent
from .code_check import check_candidate
from .context import REQUIRED, Section
from .planner import base_and_best
from .types import BACKENDS, AgentContext, Code, ParseFailure, Plan


class Coder(Agent):
    name = "coder"
    title = "Coder"
    template = "coder.md.j2"
    show_example = True
    default_max_tokens = 8192
    default_temperature = 0.2

    def __init__(self, *args, backend: str | None = None, max_skills: int = 3, **kwargs) -> None:
        """`backend` fixes what `parse` checks for; None accepts either backend's kernel form."""
        super().__init__(*args, max_skills=max_skills, **kwargs)
        self.backend = checked_backend(backend)

    def sections(self, ctx: AgentContext) -> list[Section]:
        env = self.env
        base, _ = base_and_best(ctx)
        cited = ctx.plan.skill_tags if isinstance(ctx.plan, Plan) else []
        chosen = [sections.task(env, ctx), sections.plan(env, ctx, REQUIRED), sections.attempt(env, ctx)]
        planned = ctx.plan is not None
        if base is not None:
            # a plan's steps point into this code, so with a plan it cannot be left out
            chosen.append(sections.candidate_code(env, self.name, base, "base_code", REQUIRED if planned else 10))
            if not planned:  # with a plan, the verdict, diagnosis and digest are what the planner weighed
                chosen.append(sections.candidate_verdict(env, self.name, base, "base_verdict", 30))
        chosen += sections.skills(env, ctx.skills, 50, self.max_skills,
                                  preferred=cited, preferred_priority=20, backend=ctx.backend,
                                  only=("Pitfalls",) if planned else (),
                                  only_cited=("Steps", "Pitfalls", "Example"))
        chosen.append(sections.failure(env, ctx, 35))
        if not planned:
            chosen += [sections.analysis(env, ctx, 40), sections.tried(env, ctx, 60)]
        return [s for s in chosen if s is not None]

    def parse(self, text: str, backend: str | None = None) -> Code | ParseFailure:
        return parse_code(self, text, backend or self.backend)


def checked_backend(backend: str | None) -> str | None:
    if backend not in (None, *BACKENDS):
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    return backend


def parse_code(agent: Agent, text: str, backend: str | None) -> Code | ParseFailure:
    """Shared by Coder and Repairer: extract the python block, then check it for `backend`."""
    try:
        found = extract_code(text, lang="python")
        if not found.ok:
            return agent.failure(found.error or "no python code block found")
        source = found.value.strip("\n") + "\n"
        checks = [check_candidate(source, b) for b in ((backend,) if backend else ("triton", "cuda"))]
        passing = next((c for c in checks if c.ok), None)
        if passing is None:
            errors = checks[0].errors if backend else _backend_neutral(checks)
            return agent.failure("; ".join(errors + checks[0].warnings))
        return Code(source=source, warnings=passing.warnings)
    except Exception as exc:  # noqa: BLE001 - parse never raises; a checker bug becomes a retry
        return agent.failure(f"the answer could not be read ({type(exc).__name__}: {exc})")


def _backend_neutral(checks) -> list[str]:
    """Errors when neither backend's form was found: the shared ones, then one line on kernels."""
    shared = [e for e in checks[0].errors if all(e in c.errors for c in checks)]
    if any(e not in shared for c in checks for e in c.errors):
        shared.append("no custom kernel found: write the kernels with Triton (`import triton` and an "
                      "`@triton.jit` function) or in CUDA compiled by "
                      "`torch.utils.cpp_extension.load_inline(...)`")
    return shared
