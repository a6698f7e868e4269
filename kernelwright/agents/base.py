"""The common shape of an agent: sections in, budgeted messages out, an answer parser.

An agent is pure: rendering reads only the AgentContext and the prompt files, parsing reads only
the answer text. Subclasses say which sections they want (with priorities), which template lays
out the user message, and how to read an answer.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kernelwright.llm.types import CompletionRequest, Message
from kernelwright.rules import precision, prompt_markdown

from . import citations, software, templates
from .context import ContextReport, Section, estimate_tokens, fit_sections
from .types import AgentContext, ParseFailure

SYSTEM_TEMPLATE = "system.md.j2"
FEEDBACK_TEMPLATE = "feedback.md.j2"
MESSAGE_OVERHEAD_TOKENS = 4  # role marker and separators a chat format adds per message
MAX_REFITS = 3


class Agent:
    """Base class. Subclasses set the class attributes and implement `sections` and `parse`."""

    name = "agent"
    title = "agent"
    template = "agent.md.j2"  # the user message layout
    role_template = ""  # the role paragraph of the system prompt; default roles/<name>.md.j2
    format_template = ""  # the answer format, shared by the prompt and parse feedback; default format_<name>.md.j2
    show_example = False  # the worked ModelNew example matters only to agents that write code
    default_max_tokens = 4096
    default_temperature = 0.2

    def __init__(self, prompt_dirs: Iterable[Path | str] | None = None, *, max_tokens: int | None = None,
                 temperature: float | None = None, max_skills: int = 4) -> None:
        self.env = templates.make_environment(prompt_dirs)
        self.role_template = self.role_template or f"roles/{self.name}.md.j2"
        self.format_template = self.format_template or f"format_{self.name}.md.j2"
        for name in (SYSTEM_TEMPLATE, FEEDBACK_TEMPLATE, self.template, self.role_template, self.format_template):
            templates.load_template(self.env, name)  # a broken custom prompt fails here, not mid-run
        self.max_tokens = max_tokens or self.default_max_tokens
        self.temperature = self.default_temperature if temperature is None else temperature
        self.max_skills = max_skills  # skills are shown whole: the most that may go in, from the top

    # --- what subclasses provide -------------------------------------------------------------
    def sections(self, ctx: AgentContext) -> list[Section]:
        raise NotImplementedError

    def parse(self, text: str):
        raise NotImplementedError

    # --- rendering ----------------------------------------------------------------------------
    def variables(self, ctx: AgentContext) -> dict:
        """What every template of this agent may use."""
        example = templates.raw_source(self.env, f"examples/{ctx.backend}_elementwise.py") \
            if self.show_example else ""
        return {"ctx": ctx, "agent": self.name, "agent_title": self.title, "backend": ctx.backend,
                "device": ctx.device or "unknown", "target": ctx.target, "interpreter": runs_in_interpreter(ctx),
                "example": example, "role_template": self.role_template, "format_template": self.format_template,
                "rules": ctx.rules, "judged_how": prompt_markdown(ctx.rules, str(ctx.extra.get("tolerances") or "")),
                "triton_support": software.triton_support(ctx.target) if ctx.target is not None else {},
                "precision_section": precision.prompt_section() if ctx.extra.get("float32_products") else ""}

    def render(self, ctx: AgentContext) -> list[Message]:
        return self.assemble(ctx)[0]

    def request(self, ctx: AgentContext) -> CompletionRequest:
        messages, report = self.assemble(ctx)
        return CompletionRequest(
            messages=messages, role=self.name, max_tokens=self.max_tokens, temperature=self.temperature,
            metadata={"agent": self.name, "context": report.to_dict()},
        )

    def assemble(self, ctx: AgentContext) -> tuple[list[Message], ContextReport]:
        """Messages within ctx.token_budget, and the report of what was kept, cut and dropped."""
        variables = self.variables(ctx)
        system = templates.render(self.env, SYSTEM_TEMPLATE, **variables)
        sections = [s for s in self.sections(ctx) if s is not None]
        # the layout's glue as it reads with every offered section present (a layout may word its
        # task by which sections it shows): dropping one later only shortens it
        glue = templates.render(self.env, self.template, s=_Blocks({s.group: " " for s in sections}), **variables)
        fixed = estimate_tokens(system) + estimate_tokens(glue) + 2 * MESSAGE_OVERHEAD_TOKENS
        fitted, total = self._fit(ctx, sections, system, fixed, variables)
        if total < ctx.token_budget and (fitted.report.dropped or fitted.report.truncated):
            # the glue of what was kept may be shorter than that of every section: offer the difference
            kept = templates.render(self.env, self.template, s=_Blocks({g: " " for g in fitted.texts}), **variables)
            tighter = estimate_tokens(system) + estimate_tokens(kept) + 2 * MESSAGE_OVERHEAD_TOKENS
            if tighter < fixed:
                again, again_total = self._fit(ctx, sections, system, tighter, variables)
                if again_total <= ctx.token_budget and not again.report.over_budget:
                    fitted, total = again, again_total
        system, user = self._cite_shown_only(ctx, system, fitted.texts, variables)
        total = estimate_tokens(system) + estimate_tokens(user) + 2 * MESSAGE_OVERHEAD_TOKENS
        report = fitted.report
        report.used_tokens = total
        report.over_budget = total > ctx.token_budget
        return [Message("system", system), Message("user", user)], report

    def _fit(self, ctx: AgentContext, sections: list[Section], system: str, fixed: int, variables: dict):
        """(fitted sections, total tokens) for a fixed cost, refitted while the layout's glue costs more."""
        for _ in range(MAX_REFITS):
            fitted = fit_sections(sections, ctx.token_budget, fixed)
            user = templates.render(self.env, self.template, s=_Blocks(fitted.texts), **variables)
            total = estimate_tokens(system) + estimate_tokens(user) + 2 * MESSAGE_OVERHEAD_TOKENS
            if total <= ctx.token_budget or fitted.report.over_budget:
                break
            fixed += total - ctx.token_budget  # the layout's glue cost more than measured
        return fitted, total

    def _cite_shown_only(self, ctx: AgentContext, system: str, texts: dict, variables: dict) -> tuple[str, str]:
        """System and user text whose skill citations point only at the skills shown (citations.py)."""
        known = set(ctx.extra.get("skill_names") or ()) | {str(getattr(s, "name", "")) for s in ctx.skills}
        known.discard("")
        shown = citations.shown_skills(texts.get("skills", ""))
        texts = {group: citations.resolve(text, shown, known) for group, text in texts.items()}
        user = templates.render(self.env, self.template, s=_Blocks(texts), **variables)
        return citations.resolve(system, shown, known), user

    # --- answers ------------------------------------------------------------------------------
    def failure(self, reason: str) -> ParseFailure:
        """A ParseFailure whose feedback restates the answer format (the agent's format template)."""
        try:
            feedback = templates.render(self.env, FEEDBACK_TEMPLATE, agent=self.name, reason=reason,
                                        format_template=self.format_template)
        except Exception as exc:  # noqa: BLE001 - parse must never raise, even on a bad custom template
            feedback = f"Your answer could not be used: {reason}. ({exc})"
        return ParseFailure(agent=self.name, reason=reason, feedback=feedback)

    def retry_request(self, ctx: AgentContext, answer: str, failure: ParseFailure) -> CompletionRequest:
        """The original request plus the unusable answer and the feedback, to ask once more (the
        engine's re-ask after a ParseFailure)."""
        request = self.request(ctx)
        feedback = getattr(failure, "feedback", "") or getattr(failure, "reason", "") or str(failure)
        request.messages += [Message("assistant", answer or "(empty answer)"), Message("user", feedback)]
        request.metadata["retry_of_parse_failure"] = getattr(failure, "reason", "") or feedback
        return request


def runs_in_interpreter(ctx: AgentContext) -> bool:
    """True only when candidates are really judged on a CPU (Triton in its interpreter)."""
    if ctx.target is not None:
        return getattr(ctx.target, "kind", "") == "cpu"
    device = (ctx.device or "").lower()
    return "interpreter" in device or device.startswith("cpu")


class _Blocks(dict):
    """Section texts by group for templates; a missing group reads as '' so layouts stay simple."""

    def __missing__(self, key: str) -> str:
        return ""

    def __getattr__(self, key: str) -> str:
        return self[key]
