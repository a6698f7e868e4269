"""Skills as a prompt shows them: the examples of the run's backend (issue 31, point 3)."""
from __future__ import annotations

import re

import pytest

from kernelwright.agents import AgentContext, Coder
from kernelwright.agents.sections import for_backend
from kernelwright.memory.skills import builtin_library

FENCES = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _fits(skill, backend: str) -> bool:
    return bool({backend, "any"} & skill.applies_when.backend) and skill.name != "judge-rules"


@pytest.mark.parametrize("skill", builtin_library().skills, ids=lambda s: s.name)
def test_a_triton_prompt_shows_no_cuda_code_and_a_cuda_prompt_no_triton_kernel_beside_cuda(skill):
    if _fits(skill, "triton"):
        blocks = FENCES.findall(for_backend(skill.body, "triton"))
        assert blocks, f"{skill.name}: a Triton prompt would show no example"
        assert not [lang for lang, _ in blocks if lang in ("cuda", "cpp", "c")], skill.name
    if _fits(skill, "cuda") and re.search(r"^```(cuda|cpp)$", skill.body, re.MULTILINE):
        blocks = FENCES.findall(for_backend(skill.body, "cuda"))
        assert not [code for lang, code in blocks if "@triton.jit" in code], skill.name


def test_the_coder_shows_each_skill_for_its_backend():
    library = builtin_library()
    skill = library.get("vectorized-access")
    for backend, present, absent in (("triton", "def axpy", "axpy_vec4"), ("cuda", "axpy_vec4", "@triton.jit")):
        ctx = AgentContext(problem_name="p", problem_source="import torch\n", backend=backend, skills=[skill],
                           token_budget=40000)
        text = Coder().render(ctx)[-1].content
        assert present in text and absent not in text.split("## [vectorized-access]")[1], backend
