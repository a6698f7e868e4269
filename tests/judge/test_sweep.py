"""A sweep: instances of one template benchmarked inside one evaluation (judge/sweep.py, issue 33)."""
from __future__ import annotations

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import judge_sweep
from kernelwright.judge.request import SourceText
from kernelwright.judge.sweep import (BUILD_ERROR, CRASHED, FAILED, NOT_RUN, OK, REJECTED, RUNNING, ConfigResult,
                                      SweepInstance, SweepResult, parse_instances, settle)
from kernelwright.judge.verdict import ProcessInfo, Verdict

# hand-written test problem in KernelBench format: tiny, so the Triton interpreter is quick
PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 256)]

def get_init_inputs():
    return []
''', "relu_small")

# a hand-written template: the ReLU with its block size as the parameter (KW_PARAMS set per instance)
TEMPLATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_TUNE = {"params": {"BLOCK": [64, 128, 256, 512]}, "defaults": {"BLOCK": 256}}
KW_PARAMS = {"BLOCK": BLOCK_VALUE}
CALLS = [0]


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        x = x.contiguous()
        y = torch.empty_like(x)
        block = KW_PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
        EXTRA
        return y
'''


def instance(block, extra: str = "pass", head: str = "") -> SweepInstance:
    source = head + TEMPLATE.replace("BLOCK_VALUE", str(block)).replace("EXTRA", extra)
    return SweepInstance({"BLOCK": block}, source)


FAST = JudgeConfig(warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20, timeout_s=120)


def test_a_sweep_skips_what_fails_with_its_reason_and_times_the_rest():
    instances = [
        instance(128),
        instance(256, extra="y = y * 0.5"),  # wrong: fails its trial
        instance(64, head="raise ImportError('no such backend')\n"),  # fails to build (import)
        instance(512),
        # tells the checked call from the timed ones by counting calls: right only on its first call
        instance(256, extra="y = y if CALLS[0] <= 1 else torch.zeros_like(y)"),
    ]
    result, verdict = judge_sweep(PROBLEM, instances, FAST)
    statuses = [c.status for c in result.configs]
    assert statuses == [OK, FAILED, BUILD_ERROR, OK, REJECTED], [(c.status, c.reason) for c in result.configs]
    assert verdict.status == "pass" and verdict.sweep is not None
    failed, broken, cheat = result.configs[1], result.configs[2], result.configs[4]
    assert "trial 0" in failed.reason and failed.time_ms is None
    assert "no such backend" in broken.reason
    assert "timed_mismatch" in cheat.reason  # the sampled timed calls caught it: it gains nothing
    for config in (result.configs[0], result.configs[3]):
        assert config.time_ms > 0 and config.calls >= 3 and config.checked >= 3 and config.params
    assert [c.index for c in result.ranked] in ([0, 3], [3, 0])
    assert "one repeat" in result.timing_note and result.seconds > 0
    assert verdict.trials == [] and verdict.timing is None  # the sweep's verdict judges no candidate


def test_a_runner_that_dies_ends_the_sweep_and_says_so():
    instances = [instance(128), instance(256, extra="import os; os._exit(3)"), instance(512)]
    result, _ = judge_sweep(PROBLEM, instances, FAST)
    assert [c.status for c in result.configs] == [OK, CRASHED, NOT_RUN]
    assert "exited with code 3" in result.configs[1].reason
    assert "configuration 1" in result.ended_early and result.configs[2].reason == result.ended_early


def test_an_instance_cannot_rewrite_the_next_one():
    # at import, the first instance tries to replace the second one's file with a wrong kernel
    rewrite = ("from pathlib import Path\n"
               "LOG = []\n"
               "try:\n"
               "    Path(__file__).with_name('instance_0001.py').write_text('raise SystemExit(9)')\n"
               "except OSError as exc:\n"
               "    LOG.append(exc)\n")
    result, verdict = judge_sweep(PROBLEM, [instance(128, head=rewrite), instance(256)], FAST)
    if not verdict.process.confined:
        pytest.skip("no filesystem confinement on this machine (Landlock)")
    assert [c.status for c in result.configs] == [OK, OK], [(c.status, c.reason) for c in result.configs]


def test_a_too_slow_instance_is_skipped_and_a_hanging_one_ends_the_sweep():
    instances = [instance(128), instance(256, extra="import time; time.sleep(4)"),
                 instance(512, extra="import time; time.sleep(600)"), instance(64)]
    config = JudgeConfig(warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20, timeout_s=20)
    result, verdict = judge_sweep(PROBLEM, instances, config)
    assert [c.status for c in result.configs] == [OK, "timed_out", "timed_out", NOT_RUN]
    assert "would take longer than the 10 s allowed" in result.configs[1].reason  # skipped, the sweep went on
    assert "configuration 2" in result.ended_early and verdict.process.timed_out is False  # the checker noticed
    assert "no answer within 10 s" in result.configs[2].reason  # half of timeout_s: before the stage clock


def test_an_evaluation_killed_mid_sweep_names_the_configuration_it_was_in():
    running = SweepResult(configs=[ConfigResult(0, {"B": 1}, status=OK, time_ms=1.0),
                                   ConfigResult(1, {"B": 2}, status=RUNNING), ConfigResult(2, {"B": 3})])
    verdict = Verdict(problem="p", candidate="c", error="timed out in the check stage", sweep=running.to_dict(),
                      process=ProcessInfo(timed_out=True, wall_s=9.0))
    result = settle([SweepInstance({"B": b}, "") for b in (1, 2, 3)], verdict)
    assert [c.status for c in result.configs] == [OK, "timed_out", NOT_RUN]
    assert result.configs[1].reason == "timed out in the check stage" and "configuration 1" in result.ended_early


def test_malformed_sweep_requests_are_refused_clearly():
    with pytest.raises(ValueError, match="non-empty list"):
        parse_instances([])
    with pytest.raises(ValueError, match="instance 0"):
        parse_instances([{"params": {}, "source": 3}])


def test_a_fault_that_breaks_the_cuda_context_is_recognised():
    from kernelwright.judge.sweep import breaks_context

    assert breaks_context("ModelNew.forward raised RuntimeError: CUDA error: an illegal memory access was encountered")
    assert not breaks_context("trial 0 (given inputs): output differs from the reference in 3 of 8 elements")
