"""Precision is judged by measurement: emulated single-pass TF32 fails an fp32 GEMM on the judge's
signed inputs, the 3-pass split (3xTF32) passes with a wide margin.

TF32 keeps float32's exponent and 10 of its 23 mantissa bits. Rounding both operands to TF32 before an
fp32-accumulated product is what a tensor core does in one pass; a = hi + lo with hi = tf32(a),
lo = tf32(a - hi), and hi*hi + hi*lo + lo*hi (the lo*lo term, ~2^-22 relative, dropped) is 3xTF32.
The inputs go through the judge's own trial variants and comparison (judge/check.py).
"""
from __future__ import annotations

import torch

from kernelwright.judge.check import compare, margin
from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.verdict import TrialResult
from kernelwright.problem.inputs import DEFAULT_CYCLE, apply_variant

M, K, N = 64, 4096, 64  # a KernelBench-like reduction length; M and N small to stay fast on a CPU


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (nearest, ties to even): clear the low 13 mantissa bits."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.to(torch.int32).view(torch.float32)


def single_pass(a, b):
    return tf32(a) @ tf32(b)


def three_pass(a, b):
    a_hi, b_hi = tf32(a), tf32(b)
    a_lo, b_lo = tf32(a - a_hi), tf32(b - b_hi)
    return a_hi @ b_hi + (a_hi @ b_lo + a_lo @ b_hi)


def judge_trials(product) -> list[TrialResult]:
    """One trial per input variant of the judge's cycle, compared as the judge compares."""
    results = []
    for index, variant in enumerate(DEFAULT_CYCLE):
        torch.manual_seed(index)
        a, b = apply_variant([torch.rand(M, K), torch.rand(K, N)], variant)
        cmp = compare([product(a, b)], [a @ b], JudgeConfig(), "cpu")
        results.append(TrialResult(trial=index, seed=index, variant=variant, ok=cmp.ok, rel_l2_err=cmp.rel_l2_err,
                                   error_ratio=cmp.error_ratio, rel_l2_ratio=cmp.rel_l2_ratio))
    return results


def test_tf32_rounding_keeps_ten_mantissa_bits():
    x = torch.tensor([1.0 + 2**-10, 1.0 + 2**-11, 1.0 + 3 * 2**-11, -3.0], dtype=torch.float32)
    assert tf32(x).tolist() == [1.0 + 2**-10, 1.0, 1.0 + 2 * 2**-10, -3.0]


def test_single_pass_tf32_fails_by_measured_error_on_signed_inputs():
    trials = judge_trials(single_pass)
    by_variant = {t.variant: t for t in trials}
    assert not by_variant["signed"].ok  # cancellation exposes the 10-bit mantissa
    assert by_variant["signed"].rel_l2_err > 1e-4 and by_variant["signed"].rel_l2_ratio > 1
    assert by_variant["given"].ok  # [0, 1) inputs alone would have let it through
    assert margin(trials)["worst"] > 1


def test_three_pass_split_passes_every_trial_with_a_wide_margin():
    trials = judge_trials(three_pass)
    assert all(t.ok for t in trials)
    worst = margin(trials)
    assert worst["rel_l2"] < 0.05 and worst["elementwise"] < 0.05
