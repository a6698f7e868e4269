"""Section builders shared by the agents: each turns one part of an AgentContext into a `Section`
whose frame is a partial template in prompts/sections/, so wording lives in files, not here."""
from __future__ import annotations

import difflib
import re
from typing import Any, Iterable

import jinja2

from kernelwright.rules import precision

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
    return Section("task", REQUIRED, ctx.problem_source,
                   _frame(env, "task", ctx=ctx, floor_phrase=precision.floor_phrase), trim="none")


def note(env, name: str, template: str, priority: int = REQUIRED, **variables: Any) -> Section:
    """A section whose whole text is the partial template prompts/sections/<template>.md.j2."""
    return Section(name, priority, "", _frame(env, template, **variables), trim="none")


def candidate_code(env, agent: str, view: CandidateView, name: str, priority: int) -> Section:
    """Code is shown whole or not at all: a cut kernel invites edits to code that is not there.

    `name` is base_code or best_code; the heading comes from sections/headings.md.j2.
    """
    frame = _frame(env, "candidate_code", view=view, agent=agent, section=name)
    return Section(name, priority, view.code, frame, trim="none")


def code_diff(env, agent: str, base: CandidateView, view: CandidateView, name: str, priority: int) -> Section:
    """`view`'s code as a unified diff to `base`'s (whole or not at all), or its whole code when the
    diff would be longer: a planner expanding `base` sees what the best candidate already changed."""
    diff = "".join(difflib.unified_diff(base.code.splitlines(keepends=True), view.code.splitlines(keepends=True),
                                        fromfile=base.id, tofile=view.id, n=3))
    if not diff.strip() or len(diff) >= len(view.code):
        return candidate_code(env, agent, view, name, priority)
    frame = _frame(env, "candidate_diff", view=view, base=base, agent=agent)
    return Section(name, priority, diff, frame, trim="none")


def candidate_verdict(env, agent: str, view: CandidateView, name: str, priority: int,
                      show_error: bool = True) -> Section:
    """The verdict's evidence (base_verdict or best_verdict): with a VerdictView, status, margin,
    times, both speedups, floor, kernel split, profile and findings, shown whole or not at all;
    without one, the engine's summary and the findings."""
    frame = _frame(env, "candidate_verdict", view=view, agent=agent, section=name)
    if view.verdict is not None:
        body = templates.render(env, "sections/verdict.md.j2", v=view.verdict, show_error=show_error).strip()
        return Section(name, priority, body, frame, trim="none")
    findings = "\n".join(f"- {line.strip()}" for line in view.findings if line and line.strip())
    body = "\n\n".join(part for part in (view.summary.strip(), findings) if part)
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


def tried(env, ctx: AgentContext, priority: int, in_progress: bool = False) -> Section | None:
    """The trajectory digest (wins, dead ends, the rest; whole lines, bounded by the engine) and,
    with `in_progress` (planners), what other workers are planning now. Whole or not at all: a cut
    would leave a label half-quoted."""
    body = templates.render(env, "sections/tried_body.md.j2", digest=(ctx.tried_digest or "").strip(),
                            in_progress=ctx.in_progress if in_progress else []).strip()
    if not body:
        return None
    return Section("tried", priority, body, _frame(env, "tried"), trim="none")


def plan(env, ctx: AgentContext, priority: int) -> Section | None:
    text = ctx.plan_text()
    if not text:
        return None
    return Section("plan", priority, text, _frame(env, "plan"), trim="none")  # rationale and steps whole


DIRECTIONS_FILE = "attempt_directions.md"


def attempt(env, ctx: AgentContext) -> Section | None:
    """The line that sets sibling expansions apart (None for a lone expansion): this attempt's number,
    its direction from prompts/attempt_directions.md, and what the other attempts already chose."""
    if ctx.attempt is None:
        return None
    choices = directions(env, "draft" if ctx.attempt.draft else "improve")
    body = choices[(ctx.attempt.index - 1) % len(choices)]
    return Section("attempt", REQUIRED, body, _frame(env, "attempt", attempt=ctx.attempt), trim="none")


def directions(env, kind: str) -> list[str]:
    """The `- ` items under `## kind` of the directions file, continuation lines joined."""
    items: list[str] = []
    current = None
    for line in templates.raw_source(env, DIRECTIONS_FILE).splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        elif current == kind and line.startswith("- "):
            items.append(line[2:].strip())
        elif current == kind and items and line.startswith(" ") and line.strip():
            items[-1] += " " + line.strip()
    if not items:
        raise templates.PromptTemplateError(f"{DIRECTIONS_FILE} has no `- ` items under `## {kind}`")
    return items


_CODE_BLOCK = re.compile(r"\n*^```([\w+]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_CUDA_LANGS = frozenset({"cuda", "cpp", "c++", "c"})


def _example_kind(lang: str, code: str) -> str:
    if lang.lower() in _CUDA_LANGS:
        return "cuda"
    return "triton" if "@triton.jit" in code else "other"


def for_backend(body: str, backend: str | None) -> str:
    """A skill's text for one backend: a Triton prompt drops the CUDA C++ code blocks, a CUDA prompt
    the Triton kernels, wherever the skill also has an example the backend can use (a skill whose
    only example is of the other backend keeps it: the algorithm is still worth reading)."""
    if backend not in ("triton", "cuda"):
        return body
    other = "cuda" if backend == "triton" else "triton"
    blocks = [(m, _example_kind(m.group(1), m.group(2))) for m in _CODE_BLOCK.finditer(body)]
    if not any(kind != other for _, kind in blocks):
        return body
    for match, kind in reversed(blocks):
        if kind == other:
            body = body[:match.start()] + body[match.end():]
    return body


def skills(env, items: Iterable[Any], priority: int, limit: int,
           preferred: Iterable[str] = (), preferred_priority: int | None = None,
           backend: str | None = None, only: str | tuple[str, ...] = (),
           only_cited: str | tuple[str, ...] = (), brief: str | tuple[str, ...] = (),
           brief_after: int = 0) -> list[Section]:
    """One section per skill, always whole: ranked as given (the search's ranking), at most `limit`.

    Skills named in `preferred` (those a plan cites) come first, at `preferred_priority`, and are
    exempt from the limit. The sections form a chain: when one does not fit, it and every skill
    ranked below it are left out, so a prompt drops the lowest-ranked skills and never cuts one.
    With `backend`, each skill shows the examples of that backend (`for_backend`); with `only`, just
    the text of those `## ` sections of each skill (a Planner reads When and Steps, a Repairer the
    Pitfalls), and with `only_cited` those of the skills its plan cites (a Coder: Steps to Example);
    from the `brief_after`-th skill on (when set), only the `brief` sections (a Planner reads the
    Steps of its first two skills and when the others apply).
    """
    preferred = list(dict.fromkeys(preferred))
    items = [i for i in items if str(getattr(i, "body", "") or "").strip()]
    cited = sorted((i for i in items if _name(i) in preferred), key=lambda i: preferred.index(_name(i)))
    cited = cited if preferred_priority is not None else []
    others = [i for i in items if i not in cited][:max(0, limit)]
    sections = []
    for rank, item in enumerate(cited + others):
        base = preferred_priority if item in cited else priority
        name = _name(item)
        frame = _frame(env, "skill", name=name, title=str(getattr(item, "title", "") or name))
        body = for_backend(str(getattr(item, "body", "")).strip(), backend)
        wanted = only_cited if item in cited and only_cited else only
        if brief and brief_after and rank >= brief_after:
            wanted = brief
        body = _section_text(body, wanted) if wanted else _demote_headings(body)
        if not body:
            continue
        sections.append(Section(f"skill:{name}", base + rank, body, frame, trim="none", group="skills",
                                chain=True))
    return sections


def _section_text(body: str, headings: str | tuple[str, ...]) -> str:
    """The text under the `## heading`s of a skill body, in the skill's order ('' when it has none):
    one heading's text alone, several under their `### ` headings; code blocks stay whole."""
    wanted = {h.lower() for h in ((headings,) if isinstance(headings, str) else headings)}
    parts: list[tuple[str, list[str]]] = []
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            parts.append((line[3:].strip(), []))
            continue
        if parts:
            parts[-1][1].append(line)
    kept = [(title, "\n".join(lines).strip()) for title, lines in parts if title.lower() in wanted]
    kept = [(title, text) for title, text in kept if text]
    if len(wanted) == 1:
        return kept[0][1] if kept else ""
    return "\n\n".join(f"### {title}\n\n{text}" for title, text in kept)


def _name(item: Any) -> str:
    return str(getattr(item, "name", "") or "skill")
