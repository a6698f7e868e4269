"""Hand-written answers and verdict summaries for driving the pure engine in tests.

Nothing here pretends to be a model: answers are short texts in the formats the agents parse
(a JSON plan, a fenced python module), and evaluation results are EvalResult records made up by
each test to steer the search (which candidate passes, how fast).
"""
from __future__ import annotations

import json
from typing import Callable

from kernelwright.llm.types import Completion, Usage
from kernelwright.search.asks import EvaluationAsk
from kernelwright.search.core import Engine
from kernelwright.search.problem_info import ProblemInfo
from kernelwright.search.results import AskFailure, EvalResult

REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 64

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''

KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), {block}),)](x, out, x.numel(), BLOCK={block})
        return out
'''


def problem() -> ProblemInfo:
    return ProblemInfo(name="relu", source=REFERENCE, op_kinds=["elementwise"])


def completion(text: str, tokens: int = 100, usd: float = 0.001) -> Completion:
    return Completion(text=text, model="hand-written", provider="test", usage=Usage(tokens, tokens // 2),
                      cost_usd=usd, request_hash="", latency_s=0.0)


def plan_text(label: str) -> str:
    return "```json\n" + json.dumps({
        "rationale": "test plan", "approach": label,
        "steps": [{"region": "ModelNew.forward", "change": f"{label}: launch relu_kernel", "skill": None}],
    }) + "\n```"


def code_text(block: int) -> str:
    return "```python\n" + KERNEL.replace("{block}", str(block)) + "```"


def passed(speedup: float) -> EvalResult:
    return EvalResult(status="pass", stage="done", outcome="faster" if speedup > 1 else "slower",
                      speedup={"eager": speedup}, trials_passed=2, trials_total=2)


def failed(message: str = "trial 1 failed: max abs error 0.5") -> EvalResult:
    return EvalResult(status="fail", stage="check", outcome="wrong", error=message,
                      trials_passed=0, trials_total=2)


class Script:
    """Answers asks in order: plans and code with a counter in them, evaluations from `judge`.

    `judge(candidate_id, code, n)` returns the EvalResult for the n-th evaluation.
    """

    def __init__(self, judge: Callable[[str, str, int], EvalResult], code: Callable[[int], str] | None = None):
        self.judge = judge
        self.code = code or (lambda n: code_text(64 * n))
        self.calls = 0
        self.evals = 0
        self.log: list[tuple[str, object, float]] = []  # (ask id, result, elapsed) as told

    def answer(self, ask):
        if isinstance(ask, EvaluationAsk):
            self.evals += 1
            return self.judge(ask.candidate_id, ask.code, self.evals)
        self.calls += 1
        if ask.agent == "planner":
            return completion(plan_text(f"idea number {self.calls}"))
        if ask.agent == "analyst":
            return completion("The kernel is memory bound: it reads and writes every element once, "
                              "so the remaining time is launch overhead and bandwidth.\nBottleneck: memory")
        return completion(self.code(self.calls))

    def run(self, engine: Engine, steps: int = 10_000, pick: Callable[[list], object] | None = None) -> int:
        """Answer asks (the oldest first, or `pick`'s choice) until done or `steps` answers."""
        told = 0
        while not engine.done and told < steps:
            asks = engine.ask()
            assert asks, "the engine is not done but has nothing to ask"
            ask = pick(asks) if pick else asks[0]
            result = self.answer(ask)
            elapsed = float(len(self.log) + 1)
            self.log.append((ask.id, result, elapsed))
            engine.tell(ask.id, result, elapsed)
            told += 1
        return told


def fail_always(*_args) -> EvalResult:
    return failed()


def judge_failure() -> AskFailure:
    return AskFailure("JudgeError", "the judge process could not start")
