"""Analyst: turns a verdict and its profile findings into a diagnosis the Planner can act on.

It answers in prose, ending with a `Bottleneck:` line and a `Skills:` line; the parser keeps the
prose as the diagnosis and reads the two lines (both optional) into fields.
"""
from __future__ import annotations

import re

from . import sections
from .base import Agent
from .context import REQUIRED, Section
from .plan_parse import cited_tags, known_only, normalise_tag
from .planner import base_and_best
from .types import AgentContext, Diagnosis, ParseFailure

BOTTLENECKS = ("memory", "compute", "latency", "launch", "host", "correctness", "unknown")
MIN_DIAGNOSIS_CHARS = 40
_BOTTLENECK_LINE = re.compile(r"^\W*bottleneck\W*[:=]\s*\W*([A-Za-z-]+)", re.IGNORECASE)
_SKILLS_LINE = re.compile(r"^\W*(?:skills?|tags)\W*[:=](.*)$", re.IGNORECASE)


class Analyst(Agent):
    name = "analyst"
    title = "Analyst"
    template = "analyst.md.j2"
    default_max_tokens = 1536
    default_temperature = 0.2

    def __init__(self, *args, max_skills: int = 3, known_skills=None, **kwargs) -> None:
        super().__init__(*args, max_skills=max_skills, **kwargs)
        self.known_skills = frozenset(known_skills) if known_skills is not None else None

    def sections(self, ctx: AgentContext) -> list[Section]:
        base, best = base_and_best(ctx)
        if base is None:
            raise ValueError("Analyst needs a measured candidate in AgentContext.parent or .best")
        env = self.env
        chosen = [sections.task(env, ctx),
                  sections.candidate_verdict(env, self.name, base, "base_verdict", REQUIRED),
                  sections.candidate_code(env, self.name, base, "base_code", 10),
                  sections.failure(env, ctx, 20), sections.tried(env, ctx, 40, in_progress=True)]
        if best is not None:
            chosen.append(sections.candidate_verdict(env, self.name, best, "best_verdict", 30))
        chosen += sections.skills(env, ctx.skills, 50, self.max_skills, backend=ctx.backend, only=("When",))
        return [s for s in chosen if s is not None]

    def parse(self, text: str) -> Diagnosis | ParseFailure:
        try:
            return self._parse(text)
        except Exception as exc:  # noqa: BLE001 - parse never raises
            return self.failure(f"the answer could not be read ({type(exc).__name__}: {exc})")

    def _parse(self, text: str) -> Diagnosis | ParseFailure:
        if not isinstance(text, str) or not text.strip():
            return self.failure("the answer is empty")
        bottleneck, tags, prose = None, [], []
        for line in text.strip().splitlines():
            if (match := _BOTTLENECK_LINE.match(line)) and bottleneck is None:
                word = match.group(1).lower()
                bottleneck = word if word in BOTTLENECKS and word != "unknown" else None
            elif match := _SKILLS_LINE.match(line):
                tags += [t for t in (normalise_tag(p) for p in re.split(r"[,\s]+", match.group(1))) if t]
            else:
                prose.append(line)
        diagnosis = "\n".join(prose).strip()
        if len(diagnosis) < MIN_DIAGNOSIS_CHARS:
            return self.failure("the diagnosis is missing or too short to act on")
        tags += cited_tags(diagnosis)
        return Diagnosis(text=diagnosis, bottleneck=bottleneck, tags=known_only(list(dict.fromkeys(tags)), self.known_skills))
