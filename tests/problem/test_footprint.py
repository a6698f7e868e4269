"""problem/footprint.py: what one timed call moves and computes at least (the floor's numbers)."""
from __future__ import annotations

from pathlib import Path

from kernelwright.problem import load_problem
from kernelwright.problem.footprint import measure

REPO = Path(__file__).resolve().parents[2]
LINEAR = """
import torch
import torch.nn as nn
{flag}
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)
    def forward(self, x):
        return self.fc(x)
def get_inputs():
    return [torch.randn(16, 64)]
def get_init_inputs():
    return []
"""
INPLACE = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x.mul_(2.0)
def get_inputs():
    return [torch.randn(1000)]
def get_init_inputs():
    return []
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "problem.py"
    path.write_text(text)
    return load_problem(path, shrink=False)


def test_forward_only_counts_inputs_parameters_and_outputs(tmp_path):
    found = measure(_load(tmp_path, LINEAR.format(flag="")))
    assert found.complete and not found.backward
    assert found.bytes == 4 * (16 * 64 + 32 * 64 + 32 + 16 * 32)
    assert found.flops == 2 * 16 * 64 * 32


def test_a_declared_backward_counts_output_gradients_gradients_and_its_flops(tmp_path):
    found = measure(_load(tmp_path, LINEAR.format(flag="KW_BACKWARD = True")))
    forward = 16 * 64 + 32 * 64 + 32 + 16 * 32
    gradients = 16 * 32 + 16 * 64 + 32 * 64 + 32  # dy read; dx, dW, db written
    assert found.complete and found.backward
    assert found.bytes == 4 * (forward + gradients)
    assert found.flops == 3 * 2 * 16 * 64 * 32  # forward, dx and dW products


def test_an_input_changed_in_place_is_written_back(tmp_path):
    found = measure(_load(tmp_path, INPLACE))
    assert found.bytes == 4 * 1000 * 3  # read, written back, and returned (an output)


def test_a_triton_reference_is_measured_by_its_tensors():
    """The launches are skipped on meta; the outputs and gradients its Python code allocates count."""
    problem = load_problem(REPO / "examples" / "realworld" / "silu_and_mul.py",
                           {"num_tokens": 8, "intermediate_size": 256}, shrink=False)
    x = problem.module.get_inputs()[0]
    found = measure(problem)
    half = x.numel() // 2 * x.element_size()
    assert found.complete and found.backward
    assert found.bytes == 2 * half + half + half + 2 * half  # x, out, d(out), dx
