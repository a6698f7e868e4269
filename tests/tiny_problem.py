"""A tiny KernelBench-format problem (ReLU times a scale, 64 elements) and judge settings fast
enough for CPU tests: what the suite, CLI and re-judge tests write as their problems."""
from __future__ import annotations

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
