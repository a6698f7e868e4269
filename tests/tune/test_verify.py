"""The judge checks that a template's default instance behaves like the original kernel.

The kernel and its templates are hand-written test data: a Triton ReLU, its faithful template,
and a template whose rewrite changed the result.
"""
import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.tune.template import parse_template
from kernelwright.tune.verify import verify_default

ORIGINAL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128, num_warps=4)
        return y
'''

DECLARATION = '''
KW_TUNE = {
    "params": {"BLOCK": [64, 128, 256], "num_warps": [1, 2, 4]},
    "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
    "defaults": {"BLOCK": 128, "num_warps": 4},
}
KW_PARAMS = dict(KW_TUNE["defaults"])
'''
FAITHFUL = ORIGINAL.replace("\n\n@triton.jit", DECLARATION + "\n\n@triton.jit").replace(
    "relu_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128, num_warps=4)",
    'relu_kernel[(triton.cdiv(n, KW_PARAMS["BLOCK"]),)](x, y, n, BLOCK=KW_PARAMS["BLOCK"], '
    'num_warps=KW_PARAMS["num_warps"])')
CHANGED = FAITHFUL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")

CONFIG = JudgeConfig(trials=2, baselines=(), warmup_ms=1.0, rep_ms=5.0, min_reps=2, max_reps=3,
                     overrides={"batch_size": 4, "dim": 50})


@pytest.fixture
def problem(kernelbench):
    return kernelbench / "level1/19_ReLU.py"


def test_faithful_template_is_accepted(problem, tmp_path):
    template = parse_template(FAITHFUL)
    result = verify_default(template, ORIGINAL, problem, CONFIG)
    assert result.ok, result.message
    assert result.original.passed and result.default.passed
    assert result.time_ratio is not None and result.time_ratio > 0


def test_changed_behaviour_is_caught(problem):
    result = verify_default(parse_template(CHANGED), ORIGINAL, problem, CONFIG)
    assert not result.ok
    assert result.original.passed and not result.default.passed
    assert "changed the kernel's behaviour" in result.message
