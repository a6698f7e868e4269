"""CPU shrink, domain-covering input variants and dispatch-level op recording."""
from __future__ import annotations

import torch

from kernelwright.problem import load_problem
from kernelwright.problem.inputs import apply_variant, variant_for_trial
from kernelwright.problem.ops import compute_ops, op_kinds, record_aten_ops
from kernelwright.problem.shrink import ShrinkBudget, measure


def test_shrink_fits_budget_and_keeps_semantic_constants(kernelbench):
    path = kernelbench / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
    full = load_problem(path)
    small = load_problem(path, shrink=ShrinkBudget(max_bytes=2 * 2**20, max_flops=5e7))
    footprint = measure(small)
    assert footprint.bytes <= 2 * 2**20 and footprint.flops <= 5e7
    assert small.shrunk and small.overrides
    assert small.module.kernel_size == full.module.kernel_size  # semantics untouched
    assert small.module.bias_shape == (small.module.out_channels, 1, 1)  # derived constants follow
    out = small.make_model(0)(*small.make_inputs(0))
    assert torch.isfinite(out).all()


def test_shrink_respects_user_overrides(kernelbench):
    path = kernelbench / "level1" / "23_Softmax.py"
    small = load_problem(path, {"batch_size": 3}, shrink=True)
    assert small.overrides["batch_size"] == 3
    assert small.module.dim < 393216


def test_variants_change_values_not_shapes():
    x = torch.rand(64, 32)
    labels = torch.randint(0, 5, (64,))
    for variant in ("given", "negated", "signed", "wide"):
        out, same_labels = apply_variant([x, labels], variant, seed=1)
        assert out.shape == x.shape and out.dtype == x.dtype
        assert torch.equal(same_labels, labels)
    assert (apply_variant([x], "signed", 1)[0] < 0).any()
    assert apply_variant([x], "wide", 1)[0].abs().max() > 4
    assert {variant_for_trial(i) for i in range(5)} == {"given", "negated", "signed", "wide_pos", "wide_neg"}


def test_the_wide_variants_reach_plus_and_minus_one_hundred_whatever_the_signs():
    """A softmax that forgets its max overflows only at +89: "wide" (magnitude 100) left every large
    value negative for some inputs; wide_pos reaches +100 and wide_neg -100 on every floating input."""
    for given in (torch.rand(64, 32), torch.randn(64, 32), -torch.rand(64, 32), torch.randn(64, 32) - 5):
        top = apply_variant([given], "wide_pos", 1)[0]
        bottom = apply_variant([given], "wide_neg", 1)[0]
        assert torch.isclose(top.max(), torch.tensor(100.0)) and torch.isclose(bottom.min(), torch.tensor(-100.0))
    sym = torch.randn(8, 8)
    sym = sym + sym.T
    for variant in ("wide_pos", "wide_neg"):
        out = apply_variant([sym], variant)[0]
        assert torch.allclose(out, out.T)


def test_variants_keep_structure():
    a = torch.rand(16, 16)
    sym, tri = (a + a.T) / 2, torch.tril(a)
    for variant in ("signed", "wide", "negated"):
        s, t = apply_variant([sym, tri], variant)
        assert torch.allclose(s, s.T) and torch.equal(t, torch.tril(t))


def test_op_recording_sees_dispatch_not_source(kernelbench):
    problem = load_problem(kernelbench / "level2" / "9_Matmul_Subtract_Multiply_ReLU.py", shrink=True)
    ops = record_aten_ops(problem.make_model(0), *problem.make_inputs(0))
    assert {"matmul", "elementwise"} <= op_kinds(ops)
    assert compute_ops(ops)  # the linear layer's matmul is compute
    # a plain elementwise function records no compute op
    assert not compute_ops(record_aten_ops(lambda t: torch.relu(t * 2), torch.ones(4)))
