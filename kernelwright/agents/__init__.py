"""Agents: pure prompt builders (Jinja files in agents/prompts/) and answer parsers.

    planner = Planner()                      # or Planner(prompt_dirs=[my_prompts]) to override files
    request = planner.request(ctx)           # CompletionRequest within ctx.token_budget
    result = planner.parse(completion.text)  # Plan, or ParseFailure with feedback for a retry

See docs/agents.md for what each agent sees and how it must answer.
"""
from .analyst import Analyst
from .base import Agent
from .coder import Coder
from .context import ContextReport, Section, estimate_tokens, fit_sections
from .planner import Planner
from .repairer import Repairer
from .templatizer import Templatizer
from .templates import BUILTIN_PROMPTS, PromptTemplateError
from .types import AgentContext, CandidateView, Code, Diagnosis, ParseFailure, Plan

__all__ = [
    "Agent", "AgentContext", "Analyst", "BUILTIN_PROMPTS", "CandidateView", "Code", "Coder", "ContextReport",
    "Diagnosis", "ParseFailure", "Plan", "Planner", "PromptTemplateError", "Repairer", "Section", "Templatizer",
    "estimate_tokens", "fit_sections",
]
