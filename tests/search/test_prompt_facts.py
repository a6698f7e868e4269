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
