"""On a GPU: the judge end to end with CUDA timing, allocator poisoning and baselines."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig, judge
from kernelwright.judge.request import SourceText

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).parent / "candidates"
RELU_PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 8192

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
''', "relu_problem")  # hand-written test problem in KernelBench format


def test_example_passes_on_gpu_with_cuda_event_timing_and_baselines():
    verdict = judge(REPO / "examples/problems/linear_relu.py", REPO / "examples/candidates/linear_relu.py",
                    JudgeConfig(trials=5, baselines=("eager",)))
    assert verdict.status == "pass", verdict.error
    assert verdict.device.startswith("cuda") and not verdict.shrunk
    # the candidate is timed by CUDA events on the checker's stream (MPS) or in its own process (no MPS)
    assert verdict.timing.method in ("checker_events", "runner_events") and verdict.timing.median_ms > 0
    assert verdict.baselines.eager is not None and "eager" in verdict.speedup
    assert not verdict.reject_flags()


def test_empty_output_cannot_borrow_the_reference_memory_on_gpu():
    verdict = judge(RELU_PROBLEM, CANDIDATES / "relu_empty.py", JudgeConfig(trials=3, time=False))
    assert verdict.status == "fail"
    assert "uninitialized_output" in {f.code for f in verdict.flags}


def test_correct_triton_relu_passes_on_gpu_without_spurious_flags():
    verdict = judge(RELU_PROBLEM, CANDIDATES / "relu_correct.py", JudgeConfig(trials=3, baselines=("eager",)))
    assert verdict.status == "pass", verdict.error
    assert not [f for f in verdict.flags if f.code in ("monkeypatch", "precision", "torch_op")]


def test_gpu_verdict_generates_inputs_on_the_device_and_reports_stages_and_energy():
    verdict = judge(RELU_PROBLEM, CANDIDATES / "relu_correct.py", JudgeConfig(trials=3, baselines=()))
    assert verdict.status == "pass", verdict.error
    assert verdict.precision["inputs_on_device"] is True
    assert verdict.precision["reference_on_device_bytes"] > 0  # 4 x 128 MiB outputs fit the budget
    for stage in ("imports", "reference", "check", "time", "energy", "overhead"):
        assert stage in verdict.stage_seconds, stage
    assert "available" in verdict.energy
    if verdict.energy["available"]:
        assert verdict.energy["calls"] > 0 and verdict.energy["joules_per_call"] > 0
    else:
        assert verdict.energy["reason"]


def test_two_candidates_checked_at_once_on_one_gpu_both_pass():
    from kernelwright.judge.scheduling.pool import JudgePool

    config = JudgeConfig(trials=2, baselines=())
    with JudgePool(config, per_gpu=2) as pool:
        verdicts = pool.judge_many([(RELU_PROBLEM, CANDIDATES / "relu_correct.py")] * 2)
    assert all(v.status == "pass" for v in verdicts), [v.error for v in verdicts]
    medians = sorted(v.timing.median_ms for v in verdicts)
    assert medians[1] < 1.25 * medians[0]  # timings taken in turn agree
