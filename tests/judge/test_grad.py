"""Gradient checks (judge/grad.py), in-place contracts (judge/inplace.py) and the torch-op rule for
kernel references (judge/reference.py), on small PyTorch models in this process."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelwright.judge import JudgeConfig
from kernelwright.judge.check import TrialCase, reference_cases
from kernelwright.judge.grad import BackwardError, runner_for
from kernelwright.judge.inplace import compare_written, unexpected_writes
from kernelwright.judge.reference import cannot_run_here, torch_work_hits
from kernelwright.problem import load_problem

PROBLEM = '''
import torch
import torch.nn as nn
{declaration}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, scale):
        return torch.tanh(self.proj(x)) * scale

def get_inputs():
    return [torch.randn(4, 8), torch.rand(4, 1)]

def get_init_inputs():
    return []
'''


class WrongBackward(torch.autograd.Function):
    """tanh whose backward forgets the 1 - tanh^2 factor."""

    @staticmethod
    def forward(ctx, x):
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Wrong(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, scale):
        return WrongBackward.apply(self.proj(x)) * scale


class Renamed(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, scale):
        return torch.tanh(self.linear(x)) * scale


def _problem(tmp_path, declaration="KW_BACKWARD = True"):
    path = tmp_path / "tanh_linear.py"
    path.write_text(PROBLEM.format(declaration=declaration))
    return load_problem(path)


def _cases(problem, runner, trials=2):
    reference = problem.make_model(0)
    cases, refill, _ = reference_cases(problem, reference, trials, 42, "cpu", lambda: None)
    ops = runner.reference(reference, cases, lambda: None)
    return cases, ops


def _check(problem, runner, case, cls=None):
    model = problem.make_model(0, cls=cls)
    args = problem.make_inputs(case.seed, case.variant)
    runner.forward(model, args, case.seed)
    return runner.compare(case, JudgeConfig())


def test_reference_gradients_and_a_correct_candidate(tmp_path):
    problem = _problem(tmp_path)
    runner = runner_for(problem, "cpu")
    cases, ops = _cases(problem, runner)
    assert set(cases[0].ref_grads) == {"input 0", "input 1", "parameter proj.weight", "parameter proj.bias"}
    assert "tanh_backward" in ops or "mm" in ops  # the backward's ops are recorded as the reference's
    comparison, errors = _check(problem, runner, cases[1])
    assert comparison.ok and errors["parameter proj.weight"]["max_abs_err"] == 0.0


def test_a_wrong_backward_is_caught_and_named(tmp_path):
    problem = _problem(tmp_path)
    runner = runner_for(problem, "cpu")
    cases, _ = _cases(problem, runner)
    comparison, errors = _check(problem, runner, cases[0], cls=Wrong)
    assert not comparison.ok
    assert comparison.message.startswith("gradient of input 0 differs from the reference")
    assert errors["input 0"]["max_abs_err"] > 1e-3


def test_parameters_are_compared_by_name(tmp_path):
    problem = _problem(tmp_path)
    runner = runner_for(problem, "cpu")
    cases, _ = _cases(problem, runner)
    comparison, _ = _check(problem, runner, cases[0], cls=Renamed)
    assert not comparison.ok and "no parameter named 'proj.weight'" in comparison.message


def test_declarations_choose_inputs_and_output_gradients(tmp_path):
    assert runner_for(_problem(tmp_path, "KW_BACKWARD = False"), "cpu") is None
    problem = _problem(tmp_path, "KW_BACKWARD = True\nKW_GRAD_INPUTS = (0,)")
    runner = runner_for(problem, "cpu")
    cases, _ = _cases(problem, runner, trials=1)
    assert "input 1" not in cases[0].ref_grads and "input 0" in cases[0].ref_grads
    custom = _problem(tmp_path, "def get_grad_outputs():\n    return [torch.ones(4, 8)]")
    runner = runner_for(custom, "cpu")
    model = custom.make_model(0)
    args = custom.make_inputs(0)
    _, grads = runner.run(model, args, 0)
    x = args[0].detach().requires_grad_(True)
    expected = torch.autograd.grad(model(x, args[1]), x, torch.ones(4, 8))[0]
    assert torch.equal(grads["input 0"], expected)
    bad = _problem(tmp_path, "def get_grad_outputs():\n    return [torch.ones(4, 8), None]")
    with pytest.raises(BackwardError, match="returned 2 entries"):
        runner_for(bad, "cpu").run(bad.make_model(0), bad.make_inputs(0), 0)


def test_timed_call_runs_forward_and_backward(tmp_path):
    problem = _problem(tmp_path)
    runner = runner_for(problem, "cpu")
    model, args = problem.make_model(0), problem.make_inputs(0)
    grads = runner.timed_call(model, args, 0)()
    assert len(grads) == 4 and all(g is not None for g in grads)
    assert not args[0].requires_grad  # the judge's input buffers stay plain tensors


def test_in_place_contract():
    config = JudgeConfig()
    expected = torch.tensor([1.0, 2.0, 3.0])
    case = TrialCase(0, 0, "given", [expected.clone()], ref_inputs={1: expected})
    assert compare_written([torch.zeros(2), expected.clone()], case, config, "cpu").ok
    failed = compare_written([torch.zeros(2), torch.zeros(3)], case, config, "cpu")
    assert not failed.ok and failed.message.startswith("input 1 (the reference updates it in place) differs")
    assert compare_written([expected], TrialCase(0, 0, "given", []), config, "cpu") is None
    assert unexpected_writes([0, 1, 2], [1]) == [0, 2] and unexpected_writes([1], [1]) == []


def test_torch_work_of_a_kernel_reference():
    ops = {"empty": 1, "zeros": 1, "fill_": 1, "silu": 1, "mul": 1, "index": 1, "sort": 1, "_to_copy": 1, "view": 2}
    assert torch_work_hits({"kind": "triton"}, ops) == ["index", "mul", "silu", "sort"]
    assert torch_work_hits({"kind": "torch"}, ops) == [] and torch_work_hits(None, ops) == []
    source = "import torch.utils.cpp_extension as c\nm = c.load_inline(name='x', cpp_sources='', cuda_sources=src)"
    assert "needs a CUDA GPU" in cannot_run_here(source, "cpu")
    assert cannot_run_here(source, "cuda") is None and cannot_run_here("import torch", "cpu") is None
    cpp_only = source.replace("cuda_sources=src", "cuda_sources=''")  # a C++ extension runs on the CPU
    assert cannot_run_here(cpp_only, "cpu") is None
