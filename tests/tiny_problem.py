"""A tiny KernelBench-format problem (ReLU times a scale, 64 elements) and judge settings fast
enough for CPU tests: what the suite, CLI and re-judge tests write as their problems."""
from __future__ import annotations

from pathlib import Path

from kernelwright.judge.config import JudgeConfig

TINY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}


def get_inputs():
    return [torch.rand(64)]


def get_init_inputs():
    return []
"""
FAST = JudgeConfig(trials=2, baselines=("eager",), warmup_ms=1, rep_ms=5, min_reps=3, max_reps=10, device="cpu")


def write_problems(folder: Path, scales: tuple[int, ...] = (2, 3)) -> list[Path]:
    """TINY at each scale as `relu_x<scale>.py` in `folder` (made here): a suite of tiny problems, sorted."""
    folder.mkdir(parents=True, exist_ok=True)
    for scale in scales:
        (folder / f"relu_x{scale}.py").write_text(TINY.format(scale=scale))
    return sorted(folder.glob("*.py"))


# hand-written test problem in KernelBench format: a bare matmul, so torch.compile writes no Triton
# kernel of its own (inductor calls the library): no seed can be exported from it
BARE_MATMUL = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(16, 32), torch.randn(32, 8)]


def get_init_inputs():
    return []
"""
