"""Templatizer: turns the best kernel into a template whose tuning parameters can be searched.

It sees the reference and the kernel (with its verdict, and on a retry why the last template's
default instance did not behave like the kernel); it answers with the kernel rewritten in the
template format of kernelwright.tune.template (KW_TUNE declaration, parameters read from
KW_PARAMS). `parse` returns a `Template`; the judge then checks the default instance against the
original (tune.verify.verify_default) before any tuning.
"""
from __future__ import annotations

from kernelwright.llm.parse import extract_code
from kernelwright.tune.budget import TuneBudget
from kernelwright.tune.template import TemplateError, parse_template, vocabulary

from . import sections
from .base import Agent
from .context import REQUIRED, Section
from .types import AgentContext, ParseFailure


class Templatizer(Agent):
    name = "templatizer"
    title = "Templatizer"
    template = "templatizer.md.j2"
    default_max_tokens = 8192
    default_temperature = 0.0  # a rewrite that must keep behaviour: the likeliest answer, not a creative one

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # the declaration's vocabulary (kinds, limit names, functions) from the parser's own tables;
        # a global, so the format reads the same in the prompt and in a parse failure's feedback
        self.env.globals["tune_vocabulary"] = vocabulary()

    def variables(self, ctx: AgentContext) -> dict:
        """Also `plan`: the tuning budget (ctx.extra `tune_budget` judge evaluations, `tune_sweep`
        configurations per sweep) as tune.budget counts it, or None when the caller set none."""
        evaluations = ctx.extra.get("tune_budget")
        plan = TuneBudget(int(evaluations), int(ctx.extra.get("tune_sweep") or 0)) if evaluations else None
        return {**super().variables(ctx), "plan": plan}

    def sections(self, ctx: AgentContext) -> list[Section]:
        kernel = ctx.parent or ctx.best  # the candidate at hand (the search's), else the best
        if kernel is None:
            raise ValueError("Templatizer needs the kernel to templatize in AgentContext.parent (or .best)")
        env = self.env
        chosen = [sections.task(env, ctx),
                  sections.candidate_code(env, self.name, kernel, "base_code", REQUIRED),
                  sections.candidate_verdict(env, self.name, kernel, "base_verdict", 30),
                  sections.failure(env, ctx, 20)]
        return [s for s in chosen if s is not None]

    def parse(self, text: str):
        """A `Template`, or a ParseFailure saying what to fix (never raises)."""
        try:
            found = extract_code(text, lang="python")
            if not found.ok:
                return self.failure(found.error or "no python code block found")
            source = found.value.strip("\n") + "\n"
            if "class ModelNew" not in source:
                return self.failure("the template must keep `class ModelNew`")
            return parse_template(source, name="templatized")
        except TemplateError as exc:
            return self.failure(str(exc))
        except Exception as exc:  # noqa: BLE001 - parse never raises; a bug becomes a retry
            return self.failure(f"the answer could not be read ({type(exc).__name__}: {exc})")


__all__ = ["Templatizer", "ParseFailure"]
