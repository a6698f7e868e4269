"""Configurations swept in one judge evaluation, the winner judged in full (tune/sweep_eval.py)."""
from __future__ import annotations

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.tune.cache import TuneCache
from kernelwright.tune.evaluate import ERROR, FAIL, PASS, SWEPT, Measurement
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.sweep_eval import SweepEvaluator
from kernelwright.tune.template import parse_template
from kernelwright.tune.tuner import tune

# hand-written test problem in KernelBench format, tiny for the Triton interpreter
PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 256)]

def get_init_inputs():
    return []
'''

# a hand-written template whose parameters also steer what the tests need: WRONG scales the output
# (its trial fails), BLOCK 1024 refuses to import (it fails to build), DELAY_MS ranks the instances,
# CLAMP caps the output at 50 (right on the sweep's "given" inputs, wrong on the full judgement's
# wide_pos trial, whose largest value is +100)
TEMPLATE = '''
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_TUNE = {
    "params": {"BLOCK": [128, 256, 512, 1024], "WRONG": [0, 1], "DELAY_MS": [0, 100, 200], "CLAMP": [0, 1]},
    "defaults": {"BLOCK": 256, "WRONG": 0, "DELAY_MS": 0, "CLAMP": 0},
}
KW_PARAMS = dict(KW_TUNE["defaults"])
if KW_PARAMS["BLOCK"] > 512:
    raise RuntimeError("BLOCK above 512 is not supported by this kernel")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, CLAMP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0)
    if CLAMP:
        y = tl.minimum(y, 50.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = KW_PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, CLAMP=KW_PARAMS["CLAMP"])
        if KW_PARAMS["DELAY_MS"]:
            time.sleep(KW_PARAMS["DELAY_MS"] / 1e3)
        if KW_PARAMS["WRONG"]:
            y = y * 0.5
        return y
'''

FAST = JudgeConfig(warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20, timeout_s=120, baselines=())


def config(block=256, wrong=0, delay=0, clamp=0) -> dict:
    return {"BLOCK": block, "WRONG": wrong, "DELAY_MS": delay, "CLAMP": clamp}


@pytest.fixture
def problem(tmp_path):
    path = tmp_path / "relu_small.py"
    path.write_text(PROBLEM)
    return path


def test_a_sweep_skips_failures_and_only_its_fully_judged_winner_can_be_best(problem, tmp_path):
    template = parse_template(TEMPLATE, name="relu")
    configs = [config(128, delay=100), config(256, wrong=1), config(1024), config(512, delay=200), config(256)]
    cache = TuneCache(tmp_path / "cache.sqlite")
    evaluator = SweepEvaluator(problem, FAST, workdir=tmp_path / "work", cache=cache)
    result = tune(template, evaluator, strategy="exhaustive", batch=len(configs), max_runs=2, limits=H100_SXM,
                  first=configs, budget=len(configs))
    by = {tuple(t.params.values()): t.measurement for t in result.trials}
    assert len(evaluator.sweeps) == 1 and len(result.trials) == 5  # five configurations, one sweep
    wrong, broken = by[(256, 1, 0, 0)], by[(1024, 0, 0, 0)]
    assert wrong.status == FAIL and "trial 0" in wrong.error and wrong.value is None
    assert broken.status == ERROR and "BLOCK above 512" in broken.error
    winner = by[(256, 0, 0, 0)]  # no delay: the fastest in the sweep, then judged again from scratch
    assert winner.status == PASS and winner.verdict["status"] == "pass"
    assert len(winner.verdict["trials"]) == FAST.trials and winner.verdict["timing"]["median_ms"] > 0
    assert "sweep:" in winner.note and winner.verdict.get("sweep") is None  # its verdict is a full one
    assert result.best.measurement is winner
    stored = cache.get(template.hash, winner.params, evaluator.device, evaluator.sizes, evaluator.context)
    assert stored["status"] == PASS and stored["verdict"] == winner.verdict  # the full verdict is what is kept
    for other in (by[(128, 0, 100, 0)], by[(512, 0, 200, 0)]):
        assert other.status == SWEPT and other.value > 0 and not other.ok and other.verdict is None
    assert result.cost.judge_runs == 2 and result.cost.evaluations == 5  # the budget's unit, and what it cost
    assert "2 judge evaluation(s)" in result.cost.summary()


def test_the_runner_up_is_judged_when_the_winner_fails_its_full_judgement(problem, tmp_path):
    template = parse_template(TEMPLATE, name="relu")
    configs = [config(256, clamp=1), config(128, delay=100), config(512, delay=200)]
    evaluator = SweepEvaluator(problem, FAST, workdir=tmp_path / "work")
    found = evaluator.evaluate(template, configs)
    clamped, second, third = found
    assert evaluator.sweeps[0].ranked[0].params == configs[0]  # it passed the sweep's trial, fastest
    assert clamped.status == FAIL and "wide_pos" in clamped.error  # the full judgement's trials caught it
    assert second.status == PASS and second.ok and third.status == SWEPT
    assert sum(m.runs for m in found) == 3


def test_a_budget_of_evaluations_stops_before_a_sweep_it_cannot_pay():
    class Counting:
        device = "cpu"
        runs_for = SweepEvaluator.runs_for

        def __init__(self):
            self.batches = []

        def evaluate(self, template, configs):
            self.batches.append(len(configs))
            cost = self.runs_for(len(configs))  # the sweep and its winner's judgement, carried by the first
            return [Measurement(c, SWEPT, time_ms=1.0 + i, runs=cost if i == 0 else 0) for i, c in enumerate(configs)]

    template = parse_template(TEMPLATE, name="relu")
    counting = Counting()
    result = tune(template, counting, strategy="exhaustive", batch=8, max_runs=5, limits=H100_SXM)
    # 2 + 2 evaluations for two sweeps of 8; the fifth pays for one configuration judged alone
    assert counting.batches == [8, 8, 1] and len(result.trials) == 17


def test_configurations_a_dying_runner_left_unrun_go_into_another_sweep(problem, tmp_path):
    source = (TEMPLATE.replace('"CLAMP": [0, 1]}', '"CLAMP": [0, 1], "EXIT": [0, 1]}')
              .replace('"CLAMP": 0}', '"CLAMP": 0, "EXIT": 0}')
              .replace("        x = x.contiguous()\n", "        if KW_PARAMS['EXIT']:\n            import os\n"
                       "            os._exit(3)\n        x = x.contiguous()\n"))
    template = parse_template(source, name="relu_exit")
    configs = [{**config(128, delay=100), "EXIT": 0}, {**config(256), "EXIT": 1}, {**config(512), "EXIT": 0}]
    evaluator = SweepEvaluator(problem, FAST, workdir=tmp_path / "work")
    found = evaluator.evaluate(template, configs)
    assert len(evaluator.sweeps) == 2 and evaluator.sweeps[0].ended_early  # the second sweep took the rest
    assert [c.params for c in evaluator.sweeps[1].configs] == [configs[2]]
    assert found[1].status == FAIL and "crashed in a sweep" in found[1].error and "code 3" in found[1].error
    assert found[2].status == PASS and found[0].status == SWEPT  # 512 without delay: the winner, judged in full
    assert sum(m.runs for m in found) == 3  # two sweeps and one full judgement
