"""Repairer: makes the smallest change that fixes a compile error, a wrong result or a judge flag.

It sees the failing code and the failure in full priority (both required), the plan the code was
meant to carry out, and a couple of skills for their pitfalls; nothing about other candidates, so
it fixes rather than re-designs.
"""
from __future__ import annotations

import re

from . import sections
from .base import Agent
from .coder import checked_backend, parse_code
from .context import REQUIRED, Section
from .types import AgentContext, Code, ParseFailure


class Repairer(Agent):
    name = "repairer"
    title = "Repairer"
    template = "repairer.md.j2"
    show_example = False  # it has the failing module itself: the answer's form is known
    default_max_tokens = 8192
    default_temperature = 0.0  # a fix should be the likeliest one, not a creative one

    def __init__(self, *args, backend: str | None = None, max_skills: int = 2, **kwargs) -> None:
        super().__init__(*args, max_skills=max_skills, **kwargs)
        self.backend = checked_backend(backend)

    def sections(self, ctx: AgentContext) -> list[Section]:
        broken = ctx.parent or ctx.best
        if broken is None:
            raise ValueError("Repairer needs the failing candidate in AgentContext.parent")
        if not (ctx.failure or "").strip() and not broken.summary.strip():
            raise ValueError("Repairer needs the failure (AgentContext.failure) of the candidate to fix")
        env = self.env
        failure = sections.failure(env, ctx, REQUIRED, min_chars=800)
        chosen = [sections.task(env, ctx),
                  sections.candidate_code(env, self.name, broken, "base_code", REQUIRED),
                  failure or sections.candidate_verdict(env, self.name, broken, "base_verdict", REQUIRED),
                  sections.plan(env, ctx, 10)]
        if failure is not None and broken.summary.strip():
            chosen.append(sections.candidate_verdict(env, self.name, broken, "base_verdict", 20,
                                                     show_error=False))  # the failure section holds it
        kind = cuda_fault(ctx.failure or broken.summary)
        if kind:
            fault = broken.verdict.fault if broken.verdict is not None else {}
            chosen.append(sections.note(env, "fault", "cuda_fault", kind=kind, fault=fault))
        chosen += sections.skills(env, ctx.skills, 40, self.max_skills, backend=ctx.backend, only="Pitfalls")
        return [s for s in chosen if s is not None]

    def parse(self, text: str, backend: str | None = None) -> Code | ParseFailure:
        return parse_code(self, text, backend or self.backend)


# errors CUDA reports after the fact, at the next call that waits for the GPU
_ASYNC_FAULT = re.compile(
    r"an illegal memory access was encountered|misaligned address|device-side assert triggered|"
    r"unspecified launch failure|an illegal instruction was encountered|"
    r"cudaErrorIllegalAddress|cudaErrorMisalignedAddress|cudaErrorLaunchFailure|cudaErrorAssert",
    re.IGNORECASE)


def cuda_fault(text: str | None) -> str:
    """The asynchronous CUDA error a failure reports ('' when it reports none)."""
    match = _ASYNC_FAULT.search(text or "")
    return match.group(0) if match else ""
