"""No prompt names a skill it does not show (issue 31, point 3).

The unit tests pin how `citations.resolve` rewrites mentions; the sweep renders every agent for
every backend with every built-in skill shown at some point, evidence citing every skill the
profiler may tag, and checks each prompt, system message included, against the skills it shows.
"""
from __future__ import annotations

import dataclasses
import re

import pytest

from kernelwright.agents import AgentContext, Analyst, CandidateView, Coder, Planner, Plan, Repairer
from kernelwright.agents.citations import mentioned, resolve, shown_skills
from kernelwright.agents.types import VerdictView
from kernelwright.memory.ranking import SkillQuery, rank_skills
from kernelwright.memory.skills import builtin_library
from kernelwright.profile.findings import SKILL_TAGS

KNOWN = {"split-k", "tensor-cores", "welford-norm", "tf32x3-split-gemm", "vectorized-access"}


def test_shown_skills_keep_their_citations_and_backticks_become_citations():
    text = "Use tensor cores (`tensor-cores`). See `tensor-cores` first. [tensor-cores]"
    assert resolve(text, {"tensor-cores"}, KNOWN) == "Use tensor cores ([tensor-cores]). See [tensor-cores] first. [tensor-cores]"


def test_references_to_skills_not_shown_disappear_or_become_plain_words():
    text = ("tile through shared memory (see `split-k`).\n"
            "split the work (`split-k`, `tensor-cores`) now\n"
            "three products (a third of the rate, see `tf32x3-split-gemm`) or\n"
            "variance via `welford-norm`.\n"
            "`kernel` (40% of GPU time): vectorise. [vectorized-access][split-k]\n"
            "the plan cites [split-k] inline")
    assert resolve(text, {"tensor-cores"}, KNOWN) == (
        "tile through shared memory.\n"
        "split the work ([tensor-cores]) now\n"
        "three products (a third of the rate) or\n"
        "variance via welford norm.\n"
        "`kernel` (40% of GPU time): vectorise.\n"
        "the plan cites split k inline")


def test_code_and_words_that_name_no_skill_are_left_alone():
    text = "x[0] and [BLOCK_W] and `tl.dot` and (`count-include-pad`)\n```python\nacc = a[split-k]  # `split-k`\n```"
    assert resolve(text, set(), KNOWN) == text
    assert mentioned(text, KNOWN) == set()


def test_shown_skills_are_read_from_the_skill_headings():
    assert shown_skills("# Skills\n\n## [a-b] Title\n\ntext [c]\n\n## [d] Other\n") == ["a-b", "d"]


def test_built_in_skills_write_every_cross_reference_so_it_can_be_dropped():
    """A reference is `(see `x`)`, `(`x`, `y`)` or a closing `(..., see `x`)`: removing it leaves a
    sentence; a skill the prompt does not show must not leave a dangling name behind."""
    library = builtin_library()
    for skill in library.skills:
        alone = resolve(skill.body, set(), library.names())
        assert not mentioned(alone, library.names()), skill.name
        originals = set(skill.body.split("\n"))
        for line in alone.split("\n"):
            if line not in originals:  # a removal leaves no gap before punctuation and no empty parentheses
                assert not re.search(r"(^| )[.,;:)]|\( |\(\)", line.strip()), (skill.name, line)


# ----------------------------------------------------------------------------- the sweep

def _evidence_verdict() -> VerdictView:
    findings = [f"`k` (50% of GPU time): advice {i}. [{tag}]" for i, tag in enumerate(SKILL_TAGS)]
    return VerdictView(status="pass", trials_passed=5, trials_total=5, median_ms=1.0,
                       baselines={"eager": 2.0}, speedups={"eager": 2.0}, findings=findings)


def _contexts(backend: str, problem_source: str):
    """Contexts whose ranked skills walk through the whole library for `backend`, three at a time."""
    library = builtin_library()
    ranked = rank_skills(library, SkillQuery(backend=backend, gpu="sm_90", exclude=("judge-rules",)), limit=100)
    candidate = CandidateView(id="c2", code="import torch\n", status="pass", speedup=2.0,
                              verdict=_evidence_verdict())
    plan = Plan(steps=["In `k`, split the reduction [split-k]", "In `k`, use [tensor-cores]"],
                approach_key="split", skill_tags=["split-k", "tensor-cores"], rationale="see [welford-norm]")
    for start in range(0, len(ranked), 3):  # the Coder shows three skills, the Planner four
        yield AgentContext(
            problem_name="p", problem_source=problem_source, backend=backend, op_kinds=["matmul"],
            parent=candidate, best=candidate, failure="RuntimeError: boom", plan=plan,
            analysis="The loads are narrow; [vectorized-access] and [coalescing] would help.",
            skills=ranked[start:start + 3] + ranked[:start], token_budget=60000,
            extra={"skill_names": sorted(library.names())})


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_no_prompt_names_a_skill_it_does_not_show(backend):
    library = builtin_library()
    names = library.names()
    shown_somewhere: set[str] = set()
    source = "import torch\nclass Model(torch.nn.Module):\n    pass\n"
    for ctx in _contexts(backend, source):
        for agent in (Planner(), Coder(), Repairer(), Analyst()):
            messages = agent.render(ctx if agent.name != "planner" else dataclasses.replace(ctx, plan=None))
            text = "\n".join(m.content for m in messages)
            shown = set(shown_skills(messages[-1].content))
            shown_somewhere |= shown
            assert mentioned(text, names) <= shown, (agent.name, sorted(mentioned(text, names) - shown))
    fits = {s.name for s in library.skills if "judge-rules" != s.name
            and (backend in s.applies_when.backend or "any" in s.applies_when.backend)}
    assert fits <= shown_somewhere  # every skill of the backend was shown, and checked, at least once
