"""The in-process evaluator used to benchmark the tuner: check, prune, time, compile ahead."""
import os

from kernelwright.problem import load_problem
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.template import parse_template

# hand-written test template: SCALE=1 is the correct kernel, any other value computes a wrong result
SOURCE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_TUNE = {
    "params": {"BLOCK": [32, 64], "SCALE": [1, 2]},
    "defaults": {"BLOCK": 64, "SCALE": 1},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * SCALE, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = KW_PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), SCALE=KW_PARAMS["SCALE"], BLOCK=block)
        return y
'''


def test_wrong_instances_fail_the_check_and_right_ones_are_timed(kernelbench, tmp_path):
    problem = load_problem(kernelbench / "level1/19_ReLU.py", overrides={"batch_size": 3, "dim": 70})
    template = parse_template(SOURCE)
    evaluator = InProcessEvaluator(problem, device="cpu", rep_ms=2, warmup_ms=0, workdir=tmp_path)
    good, bad = evaluator.evaluate(template, [{"BLOCK": 32, "SCALE": 1}, {"BLOCK": 32, "SCALE": 2}])
    assert good.status == "pass" and good.time_ms > 0 and good.method == "wall_cpu"
    assert "CPU wall time" in good.note
    assert bad.status == "fail" and bad.stage == "check" and "differs" in bad.error
    assert len(list(tmp_path.glob("i*.py"))) == 2  # one file per instance, named by its hash


def test_broken_instance_is_an_error_not_a_crash(kernelbench, tmp_path):
    problem = load_problem(kernelbench / "level1/19_ReLU.py", overrides={"batch_size": 3, "dim": 70})
    template = parse_template(SOURCE.replace("tl.maximum(x, 0.0)", "tl.maximum(x, undefined_name)"))
    [m] = InProcessEvaluator(problem, device="cpu", rep_ms=2, workdir=tmp_path).evaluate(template, [template.defaults])
    assert m.status == "error" and "undefined_name" in m.error


def test_compile_ahead_pool_runs_instances(kernelbench, tmp_path):
    problem = load_problem(kernelbench / "level1/19_ReLU.py", overrides={"batch_size": 2, "dim": 40})
    template = parse_template(SOURCE)
    evaluator = InProcessEvaluator(problem, device="cpu", rep_ms=1, compile_workers=2, workdir=tmp_path)
    paths = [evaluator.instance_path(template, {"BLOCK": b, "SCALE": 1}) for b in (32, 64)]
    env = os.environ.get("TRITON_INTERPRET")
    try:
        assert evaluator._prewarm(paths) == 2
    finally:
        evaluator.close()
    assert env == os.environ.get("TRITON_INTERPRET")


def test_the_reference_is_computed_in_full_fp32_and_the_switches_are_put_back():
    """cuDNN convolutions default to TF32: the in-process reference must not (the judge's is fp32)."""
    import torch

    from kernelwright.tune.inprocess import full_fp32

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        with full_fp32():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
