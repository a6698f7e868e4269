"""Realistic agent contexts: real KernelBench sources, real skills and a real trajectory digest.

The candidate code, failure logs and verdict summaries below are HAND-WRITTEN test data (no LLM
produced them); they look like what the engine passes so the prompts are exercised as in a run.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.agents import AgentContext, CandidateView
from kernelwright.agents.templates import BUILTIN_PROMPTS
from kernelwright.memory.skills import Conditions, builtin_library
from kernelwright.memory.trajectory import Trajectory, TrajectoryEntry

ELEMENTWISE_PROBLEM = "level1/19_ReLU.py"
FUSED_PROBLEM = "level2/1_Conv2D_ReLU_BiasAdd.py"

# HAND-WRITTEN candidate for an elementwise problem (not model output).
HANDWRITTEN_RELU = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
'''

# HAND-WRITTEN compile log in the shape the judge trims (long on purpose, to test cutting).
HANDWRITTEN_FAILURE = "\n".join(
    ["triton.compiler.errors.CompilationError: at 7:15:",
     "    x = tl.load(x_ptr + offs, mask=mask, other=0.0)",
     "               ^",
     "ValueError: Mask argument cannot be block type if pointer argument is not a block"]
    + [f"  frame {i}: triton/compiler/code_generator.py:{1000 + i} in visit_Call" for i in range(400)]
    + ["FINAL: CompilationError in relu_kernel (line 7)"]
)


def read_problem(kernelbench: Path, relative: str) -> str:
    path = kernelbench / relative
    if not path.is_file():
        pytest.skip(f"{path} is not in the shared KernelBench copy")
    return path.read_text()


def real_skills(query: str, op_kinds, backend: str, k: int = 4):
    """Skills retrieved from the memory colleague's built-in library, as the engine would."""
    return builtin_library().retrieve(query, Conditions(op_kinds=op_kinds, backend=[backend]), k=k)


def real_digest() -> str:
    """A digest built by memory.Trajectory from HAND-WRITTEN entries."""
    trajectory = Trajectory([
        TrajectoryEntry("c1", None, "draft", "first kernel", "first-kernel", "pass", 0.95),
        TrajectoryEntry("c2", "c1", "improve", "fuse", "fuse:operator-fusion", "faster", 1.10),
        TrajectoryEntry("c3", "c2", "improve", "vectorize", "vectorize:vectorized-access", "wrong", None,
                        "misaligned float4 loads on an offset view"),
        TrajectoryEntry("c4", "c2", "improve", "vectorize", "vectorize:vectorized-access", "compile_error", None,
                        "tl.multiple_of applied to a scalar"),
    ])
    return trajectory.digest()


@pytest.fixture
def relu_context(kernelbench) -> AgentContext:
    source = read_problem(kernelbench, ELEMENTWISE_PROBLEM)
    parent = CandidateView(
        id="c2", code=HANDWRITTEN_RELU, status="pass", speedup=1.10,
        summary="5/5 trials passed (max abs err 0.0); median 0.412 ms (eager 0.453 ms, compile 0.430 ms)",
        findings=["relu_kernel: DRAM throughput 71% of peak, memory-bound",
                  "relu_kernel: 4-byte loads; L1 hit rate 0%"])
    return AgentContext(
        problem_name="19_ReLU", problem_source=source, backend="triton",
        device="NVIDIA H100 80GB HBM3 (sm_90)", op_kinds=["elementwise"], bottleneck="memory",
        best=parent, parent=parent, failure=None, tried_digest=real_digest(),
        skills=real_skills("memory bound elementwise vectorized loads", ["elementwise"], "triton"),
        analysis="relu_kernel moves 2 bytes per FLOP and sits at 71% of DRAM peak.",
    )


@pytest.fixture
def fused_context(kernelbench) -> AgentContext:
    source = read_problem(kernelbench, FUSED_PROBLEM)
    example = (BUILTIN_PROMPTS / "examples" / "cuda_elementwise.py").read_text()
    parent = CandidateView(id="c7", code=example, status="fail",
                           summary="compile error (see failure)", findings=[])
    best = CandidateView(id="c5", code=HANDWRITTEN_RELU, status="pass", speedup=0.80,
                         summary="5/5 trials passed; median 1.90 ms (eager 1.52 ms)",
                         findings=["conv kernel: compute-bound, tensor pipe 12%"])
    return AgentContext(
        problem_name="1_Conv2D_ReLU_BiasAdd", problem_source=source, backend="cuda",
        device="NVIDIA H100 80GB HBM3 (sm_90)", op_kinds=["conv", "elementwise"], bottleneck="compute",
        best=best, parent=parent, failure=HANDWRITTEN_FAILURE, tried_digest=real_digest(),
        skills=real_skills("convolution implicit gemm fusion epilogue", ["conv"], "cuda"),
        plan=None, analysis=None,
    )
