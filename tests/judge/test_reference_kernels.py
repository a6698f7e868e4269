"""References that are kernels themselves (Triton, CUDA), in-place references and backward problems,
judged end to end in worker processes (Triton through the interpreter without a GPU) on the
real-world suite at small sizes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.judge import JudgeConfig, judge
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.pool import JudgePool
from kernelwright.tune.from_reference import reference_candidate

SUITE = Path(__file__).resolve().parents[2] / "examples" / "realworld"
CANDIDATES = Path(__file__).resolve().parent / "candidates"
SILU = SUITE / "silu_and_mul.py"
ROTARY = SUITE / "rotary_inplace.py"
SILU_SIZES = {"num_tokens": 4, "intermediate_size": 96}
ROTARY_SIZES = {"num_tokens": 6, "num_heads": 4, "num_kv_heads": 2, "head_size": 16, "max_position": 32}
QUICK = dict(trials=2, time=False, baselines=())
TIMED = dict(trials=2, warmup_ms=1.0, rep_ms=5.0, min_reps=2, max_reps=3, energy_ms=0)


def _own(problem: Path) -> SourceText:
    return SourceText(reference_candidate(problem.read_text()), name=f"{problem.stem}_reference_kernels")


def test_triton_reference_is_the_baseline_and_its_kernels_the_work():
    verdict = judge(SILU, _own(SILU), JudgeConfig(overrides=SILU_SIZES, **TIMED))
    assert verdict.status == "pass", verdict.error
    reference = verdict.reference
    assert reference["kind"] == "triton" and reference["backward"]
    assert reference["triton_kernels"] == ["silu_and_mul_fwd_kernel", "silu_and_mul_bwd_kernel"]
    assert reference["launches"] == {"silu_and_mul_fwd_kernel": 1} and reference["compute_ops"] == []
    assert verdict.baselines.eager_label == "reference kernel (Triton)"
    assert verdict.baselines.work == "forward+backward"
    assert "not applicable" in verdict.baselines.errors["compile_default"]
    assert "forward + backward" in verdict.timing.note and "forward + backward" in verdict.baselines.eager.note
    assert "eager" in verdict.speedup
    assert all(set(t.grads) == {"input 0"} and t.grads["input 0"]["max_abs_err"] == 0.0 for t in verdict.trials)


def test_gradient_checks_catch_a_wrong_backward_and_a_forward_outside_autograd():
    config = JudgeConfig(overrides=SILU_SIZES, **QUICK)
    names = ("silu_mul_wrong_backward", "silu_mul_no_autograd", "silu_mul_torch")
    wrong, detached, torch_ops = JudgePool(config, cpu_workers=2).judge_many(
        [(SILU, CANDIDATES / f"{name}.py") for name in names])
    assert wrong.status == "fail" and wrong.stage == "done"
    assert wrong.trials[0].max_abs_err < 0.05  # the forward is right (up to a bf16 rounding) ...
    assert "gradient of input 0 differs from the reference" in wrong.error  # ... the backward is not
    assert wrong.trials[0].grads["input 0"]["max_abs_err"] > 0.01
    assert detached.status == "fail" and "torch.autograd.Function" in detached.error
    flags = {f.code: f for f in torch_ops.flags}
    assert torch_ops.status == "fail" and flags["torch_op"].severity == "reject"
    assert "silu" in flags["torch_op"].message and torch_ops.trials[0].ok


def test_in_place_reference_requires_the_same_writes_and_no_others():
    source = ROTARY.read_text()
    extra_write = source + ("\n\nclass ModelNew(Model):\n    def forward(self, positions, query, key):\n"
                            "        out = super().forward(positions, query, key)\n"
                            "        positions.zero_()\n        return out\n")
    config = JudgeConfig(overrides=ROTARY_SIZES, **QUICK)
    own, copies, writes_more = JudgePool(config, cpu_workers=2).judge_many([
        (ROTARY, _own(ROTARY)), (ROTARY, CANDIDATES / "rotary_out_of_place.py"),
        (ROTARY, SourceText(extra_write, name="rotary_writes_positions"))])
    assert own.status == "pass", own.error
    assert own.reference["mutated_inputs"] == [1, 2] and not own.flags
    assert copies.status == "fail" and all(t.max_abs_err is not None for t in copies.trials)
    assert "input 1 (the reference updates it in place) differs from the reference" in copies.error
    assert writes_more.status == "fail"
    assert [f.code for f in writes_more.reject_flags()] == ["input_mutation"]
    assert "0" in writes_more.reject_flags()[0].message


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU answer for a CUDA reference")
def test_cuda_reference_on_cpu_is_reported_without_building_anything():
    problem = SUITE / "paged_kv_gather.py"
    verdict = judge(problem, _own(problem), JudgeConfig(**QUICK))
    assert verdict.status == "error" and verdict.stage == "load"
    assert "CUDA C++ extension built with load_inline (gather_paged_kv_kernel)" in verdict.error
    assert "needs a CUDA GPU" in verdict.error


@pytest.mark.gpu
def test_cuda_reference_builds_through_the_cache_and_is_the_baseline():
    problem = SUITE / "paged_kv_gather.py"
    sizes = {"num_seqs": 4, "max_blocks_per_seq": 8, "num_blocks": 64, "head_size": 64}
    verdict = judge(problem, _own(problem), JudgeConfig(overrides=sizes, **TIMED))
    assert verdict.status == "pass", verdict.error
    assert verdict.reference["kind"] == "cuda" and verdict.reference["cuda_kernels"] == ["gather_paged_kv_kernel"]
    assert verdict.reference["build"]["ok"] and verdict.reference["build"]["backend"] == "cuda"
    assert verdict.baselines.eager_label == "reference kernel (CUDA)" and "eager" in verdict.speedup


CPP_REFERENCE = '''"""Test problem (hand-written): a reference that is a C++ extension of its own (CPU tensors)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
torch::Tensor scale_add(torch::Tensor x, torch::Tensor y, double alpha) {
    auto xc = x.contiguous(), yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const float* xp = xc.data_ptr<float>();
    const float* yp = yc.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) op[i] = xp[i] + static_cast<float>(alpha) * yp[i];
    return out;
}
"""
ext = load_inline(name="kw_test_scale_add", cpp_sources=source, functions=["scale_add"])


class Model(nn.Module):
    def forward(self, x, y):
        return ext.scale_add(x, y, 0.5)


def get_inputs():
    return [torch.randn(64), torch.randn(64)]


def get_init_inputs():
    return []
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU extension reference: the CPU answer")
def test_the_reference_extension_builds_through_the_cache_and_its_errors_are_reported(tmp_path):
    good = tmp_path / "scale_add.py"
    good.write_text(CPP_REFERENCE)
    broken = tmp_path / "scale_add_broken.py"
    broken.write_text(CPP_REFERENCE.replace("return out;", "return out  // no semicolon"))
    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), **QUICK)
    verdict, failed = JudgePool(config, cpu_workers=2).judge_many([(good, _own(good)), (broken, _own(broken))])
    assert verdict.status == "pass", verdict.error
    build = verdict.reference["build"]
    assert verdict.reference["kind"] == "cuda" and not verdict.reference["device_code"]
    assert build["ok"] and build["backend"] == "cpp" and not build["cached"]
    assert verdict.compile.cached  # the candidate's copy of the same sources: the reference's build
    assert failed.status == "error" and failed.stage == "load"
    assert "The reference's own extension did not build" in failed.error and "error:" in failed.error
    again = judge(good, _own(good), config)
    assert again.reference["build"]["cached"] and again.status == "pass"
