"""Output comparison, fingerprints, poison detection and reference trial cases (in-process, fast)."""
from __future__ import annotations

import pytest
import torch

from kernelwright.judge import JudgeConfig
from kernelwright.judge import check
from kernelwright.problem import load_problem

CONFIG = JudgeConfig()


def compare(out, ref):
    return check.compare(check.flatten_outputs(out), check.flatten_outputs(ref), CONFIG, "cpu")


def test_identical_outputs_pass_with_zero_error():
    ref = torch.randn(8, 16)
    result = compare(ref.clone(), ref)
    assert result.ok and result.max_abs_err == 0.0 and result.rel_l2_err == 0.0


def test_small_float_noise_passes_and_is_measured():
    ref = torch.randn(64, 64)
    result = compare(ref + 1e-6, ref)
    assert result.ok
    assert result.max_abs_err == pytest.approx(1e-6, rel=0.1)


def test_wrong_values_fail_with_count_and_max_error():
    ref = torch.randn(4, 8)
    out = ref.clone()
    out[0, 0] += 1.0
    result = compare(out, ref)
    assert not result.ok
    assert "1 of 32 elements" in result.message
    assert result.max_abs_err == pytest.approx(1.0, rel=1e-5)


def test_all_zero_softmax_passes_allclose_but_fails_rel_l2():
    ref = torch.softmax(torch.rand(2, 32768), dim=1)
    zeros = torch.zeros_like(ref)
    assert torch.allclose(zeros, ref, atol=1e-4, rtol=1e-4)  # the premise: allclose alone is fooled
    result = compare(zeros, ref)
    assert not result.ok
    assert result.rel_l2_err == pytest.approx(1.0)
    assert "relative L2" in result.message


def test_all_zero_reference_is_judged_by_allclose_alone():
    ref = torch.zeros(100)
    near = compare(torch.full((100,), 5e-5), ref)
    assert near.ok and near.rel_l2_err is None  # no magnitude to be relative to
    assert not compare(torch.full((100,), 5e-4), ref).ok


def test_shape_mismatch_is_reported():
    result = compare(torch.zeros(4, 8), torch.zeros(8, 4))
    assert not result.ok and not result.shape_ok
    assert "(4, 8)" in result.message and "(8, 4)" in result.message


def test_lower_precision_dtype_fails_higher_passes():
    ref = torch.randn(8)
    low = compare(ref.half(), ref)
    assert not low.ok and not low.dtype_ok
    assert compare(ref.double(), ref).ok


def test_nan_where_reference_is_finite_fails():
    ref = torch.randn(8)
    out = ref.clone()
    out[3] = float("nan")
    result = compare(out, ref)
    assert not result.ok and result.nonfinite


def test_matching_nan_and_inf_positions_pass():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare(ref.clone(), ref).ok
    swapped = torch.tensor([1.0, float("nan"), -float("inf"), float("inf")])
    assert not compare(swapped, ref).ok


def test_integer_outputs_must_match_exactly():
    ref = torch.tensor([1, 2, 3])
    assert compare(ref.clone(), ref).ok
    assert not compare(torch.tensor([1, 2, 4]), ref).ok


def test_tuple_outputs_compare_each_and_count():
    a, b = torch.randn(3), torch.randn(2)
    assert compare((a.clone(), b.clone()), (a, b)).ok
    result = compare((a.clone(),), (a, b))
    assert not result.ok and "1 tensors" in result.message


def test_tensor_subclass_output_is_refused():
    class Sneaky(torch.Tensor):
        pass

    ref = torch.randn(4)
    result = check.compare([ref.clone().as_subclass(Sneaky)], [ref], CONFIG, "cpu")
    assert not result.ok and "plain torch.Tensor" in result.message


def test_flatten_outputs_handles_nesting_and_refuses_other_types():
    a = torch.ones(2)
    assert len(check.flatten_outputs((a, [a, 3]))) == 3
    with pytest.raises(check.OutputError):
        check.flatten_outputs({"y": a})


@pytest.mark.parametrize("tensor", [torch.randn(5, 7), torch.randint(0, 9, (11,)), torch.rand(6) > 0.5,
                                    torch.randn(4, dtype=torch.float16), torch.randn(3, dtype=torch.complex64)])
def test_fingerprint_sees_any_in_place_change(tensor):
    before = check.fingerprint(tensor)
    assert check.fingerprint(tensor.clone()) == before
    flat = tensor.view(-1)
    if tensor.dtype == torch.bool:
        flat[0] = ~flat[0]  # True + 1 stays True: flip instead
    else:
        flat[0] = flat[1] if not bool((flat[0] == flat[1]).all()) else flat[0] + 1
    assert check.fingerprint(tensor) != before


def test_poisoned_count_finds_unwritten_elements():
    t = torch.randn(10)
    assert check.poisoned_count(t) == 0
    t.view(torch.uint8)[:16] = 0xFF  # four float32 elements of pure poison bytes
    t.view(torch.uint8)[16:20] = 0xFE
    assert check.poisoned_count(t) == 5


PROBLEM_OVERFLOWS_ON_WIDE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.exp(x * 30)

n = 64

def get_inputs():
    return [torch.rand(n)]

def get_init_inputs():
    return []
'''


def test_reference_falls_back_to_given_when_a_variant_overflows(tmp_path):
    path = tmp_path / "exp_problem.py"  # hand-written test problem: finite on [0,1), inf on wide inputs
    path.write_text(PROBLEM_OVERFLOWS_ON_WIDE)
    problem = load_problem(path)
    model = problem.make_model(0)
    case, mutated = check.reference_case(problem, model, 3, 45, "wide", "cpu", lambda: None)
    assert case.variant == "given" and case.fallback_from == "wide"
    assert check.all_finite(case.ref_outputs) and not mutated


def test_reference_cases_regenerate_identical_inputs(tmp_path):
    path = tmp_path / "exp_problem.py"
    path.write_text(PROBLEM_OVERFLOWS_ON_WIDE)
    problem = load_problem(path)
    cases, refill, _ = check.reference_cases(problem, problem.make_model(0), 3, 42, "cpu", lambda: None)
    assert [c.seed for c in cases] == [42, 43, 44] and refill.variant == cases[0].variant
    again = check.make_inputs(problem, cases[0].seed, cases[0].variant, "cpu")
    assert torch.equal(torch.exp(again[0] * 30), cases[0].ref_outputs[0])


GIB = 1 << 30


def test_the_device_room_leaves_one_trial_room_beside_the_reference_outputs():
    room = check.DeviceRoom(free=80 * GIB, share=0.5)
    assert room.budget(0, 0) == 40 * GIB  # small trials: the share decides
    # 7.5 GiB in and out (a full-size norm problem): two inputs, four poisoned output blocks and the
    # margin stay free, so less than the share is kept
    assert room.budget(int(7.5 * GIB), int(7.5 * GIB)) == 80 * GIB - 15 * GIB - 30 * GIB - check.TRIAL_MARGIN
    assert room.budget(40 * GIB, 40 * GIB) == 0  # a trial alone does not fit: keep none
    assert check.DeviceRoom().budget(0, 0) == 0  # off a GPU
    assert check.DeviceRoom(free=80 * GIB, share=0.0).budget(0, 0) == 0


def test_a_host_copy_keeps_values_and_strides_in_storage_of_its_own():
    t = torch.arange(12.0).reshape(3, 4).t()  # transposed: strides (1, 4)
    copy = check.host_copy(t)
    assert torch.equal(copy, t) and copy.stride() == t.stride()
    copy.zero_()
    assert t.sum() == 66


@pytest.mark.gpu
def test_on_the_gpu_reference_outputs_stay_there_while_the_room_lasts(tmp_path):
    path = tmp_path / "exp_problem.py"
    path.write_text(PROBLEM_OVERFLOWS_ON_WIDE.replace("n = 64", "n = 1 << 20"))
    problem = load_problem(path)
    out = 4 << 20  # one case's outputs: 2**20 float32
    room = check.DeviceRoom(free=2 * out + 4 * out + check.TRIAL_MARGIN + 2 * out, share=1.0)  # two cases' worth
    sync = torch.cuda.synchronize
    cases, refill, _ = check.reference_cases(problem, problem.make_model(0, "cuda"), 3, 42, "cuda", sync, room=room)
    places = [c.ref_outputs[0].device.type for c in [*cases, refill]]
    assert places == ["cuda", "cuda", "cpu", "cpu"]
    again = check.make_inputs(problem, cases[2].seed, cases[2].variant, "cuda")
    assert torch.equal(problem.make_model(0, "cuda")(*again).cpu(), cases[2].ref_outputs[0])  # copied whole
    assert cases[0].input_bytes == out


def _blocked_matmul(a: torch.Tensor, b: torch.Tensor, block: int) -> torch.Tensor:
    """a @ b summed over K in blocks: a correct result in another summation order."""
    out = torch.zeros(a.shape[0], b.shape[1])
    for k in range(0, a.shape[1], block):
        out += a[:, k:k + block] @ b[k:k + block]
    return out


def test_scale_aware_atol_accepts_another_summation_order_on_wide_inputs():
    from kernelwright.problem.inputs import apply_variant

    torch.manual_seed(0)
    a, b = apply_variant([torch.randn(64, 2048), torch.randn(2048, 64)], "wide")  # |x| up to 100
    ref, out = a @ b, _blocked_matmul(a, b, 64)
    kernelbench_rule = (out - ref).abs() <= 1e-4 + 1e-4 * ref.abs()
    assert not bool(kernelbench_rule.all())  # the premise: plain allclose rejects a correct kernel
    result = compare(out, ref)
    assert result.ok, result.message
    assert result.atol_scale == pytest.approx(float(ref.pow(2).mean().sqrt()), rel=1e-6)
    assert result.rel_l2_err < 1e-6 and result.max_abs_err > 1e-3  # errors are reported for passes


def test_scale_aware_atol_still_rejects_real_errors_at_scale():
    torch.manual_seed(1)
    ref = torch.randn(64, 64) * 1000  # RMS ~1000: atol becomes 0.1
    out = ref.clone()
    out[3, 5] += 5.0  # 5 off where |ref| may be tiny: beyond 0.1 + 1e-4 * |ref| unless |ref| > 49000
    result = compare(out, ref)
    assert not result.ok and "1 of 4096 elements" in result.message and "RMS" in result.message


def test_outputs_of_unit_scale_keep_kernelbench_rule_exactly():
    ref = 0.95 + 0.04 * torch.rand(1000)  # RMS < 1: S = 1, atol = rtol = 1e-4 as in KernelBench
    assert not compare(ref + 1.01e-4 + 1e-4 * ref, ref).ok
    result = compare(ref + 0.9e-4, ref)
    assert result.ok and result.atol_scale == 1.0


class _InputsThatFailOnTheDevice:
    """A problem whose get_inputs() fails when drawn on the GPU (with `error`), and works on the CPU;
    `device` stands in for torch.device as make_inputs enters it (no GPU needed)."""

    def __init__(self, error: BaseException):
        self.error, self.calls, self.on_gpu = error, [], False

    def device(self, name):
        problem = self

        class Default:
            def __enter__(self):
                problem.on_gpu = str(name).startswith("cuda")

            def __exit__(self, *exc):
                problem.on_gpu = False

        return Default()

    def make_inputs(self, seed, variant, device):
        self.calls.append("gpu" if self.on_gpu else "cpu")
        if self.on_gpu:
            raise self.error
        return [torch.ones(4)]


def test_inputs_that_cannot_be_drawn_on_the_gpu_are_drawn_on_the_cpu_from_then_on(monkeypatch):
    problem = _InputsThatFailOnTheDevice(TypeError("can't convert cuda:0 device type tensor to numpy"))
    monkeypatch.setattr(check.torch, "device", problem.device)
    assert check.make_inputs(problem, 1, "given", "cuda")[0].tolist() == [1.0] * 4
    assert check.inputs_on_device(problem, "cuda") is False and problem.calls == ["gpu", "cpu"]


def test_running_out_of_gpu_memory_while_drawing_inputs_is_raised_not_answered_on_the_cpu(monkeypatch):
    problem = _InputsThatFailOnTheDevice(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB"))
    monkeypatch.setattr(check.torch, "device", problem.device)
    with pytest.raises(torch.OutOfMemoryError):
        check.make_inputs(problem, 1, "given", "cuda")
    assert check.inputs_on_device(problem, "cuda") is None and problem.calls == ["gpu"]  # decided later, not now


def test_what_counts_as_running_out_of_gpu_memory_is_what_the_pool_judges_again():
    from kernelwright.judge.scheduling.admission import names_oom

    for exc in (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"),
                RuntimeError("CUDA error: out of memory"), RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate")):
        assert check.out_of_memory(exc) and names_oom(f"{type(exc).__name__}: {exc}"), exc
    assert not check.out_of_memory(TypeError("can't convert cuda:0 device type tensor to numpy"))
