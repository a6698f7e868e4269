"""Facts the search puts into prompts from the problem itself (issue 31): the reference's training
mode where it matters, read from the real shared problems."""
from __future__ import annotations

import pytest

from kernelwright.agents import Planner
from kernelwright.search.context import ContextBuilder
from kernelwright.search.problem_info import describe_problem
from kernelwright.search.settings import Settings
from kernelwright.search.tree import Tree
from kernelwright.memory.trajectory import Trajectory


def first_planner_prompt(kernelbench, relative: str) -> str:
    path = kernelbench / relative
    if not path.is_file():
        pytest.skip(f"{path} is not in the shared KernelBench copy")
    info = describe_problem(path, "triton", {}, "cpu")
    builder = ContextBuilder(info, Settings())
    ctx = builder.build("planner", Tree(info.source), Trajectory(), parent=None)
    return Planner().render(ctx)[-1].content


def test_the_training_mode_is_stated_where_a_layer_depends_on_it(kernelbench):
    text = first_planner_prompt(kernelbench, "level2/33_Gemm_Scale_BatchNorm.py")
    assert ("Mode: the judge runs the reference and your `ModelNew` as constructed, in training mode (it never "
            "calls `.eval()`), under `torch.no_grad()`.") in text
    assert "- `bn` (BatchNorm1d): normalises with the current batch's mean and biased variance" in text
    dropout = first_planner_prompt(kernelbench, "level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout.py")
    assert "(Dropout, p=0.2): draws a new random mask on every call" in dropout
    assert "Mode:" not in first_planner_prompt(kernelbench, "level1/19_ReLU.py")


# hand-written test problem in KernelBench format: a BatchNorm the problem's own code leaves in eval mode
# (running statistics) beside one in training mode, and a Dropout
SWITCHED = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fixed = nn.BatchNorm1d(16)
        self.fixed.eval()
        self.live = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.live(self.fixed(x)))

def get_inputs():
    return [torch.rand(8, 16)]

def get_init_inputs():
    return []
'''


def test_each_layer_is_described_in_the_mode_it_is_in_as_constructed(tmp_path):
    path = tmp_path / "switched.py"
    path.write_text(SWITCHED)
    info = describe_problem(path, "triton", {}, "cpu")
    fixed, live, drop = info.mode_layers
    assert fixed.startswith("`fixed` (BatchNorm1d, in eval mode as constructed): normalises with its running mean")
    assert live.startswith("`live` (BatchNorm1d): normalises with the current batch's mean")
    assert drop == "`drop` (Dropout, p=0.1): draws a new random mask on every call"
    ctx = ContextBuilder(info, Settings()).build("planner", Tree(info.source), Trajectory(), parent=None)
    text = Planner().render(ctx)[-1].content
    assert "as constructed, each layer in the mode the problem's own code left it in" in text
    assert "in training mode (it never" not in text


def test_the_training_mode_reaches_a_runs_first_prompt_end_to_end(tmp_path):
    """Issue 31, point 8: from the reference file through the run's stored problem to the prompt file
    of round 1 (an exchange run judged here, on the CPU)."""
    from kernelwright.search.drivers.modes import run_optimization
    from kernelwright.search.drivers.session import RunOptions

    path = tmp_path / "bn.py"
    path.write_text(SWITCHED.replace("        self.fixed.eval()\n", ""))
    run_dir = tmp_path / "run"
    waiting = run_optimization(RunOptions(problem=str(path), llm="exchange", run_dir=str(run_dir),
                                          settings=Settings(strategy="greedy", drafts=1, iterations=1, skills_k=0,
                                                            tune=False)))
    assert waiting.status == "paused" and len(waiting.pending_prompts) == 1
    prompt = waiting.pending_prompts[0].read_text()
    assert ("Mode: the judge runs the reference and your `ModelNew` as constructed, in training mode (it never "
            "calls `.eval()`), under `torch.no_grad()`.") in prompt
    assert "- `fixed` (BatchNorm1d): normalises with the current batch's mean and biased variance" in prompt
    assert "- `drop` (Dropout, p=0.1): draws a new random mask on every call" in prompt
