"""End to end on the CPU (Triton in its interpreter): the same candidates judged under each rule set.

A hand-written conv + ReLU + bias problem (tests/judge/problems/conv_relu_bias.py) and hand-written
candidates in tests/judge/candidates/rules/: the convolution left to torch with a fused Triton
epilogue, every op in torch plus a Triton copy kernel, and everything in one Triton kernel. The GPU
versions (cuDNN, extensions calling ATen and cuBLAS, TF32) are in test_gpu_rules.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.verdict import FAIL, PASS, REJECT

HERE = Path(__file__).parent
PROBLEM = HERE / "problems" / "conv_relu_bias.py"
CANDIDATES = HERE / "candidates" / "rules"
# (candidate, rules) -> expected status and the checks that must have rejected it
EXPECTED = {
    ("conv_torch_epilogue", "kernelbench"): (PASS, set()),
    ("conv_torch_epilogue", "library"): (FAIL, {"python_torch_ops"}),
    ("conv_torch_epilogue", "strict"): (FAIL, {"python_torch_ops"}),
    ("conv_torch_identity", "kernelbench"): (FAIL, {"torch_work"}),
    ("conv_torch_identity", "library"): (FAIL, {"torch_work", "python_torch_ops"}),
    ("conv_torch_identity", "strict"): (FAIL, {"python_torch_ops"}),
    ("conv_torch_only", "kernelbench"): (FAIL, {"torch_work", "own_kernel_launch"}),
    ("conv_triton_direct", "strict"): (PASS, set()),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("rules_cache"))
    jobs = [JudgeJob(PROBLEM, CANDIDATES / f"{name}.py", JudgeConfig(time=False, trials=2, rules=rules, cache_dir=cache),
                     name=f"{name}/{rules}") for name, rules in EXPECTED]
    with JudgePool(cpu_workers=2) as pool:
        return dict(zip(EXPECTED, pool.judge_many(jobs), strict=True))


@pytest.mark.parametrize("case", list(EXPECTED), ids=lambda c: f"{c[0]}-{c[1]}")
def test_rule_set_decides_as_stated(verdicts, case):
    verdict = verdicts[case]
    status, checks = EXPECTED[case]
    assert verdict.rules == case[1] and verdict.work is not None and verdict.work.rules == case[1]
    assert verdict.status == status, verdict.error
    assert {f.check for f in verdict.flags if f.severity == REJECT} == checks
    assert all(t.ok for t in verdict.trials)  # every one of them is correct: only the rules differ


def test_the_record_says_what_was_replaced(verdicts):
    kept = verdicts[("conv_torch_epilogue", "kernelbench")].work
    assert kept.reference == {"conv": 1, "elementwise": 2} and kept.torch == {"conv": 1}
    assert kept.replaced == {"elementwise": 2} and set(kept.launches["triton"]) == {"relu_bias_kernel"}
    own = verdicts[("conv_triton_direct", "strict")].work
    assert own.torch == {} and own.replaced == {"conv": 1, "elementwise": 2}


def test_margins_are_reported_per_trial_and_overall(verdicts):
    verdict = verdicts[("conv_triton_direct", "strict")]
    assert all(t.error_ratio is not None and t.error_ratio < 1 for t in verdict.trials)
    margin = verdict.precision["margin"]
    assert 0 < margin["worst"] < 1 and margin["worst"] == max(margin["elementwise"], margin["rel_l2"])
