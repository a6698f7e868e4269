"""Section builders shared by the agents: each turns one part of an AgentContext into a `Section`
whose frame is a partial template in prompts/sections/, so wording lives in files, not here."""
from __future__ import annotations

import re
from typing import Any, Iterable

import jinja2

from . import templates
from .context import REQUIRED, Section, trim_text
from .types import AgentContext, CandidateView

FAILURE_CHARS = 6000  # about 1500 tokens: the first errors and the final frames of any log
ANALYSIS_CHARS = 4000


def _frame(env: jinja2.Environment, template: str, **variables: Any):
    """A frame that renders prompts/sections/<template>.md.j2 around a body."""
    def frame(body: str) -> str:
        return templates.render(env, f"sections/{template}.md.j2", body=body, **variables)
    return frame


def task(env: jinja2.Environment, ctx: AgentContext) -> Section:
    """The reference program: the one thing no prompt can do without, never cut."""
    return Section("task", REQUIRED, ctx.problem_source, _frame(env, "task", ctx=ctx), trim="none")


def candidate_code(env, agent: str, view: CandidateView, name: str, priority: int) -> Section:
    """Code is shown whole or not at all: a cut kernel invites edits to code that is not there.

    `name` is base_code or best_code; the heading comes from sections/headings.md.j2.
    """
    frame = _frame(env, "candidate_code", view=view, agent=agent, section=name)
    return Section(name, priority, view.code, frame, trim="none")


def candidate_verdict(env, agent: str, view: CandidateView, name: str, priority: int) -> Section:
    """Status, speedup, the engine's summary and the profile findings (base_verdict or best_verdict)."""
    findings = "\n".join(f"- {line.strip()}" for line in view.findings if line and line.strip())
    body = "\n\n".join(part for part in (view.summary.strip(), findings) if part)
    frame = _frame(env, "candidate_verdict", view=view, agent=agent, section=name)
    return Section(name, priority, body, frame, trim="head", min_chars=200)


def failure(env, ctx: AgentContext, priority: int, min_chars: int = 400,
            max_chars: int = FAILURE_CHARS) -> Section | None:
    """Compile logs and tracebacks keep both ends when cut: the first error and the last frame.

    Pre-cut to `max_chars` so a huge log cannot crowd out everything ranked below it.
    """
    if not (ctx.failure or "").strip():
        return None
    body, note = _precut(ctx.failure.strip(), max_chars, "middle")
    return Section("failure", priority, body, _frame(env, "failure"), trim="middle", min_chars=min_chars, note=note)


def _demote_headings(markdown: str) -> str:
    """A skill's `## Steps` becomes `### Steps`, so it nests under the skill's own `##` heading."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", markdown, flags=re.MULTILINE)


def _precut(text: str, max_chars: int, mode: str) -> tuple[str, str]:
    """(text cut to max_chars, a note for the report when it was cut)."""
    if len(text) <= max_chars:
        return text, ""
    return trim_text(text, max_chars, mode), f"pre-cut from {len(text)} to {max_chars} characters"


def analysis(env, ctx: AgentContext, priority: int) -> Section | None:
    if not (ctx.analysis or "").strip():
        return None
    body, note = _precut(ctx.analysis.strip(), ANALYSIS_CHARS, "head")
    return Section("analysis", priority, body, _frame(env, "analysis"), trim="head", min_chars=300, note=note)


def tried(env, ctx: AgentContext, priority: int) -> Section | None:
    """The digest is ordered wins, dead ends, rest: a head cut drops the least useful lines.

    The digest's own sub-headings (memory's "Already tried", the engine's "In progress") stay: the
    in-progress one tells a parallel planner to choose something else.
    """
    body = (ctx.tried_digest or "").strip()
    if not body:
        return None
    return Section("tried", priority, body, _frame(env, "tried"), trim="head", min_chars=200)


def plan(env, ctx: AgentContext, priority: int) -> Section | None:
    text = ctx.plan_text()
    if not text:
        return None
    return Section("plan", priority, text, _frame(env, "plan"), trim="head", min_chars=300)


def skills(env, items: Iterable[Any], priority: int, limit: int, body_chars: int,
           preferred: Iterable[str] = (), preferred_priority: int | None = None) -> list[Section]:
    """One section per skill, ranked as given (retrieval order), at most `limit`.

    Skills named in `preferred` (those a plan cites) move up to `preferred_priority` and are
    exempt from the limit. Bodies are pre-cut to `body_chars`: a skill's first sections (When,
    Steps) carry most of its value.
    """
    preferred = set(preferred)
    sections, ranked = [], 0
    for item in items:
        name = str(getattr(item, "name", "") or "skill")
        body = str(getattr(item, "body", "") or "").strip()
        if not body:
            continue
        cited = name in preferred and preferred_priority is not None
        if not cited and ranked >= limit:
            continue
        rank_priority = preferred_priority if cited else priority + ranked
        ranked += 0 if cited else 1
        body, note = _precut(_demote_headings(body), body_chars, "head")
        frame = _frame(env, "skill", name=name, title=str(getattr(item, "title", "") or name))
        sections.append(Section(f"skill:{name}", rank_priority, body, frame, trim="head", min_chars=300,
                                group="skills", note=note))
    return sections
