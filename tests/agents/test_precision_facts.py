"""Precision facts come from one source (issue 31, point 2): kernelwright/rules/precision_facts.json,
written by bench/precision_facts.py, rendered into the system prompt and the floor's sentence; skills
and backend guides point at it instead of restating numbers."""
from __future__ import annotations

import re

from kernelwright.agents import AgentContext, Coder, Planner
from kernelwright.agents.templates import BUILTIN_PROMPTS
from kernelwright.memory.skills import builtin_library
from kernelwright.rules import precision

PRECISION_SKILLS = ("tf32-precision-policy", "tf32x3-split-gemm", "tensor-cores", "roofline-speed-of-light",
                    "judge-rules", "im2col-implicit-gemm-conv", "flash-attention")
ERROR_NUMBER = re.compile(r"\b\d+(?:\.\d+)?e-\d+\b")
FLOOR = {"floor_ms": 0.5, "bound": "compute", "bytes": 1e8, "peak_gbps": 3000.0, "flops": 1e11,
         "peak_tflops": 239.0, "peak_kind": "bf16x3", "backward": False}


def test_the_facts_agree_with_what_they_claim():
    schemes = precision.schemes()
    assert {"tf32", "tf32x3", "bf16", "bf16x3", "fp16", "fp16x3"} <= set(schemes)
    for name in ("tf32", "bf16", "fp16", "bf16x2"):
        assert not schemes[name].fits_float32 and schemes[name].margin > 1
    for name in ("tf32x3", "bf16x3"):
        assert schemes[name].fits_float32 and schemes[name].margin < 1
    assert schemes["tf32x3"].rel_l2 < schemes["bf16x3"].rel_l2  # 3xBF16 passes, but is not 3xTF32's equal


def test_a_float32_product_problem_gets_the_table_once_and_the_floor_quotes_it():
    ctx = AgentContext(problem_name="p", problem_source="import torch\n",
                       extra={"float32_products": True, "floor": FLOOR})
    for agent in (Planner(), Coder()):
        system, user = (m.content for m in agent.render(ctx))
        assert system.count(precision.prompt_section()) == 1
        assert precision.floor_phrase("bf16x3") in user
        bf16x3 = precision.schemes()["bf16x3"]
        assert f"relative L2 error {bf16x3.rel_l2:.1g}" in user and "float32-accurate" not in user
    other = AgentContext(problem_name="p", problem_source="import torch\n")
    assert "Precision of float32 matrix products" not in Planner().render(other)[0].content


def test_skills_and_guides_restate_no_error_numbers_and_no_contradiction():
    library = builtin_library()
    for name in PRECISION_SKILLS:
        body = library.get(name).body
        assert not ERROR_NUMBER.findall(body), name
        for claim in ("float32-accurate", "fp32-accurate", "need more terms", "only worse"):
            assert claim not in body, (name, claim)
    for guide in ("backend_triton.md.j2", "backend_cuda.md.j2"):
        text = (BUILTIN_PROMPTS / guide).read_text()
        assert not ERROR_NUMBER.findall(text) and "keeps float32 accuracy" not in text, guide


def test_the_precision_rule_quotes_the_facts_file():
    from kernelwright.rules.sets import PRECISION

    schemes = precision.schemes()
    assert precision.rule_sentence() in PRECISION.text
    for name in ("tf32", "tf32x3"):
        mantissa, exponent = f"{schemes[name].rel_l2:.0e}".split("e")
        assert f"~{mantissa}e{int(exponent)}" in PRECISION.text
    assert precision.source() in PRECISION.text  # emulated or measured: the rule says which
