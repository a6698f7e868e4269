"""Prompts for problems whose reference is a kernel, writes its inputs in place, or includes the
backward pass: what the agents are told comes from ProblemInfo.reference (through the search's
ContextBuilder), and PyTorch problems render exactly as before."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.agents import AgentContext, Coder, Planner
from kernelwright.memory.trajectory import Trajectory
from kernelwright.problem import ProblemError
from kernelwright.problem.reference import scan_source
from kernelwright.search.context import ContextBuilder
from kernelwright.search.problem_info import describe_problem
from kernelwright.search.settings import Settings
from kernelwright.search.tree import Tree

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "examples" / "realworld"


def _system(source: str, reference: dict | None, agent=Coder) -> str:
    extra = {"reference": reference} if reference else {}
    return agent().render(AgentContext(problem_name="p", problem_source=source, extra=extra))[0].content


def test_kernel_reference_with_backward_is_explained():
    source = (SUITE / "fused_add_rmsnorm.py").read_text()
    text = _system(source, scan_source(source).to_dict())
    assert "# The reference is a kernel already" in text and "`add_rmsnorm_bwd_kernel`" in text
    assert "against the reference's own kernels where the reference is a kernel" in text
    assert "speedups are measured against them" in text and "one\nforward plus one backward" in text
    assert "# The backward pass is part of the work" in text and "torch.autograd.Function" in text
    assert "every floating-point input and every parameter" in text


def test_in_place_and_chosen_gradient_inputs_are_named():
    reference = scan_source((SUITE / "moe_unpermute.py").read_text()).to_dict()
    reference["grad_inputs"] = [0, 1]
    text = _system("x = 1", reference, agent=Planner)
    assert "the inputs at positions 0, 1" in text
    torch_inplace = {"kind": "torch", "mutated_inputs": [1, 2]}
    text = _system("x = 1", torch_inplace)
    assert "writes its results into its inputs 1, 2" in text and "# The reference is a kernel" not in text
    assert "except those the reference itself writes in place" in text


def test_pytorch_problems_render_as_before():
    source = (REPO / "examples" / "problems" / "row_softmax.py").read_text()
    plain = _system(source, None)
    assert _system(source, {"kind": "torch", "mutated_inputs": [], "backward": False}) == plain
    assert "against PyTorch eager and `torch.compile`" in plain and "kernel already" not in plain


def test_problem_info_carries_the_reference_to_the_agents():
    info = describe_problem(SUITE / "silu_and_mul.py")
    assert info.reference["kind"] == "triton" and info.reference["backward"] and info.op_kinds == []
    context = ContextBuilder(info, Settings()).build("coder", Tree(info.source), Trajectory(), parent=None)
    assert context.extra["reference"]["triton_kernels"] == ["silu_and_mul_fwd_kernel", "silu_and_mul_bwd_kernel"]
    assert "kernel already" in Coder().render(context)[0].content


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU answer for a CUDA reference")
def test_a_cuda_reference_cannot_be_optimized_on_a_cpu_machine():
    with pytest.raises(ProblemError, match="needs a CUDA GPU"):
        describe_problem(SUITE / "paged_kv_gather.py")


def test_a_pytorch_reference_that_writes_its_input_is_described_so(tmp_path):
    problem = tmp_path / "scale_in_place.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x, y):\n"
                       "        return x.mul_(2.0) + y\ndef get_inputs():\n    return [torch.randn(8), torch.randn(8)]\n"
                       "def get_init_inputs():\n    return []\n")
    info = describe_problem(problem)
    assert info.reference["kind"] == "torch" and info.reference["mutated_inputs"] == [0]
    assert "elementwise" in info.op_kinds
    assert "writes its results into its inputs 0" in _system(info.source, info.reference)
