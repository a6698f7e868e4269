"""On a GPU: the rule sets and precision by measurement, end to end.

Every case is judged once, through one pool (extensions precompiled in parallel, several
evaluations at once on the GPU), by a module fixture; each test then checks verdicts:

- cuDNN convolution + fused Triton ReLU/bias epilogue: kernelbench passes, library and strict reject;
- every op in torch + a Triton copy kernel: rejected under every rule set;
- a C++ extension calling at::matmul, and one calling cublasSgemm directly, each with a Triton
  epilogue: library (and kernelbench) pass, strict rejects (ATen ops inside the extension's call and
  in its symbols; the linked cuBLAS);
- an fp32 GEMM in Triton with 3xTF32: passes, margin reported; with single-pass TF32: fails by its
  measured error on signed inputs, no flag involved.

Problems and candidates are hand-written (tests/judge/problems, tests/judge/candidates/rules).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.verdict import FAIL, PASS, REJECT

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent
REPO = HERE.parents[1]
CANDIDATES = HERE / "candidates" / "rules"
CONV = (HERE / "problems" / "conv_relu_bias.py",
        {"batch_size": 16, "in_channels": 32, "out_channels": 64, "height": 64, "width": 64})
LINEAR = (REPO / "examples" / "problems" / "linear_relu.py",
          {"batch_size": 512, "in_features": 1024, "out_features": 1024})
MATMUL = (HERE / "problems" / "matmul_signed.py", {"M": 1024, "K": 4096, "N": 1024})  # signed inputs, long K
RULES = ("kernelbench", "library", "strict")
# (candidate, rules) -> (problem, expected status, checks that must reject it)
CASES = {
    **{("conv_torch_epilogue", r): (CONV, PASS if r == "kernelbench" else FAIL,
                                    set() if r == "kernelbench" else {"python_torch_ops"}) for r in RULES},
    ("conv_torch_identity", "kernelbench"): (CONV, FAIL, {"torch_work"}),
    ("conv_torch_identity", "library"): (CONV, FAIL, {"torch_work", "python_torch_ops"}),
    ("conv_torch_identity", "strict"): (CONV, FAIL, {"python_torch_ops"}),
    **{("linear_ext_aten_matmul", r): (LINEAR, FAIL if r == "strict" else PASS,
                                       {"extension_torch_ops"} if r == "strict" else set()) for r in RULES},
    **{("linear_ext_cublas", r): (LINEAR, FAIL if r == "strict" else PASS,
                                  {"extension_libraries"} if r == "strict" else set()) for r in RULES},
    ("matmul_tf32x3", "kernelbench"): (MATMUL, PASS, set()),
    ("matmul_tf32", "kernelbench"): (MATMUL, FAIL, set()),
}


@pytest.fixture(scope="module")
def verdicts():
    jobs = []
    for (name, rules), ((problem, sizes), _, _) in CASES.items():
        config = JudgeConfig(rules=rules, time=False, trials=5 if problem == MATMUL[0] else 3, overrides=sizes,
                             compile_timeout_s=400.0)
        jobs.append(JudgeJob(problem, CANDIDATES / f"{name}.py", config, name=f"{name}/{rules}"))
    with JudgePool(per_gpu=6) as pool:
        return dict(zip(CASES, pool.judge_many(jobs), strict=True))


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: f"{c[0]}-{c[1]}")
def test_rule_set_decides_as_stated(verdicts, case):
    verdict = verdicts[case]
    _, status, checks = CASES[case]
    assert verdict.device.startswith("cuda") and verdict.rules == case[1]
    assert verdict.status == status, verdict.error
    assert {f.check for f in verdict.flags if f.severity == REJECT} == checks, verdict.flags


def test_cudnn_conv_with_an_own_epilogue_replaces_the_elementwise_work(verdicts):
    work = verdicts[("conv_torch_epilogue", "kernelbench")].work
    assert work.reference == {"conv": 1, "elementwise": 2} and work.torch == {"conv": 1}
    assert set(work.launches["triton"]) == {"relu_bias_kernel"}


def test_extension_calls_are_attributed_and_their_libraries_read(verdicts):
    aten = verdicts[("linear_ext_aten_matmul", "strict")]
    assert aten.work.python == {} and aten.work.extension == {"matmul": 1}
    assert any(name.endswith("matmul_t") for name in aten.work.launches["extension"])
    assert "at::" in aten.error  # the symbol reference is named too
    cublas = verdicts[("linear_ext_cublas", "strict")]
    assert cublas.work.torch == {} and any("cublas" in v.lower() for v in cublas.work.vendor), cublas.work.vendor
    assert verdicts[("linear_ext_cublas", "library")].work.vendor == []  # library does not look


def test_3xtf32_passes_with_its_margin_and_tf32_fails_by_measurement(verdicts):
    good, bad = verdicts[("matmul_tf32x3", "kernelbench")], verdicts[("matmul_tf32", "kernelbench")]
    margin = good.precision["margin"]
    assert all(t.ok for t in good.trials) and margin["worst"] < 0.5, margin
    assert not [f for f in bad.flags if f.severity == REJECT]  # nothing but the numbers rejects it
    assert any(not t.ok and t.rel_l2_ratio and t.rel_l2_ratio > 1 for t in bad.trials), [t.rel_l2_err for t in bad.trials]
    print(f"\n3xTF32 margin {margin}; TF32 rel-L2 errors {[t.rel_l2_err for t in bad.trials]}")
