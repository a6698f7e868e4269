"""Parsing answers. Every answer below is HAND-WRITTEN test data shaped like real model output
(prose around fences, format drift, truncation), not the output of any model."""
from __future__ import annotations

import random
import string

import pytest

from kernelwright.agents import Analyst, Code, Coder, Diagnosis, ParseFailure, Plan, Planner, Repairer
from kernelwright.agents.plan_parse import approach_label
from kernelwright.agents.templates import BUILTIN_PROMPTS

TRITON_EXAMPLE = (BUILTIN_PROMPTS / "examples" / "triton_elementwise.py").read_text()
CUDA_EXAMPLE = (BUILTIN_PROMPTS / "examples" / "cuda_elementwise.py").read_text()

# --- Planner -------------------------------------------------------------------------------------

HANDWRITTEN_PLAN_JSON = '''The profile says DRAM throughput is 71%, so the loads are the problem.

```json
{
  "rationale": "4-byte loads keep too few bytes in flight; 16-byte accesses should lift DRAM throughput.",
  "steps": [
    {"region": "relu_kernel", "change": "Process 4 contiguous elements per lane with BLOCK=4096", "skill": "vectorized-access"},
    {"region": "ModelNew.forward", "change": "launch with num_warps=8 and a grid of cdiv(n, 4096)", "skill": null},
  ],
  "approach": "vectorize the loads"
}
```
'''

HANDWRITTEN_PLAN_LIST = '''I'd focus on memory traffic.

1. In `relu_kernel`, **vectorize** the loads to 16 bytes [vectorized-access] and keep
   the masked tail for the last block; index with x[i] semantics unchanged.
2. In `ModelNew.forward`, drop the `.contiguous()` copy when the input is already contiguous.
'''


def test_planner_reads_the_json_form():
    plan = Planner().parse(HANDWRITTEN_PLAN_JSON)
    assert isinstance(plan, Plan)
    assert plan.steps == [
        "In `relu_kernel`, process 4 contiguous elements per lane with BLOCK=4096 [vectorized-access]",
        "In `ModelNew.forward`, launch with num_warps=8 and a grid of cdiv(n, 4096)",
    ]
    assert plan.skill_tags == ["vectorized-access"]
    assert plan.approach_key == "vectorize the loads"  # the planner's own label, whole
    assert plan.rationale.startswith("4-byte loads")
    assert "1. In `relu_kernel`" in plan.to_markdown()


def test_planner_falls_back_to_a_numbered_list():
    plan = Planner().parse(HANDWRITTEN_PLAN_LIST)
    assert isinstance(plan, Plan) and len(plan.steps) == 2
    assert plan.steps[0].startswith("In `relu_kernel`") and "keep the masked tail" in plan.steps[0]
    assert plan.skill_tags == ["vectorized-access"]  # x[i] is an index, not a skill citation
    assert plan.approach_key == plan.steps[0]  # no label given: the first step, whole
    assert plan.rationale == "I'd focus on memory traffic."


def test_planner_keeps_at_most_three_steps_and_accepts_plain_string_steps():
    steps = ", ".join(f'"In `k{i}`, unroll loop {i}"' for i in range(5))
    plan = Planner().parse(f'```json\n{{"rationale": "r", "steps": [{steps}], "approach": "unroll"}}\n```')
    assert isinstance(plan, Plan) and [s.split(",")[0] for s in plan.steps] == ["In `k0`", "In `k1`", "In `k2`"]
    assert plan.approach_key == "unroll"


@pytest.mark.parametrize("label,answer,why", [
    ("garbage", "I am not sure what to do here, sorry.", "no plan found"),
    ("empty", "   ", "empty"),
    ("no steps", '```json\n{"rationale": "r", "steps": []}\n```', "steps"),
    ("no region", '```json\n{"steps": [{"change": "make it faster", "skill": null}]}\n```', "names no code region"),
    ("no change", '```json\n{"steps": [{"region": "ModelNew.forward", "change": ""}]}\n```', "no \"change\""),
    ("truncated", '```json\n{"rationale": "the loads", "steps": [{"region": "relu_kern', "no plan found"),
    ("wrong shape", '```json\n["tile", "fuse"]\n```', "not an object"),
])
def test_planner_turns_bad_answers_into_feedback(label, answer, why):
    result = Planner().parse(answer)
    assert isinstance(result, ParseFailure), label
    assert result.agent == "planner" and why in result.reason
    assert result.reason.rstrip(".") in result.feedback and '"steps"' in result.feedback  # restates the format


def test_approach_labels_are_the_planners_words_whole():
    long = "fuse bias, ReLU and the divide into the GEMM epilogue so the intermediate never reaches DRAM"
    assert approach_label(long, ["In `k`, something else"]) == long  # never cut
    assert approach_label("  tile   the K loop \n", []) == "tile the K loop"
    assert approach_label("", ["In `k`, merge the epilogue into the GEMM [operator-fusion]"]) == \
        "In `k`, merge the epilogue into the GEMM [operator-fusion]"
    assert approach_label("", []) == "unspecified"


def test_only_real_skills_become_tags_when_the_library_is_known():
    answer = ('```json\n{"steps": [{"region": "matmul_kernel", "change": "use [BM] = 128 rows per tile and '
              '[swizzled-program-order-l2]", "skill": "split-k"}], "approach": "bigger tiles"}\n```')
    assert Planner().parse(answer).skill_tags == ["split-k", "bm", "swizzled-program-order-l2"]
    known = {"split-k", "swizzled-program-order-l2"}
    plan = Planner(known_skills=known).parse(answer)
    assert plan.skill_tags == ["split-k", "swizzled-program-order-l2"]  # a tile name is not a skill
    assert "[bm]" not in plan.to_markdown() and "[BM]" in plan.to_markdown()  # the planner's text stays


def test_skill_names_are_normalised_from_json():
    answer = '```json\n{"steps": [{"region": "k", "change": "tile", "skill": ["Smem Tiling", "[bank_conflict-padding]", "none"]}]}\n```'
    plan = Planner().parse(answer)
    assert plan.skill_tags == ["smem-tiling", "bank-conflict-padding"]


# --- Coder and Repairer ------------------------------------------------------------------------

def fenced(code: str, lang: str = "python") -> str:
    return f"Here is the module.\n\n```{lang}\n{code}```\n\nIt fuses the two passes."


@pytest.mark.parametrize("agent_cls", [Coder, Repairer])
def test_code_agents_accept_complete_modules_of_either_backend(agent_cls):
    for source in (TRITON_EXAMPLE, CUDA_EXAMPLE):
        result = agent_cls().parse(fenced(source))
        assert isinstance(result, Code) and result.source == source and result.warnings == []


def test_a_fixed_backend_rejects_the_other_one():
    wrong = Coder(backend="cuda").parse(fenced(TRITON_EXAMPLE))
    assert isinstance(wrong, ParseFailure) and "load_inline" in wrong.reason
    assert isinstance(Coder().parse(fenced(TRITON_EXAMPLE), backend="triton"), Code)
    assert isinstance(Repairer(backend="triton").parse(fenced(CUDA_EXAMPLE)), ParseFailure)


HANDWRITTEN_CHEAT = TRITON_EXAMPLE.replace(
    "        return out\n",
    "        y.add_(1)\n        return torch.matmul(out, self.weight.t()) + self.proj(x) + (x @ y)\n",
).replace("        self.alpha = alpha\n", "        self.alpha = alpha\n        self.proj = nn.Linear(4, 4)\n")


def test_compute_ops_layers_and_input_writes_in_forward_are_warned_about():
    result = Coder().parse(fenced(HANDWRITTEN_CHEAT))
    assert isinstance(result, Code)
    text = "\n".join(result.warnings)
    assert "torch.matmul" in text and "self.proj" in text and "`@`" in text and "y.add_" in text


def test_aliased_imports_are_seen_through():
    source = TRITON_EXAMPLE.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as fn\n")
    source = source.replace("        return out\n", "        return fn.softmax(out, dim=-1)\n")
    result = Coder().parse(fenced(source))
    assert isinstance(result, Code) and any("fn.softmax" in w for w in result.warnings)


@pytest.mark.parametrize("label,answer,why", [
    ("garbage", "Sure! I can help with that kernel.", "no code"),
    ("no ModelNew", fenced(TRITON_EXAMPLE.replace("class ModelNew", "class Model2")), "class ModelNew"),
    ("no forward", fenced(TRITON_EXAMPLE.replace("def forward", "def run")), "no `forward`"),
    ("syntax error", fenced(TRITON_EXAMPLE.replace("def forward(self", "def forward(self,,")), "syntax error"),
    ("cut off", "```python\n" + TRITON_EXAMPLE[: len(TRITON_EXAMPLE) // 2], "cut off"),
    ("no kernel", fenced("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                         "    def forward(self, x):\n        return torch.relu(x)\n"), "no custom kernel"),
    ("wrong fence", fenced("__global__ void k() {}\n", "cuda"), "python"),
])
@pytest.mark.parametrize("agent_cls", [Coder, Repairer])
def test_code_agents_turn_bad_answers_into_feedback(agent_cls, label, answer, why):
    result = agent_cls().parse(answer)
    assert isinstance(result, ParseFailure), label
    assert result.agent == agent_cls.name and why in result.reason, result.reason
    assert "```python" in result.feedback  # restates the answer form


def test_the_last_complete_module_wins_over_a_sketch():
    sketch = "```python\n# idea\nx = 1\n```\n"
    result = Coder().parse(sketch + fenced(TRITON_EXAMPLE))
    assert isinstance(result, Code) and "class ModelNew" in result.source


# --- Analyst -----------------------------------------------------------------------------------

HANDWRITTEN_DIAGNOSIS = """`relu_kernel` reaches 71% of DRAM peak with 4-byte loads: the LSU pipe issues four
times the instructions a 16-byte access would need, and occupancy (48%) is not the limit. The
kernel is about 1.4x above the speed-of-light floor, all of it in memory traffic.

**Bottleneck:** memory
Skills: [vectorized-access], coalescing, none
"""


def test_analyst_reads_prose_bottleneck_and_skills():
    result = Analyst().parse(HANDWRITTEN_DIAGNOSIS)
    assert isinstance(result, Diagnosis)
    assert result.bottleneck == "memory" and result.tags == ["vectorized-access", "coalescing"]
    assert result.text.startswith("`relu_kernel` reaches 71%") and "Bottleneck" not in result.text


def test_analyst_lines_are_optional_and_unknown_values_become_none():
    prose = "The kernel launches 3 grids per forward; launch overhead dominates at this size. "
    result = Analyst().parse(prose)
    assert isinstance(result, Diagnosis) and result.bottleneck is None and result.tags == []
    result = Analyst().parse(prose + "\nBottleneck: unknown\nSkills: none")
    assert result.bottleneck is None and result.tags == []
    result = Analyst().parse(prose + "\nBottleneck: sideways\n")
    assert isinstance(result, Diagnosis) and result.bottleneck is None
    cited = Analyst().parse(prose + "Capturing the launches [launch-overhead-cuda-graphs] would remove it.")
    assert cited.tags == ["launch-overhead-cuda-graphs"]


@pytest.mark.parametrize("answer", ["", "Bottleneck: memory\nSkills: coalescing", "too short"])
def test_analyst_rejects_answers_without_a_diagnosis(answer):
    result = Analyst().parse(answer)
    assert isinstance(result, ParseFailure) and "Bottleneck:" in result.feedback


# --- never raises ------------------------------------------------------------------------------

@pytest.mark.parametrize("agent_cls", [Planner, Coder, Repairer, Analyst])
def test_parse_never_raises(agent_cls):
    rng = random.Random(7)
    agent = agent_cls()
    odd = [None, 42, b"bytes", "```", "```json\n{", "```python\n\x00\n```", "{" * 500, "[" * 500,
           "\n".join(["1."] * 10), "```json\n{\"steps\": [null, 3]}\n```", "```json\n{\"steps\": \"one\"}\n```"]
    odd += ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, 300))) for _ in range(30)]
    for answer in odd:
        result = agent.parse(answer)
        assert isinstance(result, (Plan, Code, Diagnosis, ParseFailure))


def test_an_unknown_backend_is_refused_when_the_agent_is_built():
    with pytest.raises(ValueError, match="backend"):
        Coder(backend="opencl")
    with pytest.raises(ValueError, match="backend"):
        Repairer(backend="hip")
